"""agentlab: a bounded agent loop to learn from.

The model proposes; the application verifies and executes. `agent_loop` is
that application: it checks every proposal whole before anything runs, and
holds every limit (turns, tool calls, time, context) itself.

Only the standard library is imported here, and only the core: the files at
the top of this folder, starting with `loop.py`. The folders are optional
parts, each imported only when you import it:

    lab/        the notebook face: playgrounds, traces, scripted models, example tools
    writes/     a real store and an approval desk (notebooks 09a-09d)
    models/     adapters for real models (OpenAI, Anthropic, local servers; notebook 10)
    classroom/  the checker, grading and the learners' workbooks (teachers)
    testing/    the adversarial test library (developers)
"""

import sys

# One clear sentence instead of a SyntaxError deep in the loop on an old Python (pip says it too, with
# requires-python, but a learner may put the folder on sys.path by hand).
if sys.version_info < (3, 11):  # noqa: UP036 - the check is for interpreters older than the target
    raise ImportError(f"agentlab needs Python 3.11 or newer; this is Python {sys.version.split()[0]}.")

from agentlab.abort import AbortController, AbortSignal
from agentlab.adapters import from_decider
from agentlab.errors import (
    AbortError,
    AgentError,
    ApprovalError,
    BudgetError,
    ConfigError,
    ContextBudgetError,
    DeadlineError,
    DuplicateCallIdError,
    ModelError,
    ModelOutputError,
    OutputBudgetError,
    RepeatedCallError,
    StuckCalleeError,
    TokenBudgetError,
    ToolArgsError,
    ToolBudgetError,
    ToolError,
    TurnBudgetError,
    UnknownToolError,
    WriteBudgetError,
)
from agentlab.jsonc import compact_json
from agentlab.loop import AgentResult, Messages, Usage, agent_loop
from agentlab.sync import agent_loop_sync
from agentlab.tools import Approval, Tool, ToolCall, parse_lookup_args

__version__ = "0.1.0"


def __getattr__(name: str) -> object:
    """`agentlab.render_text`, imported when first used: the trace lives in agentlab/lab/, which the core
    never imports on its own (print(render_text(result)) in a script shows the trace, not the dataclass)."""
    if name == "render_text":
        from agentlab.lab.trace import render_text

        return render_text
    raise AttributeError(f"module 'agentlab' has no attribute {name!r}")


__all__ = [
    "AbortController",
    "AbortError",
    "AbortSignal",
    "AgentError",
    "AgentResult",
    "Approval",
    "ApprovalError",
    "BudgetError",
    "ConfigError",
    "ContextBudgetError",
    "DeadlineError",
    "DuplicateCallIdError",
    "Messages",
    "ModelError",
    "ModelOutputError",
    "OutputBudgetError",
    "RepeatedCallError",
    "StuckCalleeError",
    "TokenBudgetError",
    "Tool",
    "ToolArgsError",
    "ToolBudgetError",
    "ToolCall",
    "ToolError",
    "TurnBudgetError",
    "UnknownToolError",
    "Usage",
    "WriteBudgetError",
    "agent_loop",
    "agent_loop_sync",
    "compact_json",
    "from_decider",
    "parse_lookup_args",
    "render_text",
]
