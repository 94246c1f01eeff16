"""What a run gives back: the final text, the history, what it spent and the limits it had.

`agent_loop` returns an `AgentResult`; an `AgentError` carries the same
`history`, `usage` and `limits` of the run as it stopped.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from agentlab.history import Message

# The default of `write_grace_ms`: how long a write that is running when the
# deadline or an abort fires gets to commit or roll back, so that the history
# can say which.
WRITE_GRACE_MS = 1000


@dataclass
class Usage:
    """What a run spent: model calls, tool runs, history size, wall time, writes, refusals, tokens.

    Tokens are what a real model reports (the adapters of `agentlab.models`);
    fakes report none, and then the repr leaves them out.
    """

    turns: int = 0
    calls: int = 0
    chars: int = 0
    elapsed_ms: float = 0.0
    writes: int = 0
    refusals: int = 0
    input_tokens: int = 0
    output_tokens: int = 0

    @property
    def tokens(self) -> int:
        """Input and output tokens together: what `max_tokens` counts."""
        return self.input_tokens + self.output_tokens

    def __repr__(self) -> str:
        shown = [f for f in dataclasses.fields(self) if not f.name.endswith("_tokens") or getattr(self, f.name)]
        return f"Usage({', '.join(f'{f.name}={getattr(self, f.name)!r}' for f in shown)})"


@dataclass(frozen=True)
class Limits:
    """The limits a run was given, kept with its result so a trace can show used vs allowed."""

    max_turns: int
    max_calls: int
    timeout_ms: float
    max_chars: int
    max_writes: int = 0
    max_refusals: int = 0
    # Not a budget: how long past a stop a write in flight may settle. Left out of the repr,
    # which shows budgets.
    write_grace_ms: float = field(default=WRITE_GRACE_MS, repr=False)
    max_tokens: int | None = None  # None: no token limit (and no place in the repr)

    def __repr__(self) -> str:
        shown = [f for f in dataclasses.fields(self) if f.repr and (f.name != "max_tokens" or self.max_tokens)]
        return f"Limits({', '.join(f'{f.name}={getattr(self, f.name)!r}' for f in shown)})"


@dataclass
class AgentResult:
    """A finished run: the final `text`, the whole `history`, the `usage` and the `limits`."""

    text: str
    history: list[Message]
    usage: Usage
    limits: Limits | None = None

    def _repr_html_(self) -> str:
        """The trace, when a notebook shows the result (the renderer is imported only then)."""
        from agentlab.lab.trace import render_html

        return render_html(self)


__all__ = ["WRITE_GRACE_MS", "AgentResult", "Limits", "Usage"]
