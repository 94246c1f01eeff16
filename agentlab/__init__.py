"""agentlab: a bounded agent loop to learn from.

The model proposes; the application verifies and executes. `agent_loop` is
that application: it checks every proposal whole before anything runs, and
holds every limit (turns, tool calls, time, context) itself.

Only the standard library is imported here. The optional parts (the
`widgets` playground, the `store` and its `approval` desk, the `check`er) import their own
dependencies when you import them.
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
from agentlab.trace import render_text  # print(render_text(result)) in a script: the trace, not the dataclass

__version__ = "0.1.0"

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
