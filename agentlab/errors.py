"""Every way a run can fail, as one family of exceptions.

Errors are part of the interface. Each subclass of `AgentError` names one rule
the application enforced, its message says what happened and what to change,
and it carries what the run had done so far (`history`, `usage`) so nothing is
lost. Tests, notebooks and the student checker match on the quoted phrase in
each message ("unknown tool", "tool budget", ...), exactly as the reference
tests of the exercise do.
"""

from __future__ import annotations

from typing import Any


class AgentError(Exception):
    """Base class: a run of `agent_loop` ended because a rule was enforced.

    `history` is a copy of the messages up to the failure, `usage` what was
    spent, `limits` what the run was allowed, and `rejected` the model's
    decision that was refused (when the failure was a check of that decision;
    nothing of it ran).
    """

    def __init__(
        self,
        message: str,
        *,
        history: list[dict[str, Any]] | None = None,
        usage: Any = None,
        limits: Any = None,
        rejected: Any = None,
    ) -> None:
        super().__init__(message)
        self.history: list[dict[str, Any]] = list(history or [])
        self.usage = usage
        self.limits = limits
        self.rejected = rejected

    @property
    def message(self) -> str:
        return str(self.args[0]) if self.args else ""

    def _repr_html_(self) -> str:
        from agentlab.lab.trace import render_html

        return render_html(self)


class ConfigError(AgentError, ValueError):
    """An argument of `agent_loop` (a limit, the model, a tool) is unusable."""


class ModelOutputError(AgentError):
    """The model's decision, or one of its calls, is malformed."""


class ModelError(AgentError):
    """The model raised instead of answering; the original is `__cause__`."""


class UnknownToolError(AgentError):
    """The model asked for a tool that is not an exact key of `tools`."""


class ToolArgsError(AgentError):
    """A tool's `validate` rejected the args; the original is `__cause__`."""


class DuplicateCallIdError(AgentError):
    """A call id was used before in this run."""


class RepeatedCallError(AgentError):
    """With `forbid_repeats`, the same tool and args were asked for again."""


class ToolError(AgentError):
    """A tool raised (the original is `__cause__`) or returned non-JSON."""


class ApprovalError(AgentError):
    """A write had no approval policy to ask ("approval required"), or the policy raised."""


class BudgetError(AgentError):
    """A limit of the run was reached; `limit` names it, `value` is its value."""

    limit: str = ""

    def __init__(self, message: str, *, value: int | float | None = None, **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        self.value = value


class TurnBudgetError(BudgetError):
    """More model calls were needed than `max_turns` allows."""

    limit = "max_turns"


class ToolBudgetError(BudgetError):
    """A batch asked for more tool calls than `max_calls` has left."""

    limit = "max_calls"


class WriteBudgetError(BudgetError):
    """A batch asked for more writes than `max_writes` has left."""

    limit = "max_writes"


class DeadlineError(BudgetError):
    """The run took longer than `timeout_ms`."""

    limit = "timeout_ms"


class ContextBudgetError(BudgetError):
    """The history grew past `max_chars` before a model call."""

    limit = "max_chars"


class TokenBudgetError(BudgetError):
    """A real model's reported tokens reached `max_tokens`."""

    limit = "max_tokens"


class OutputBudgetError(BudgetError):
    """The final text is longer than `max_chars`."""

    limit = "max_chars"


class StuckCalleeError(AgentError):
    """Too many worker threads are stuck in plain models or tools that earlier runs gave up on."""


class AbortError(AgentError):
    """The default reason of `AbortController.abort()` when none is given."""


# -- words for the messages -------------------------------------------------------------------------------------------


def plural(count: int, noun: str) -> str:
    """ "1 tool call", "2 tool calls": a count in an error message."""
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def number_text(value: float) -> str:
    """A limit as the user wrote it: 1000, not 1000.0."""
    return str(int(value)) if float(value).is_integer() else str(value)


__all__ = [
    "AbortError",
    "AgentError",
    "ApprovalError",
    "BudgetError",
    "ConfigError",
    "ContextBudgetError",
    "DeadlineError",
    "DuplicateCallIdError",
    "ModelError",
    "ModelOutputError",
    "OutputBudgetError",
    "RepeatedCallError",
    "StuckCalleeError",
    "TokenBudgetError",
    "ToolArgsError",
    "ToolBudgetError",
    "ToolError",
    "TurnBudgetError",
    "UnknownToolError",
    "WriteBudgetError",
]
