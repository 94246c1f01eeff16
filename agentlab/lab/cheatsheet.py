"""The one-page cheat-sheet: each rule of the loop, its error, the phrase it says, its notebook, its line in loop.py.

    from agentlab.lab.cheatsheet import cheatsheet
    cheatsheet()      # a table; the loop.py lines are found in the source when shown, so they never go stale

A rule's place in `agentlab/loop.py` is found by an anchor: the method it lives
in and the first line after it that names the rule's error class (or, for the
race, a line of its own). A test checks that every anchor is found.

A rule's words and the table's headings are translated when the table is made (`agentlab.i18n`); the error
classes, the phrases (the contract the exercise's tests match) and the notebooks' names stay as they are.
"""

from __future__ import annotations

import html
import inspect
from dataclasses import dataclass
from typing import Any

from agentlab import loop
from agentlab.i18n import _
from agentlab.lab import _look as look


@dataclass(frozen=True)
class Rule:
    """One rule: what it says, the error it raises, the phrase in the message, the notebook, where in loop.py."""

    rule: str
    error: str
    phrase: str
    notebook: str
    method: str  # the method of loop.py's _Run that holds it
    marker: str  # the first line after `def method` that contains this text is the rule's line


RULES: tuple[Rule, ...] = (
    Rule("a result goes back tied to its call id", "—", "", "01_call_ids", "steps", '"call_id"'),
    Rule(
        "a decision has the right shape",
        "ModelOutputError",
        "malformed",
        "02_tool_names",
        "check_decision",
        "malformed",
    ),
    Rule(
        "a name is an exact key of tools",
        "UnknownToolError",
        "unknown tool",
        "02_tool_names",
        "check_batch",
        "UnknownToolError",
    ),
    Rule(
        "the args pass validate before anything runs",
        "ToolArgsError",
        "invalid args",
        "03_tool_args",
        "validate",
        "ToolArgsError",
    ),
    Rule("a tool that raises or returns non-JSON", "ToolError", "tool", "03_tool_args", "run_tool", "ToolError"),
    Rule(
        "the model is called at most max_turns times",
        "TurnBudgetError",
        "turn budget",
        "04_budgets",
        "check_before_model_call",
        "TurnBudgetError",
    ),
    Rule(
        "a batch fits what is left of max_calls",
        "ToolBudgetError",
        "tool budget",
        "04_budgets",
        "check_batch_size",
        "ToolBudgetError",
    ),
    Rule(
        "a call id is new in the run",
        "DuplicateCallIdError",
        "duplicate call id",
        "05_duplicate_ids",
        "check_batch",
        "DuplicateCallIdError",
    ),
    Rule("the whole run ends by timeout_ms", "DeadlineError", "deadline", "06_deadline", "race", "b) the deadline"),
    Rule(
        "the history fits max_chars",
        "ContextBudgetError",
        "context budget",
        "07_limits_and_cancellation",
        "check_before_model_call",
        "ContextBudgetError",
    ),
    Rule(
        "the answer fits max_chars",
        "OutputBudgetError",
        "output budget",
        "07_limits_and_cancellation",
        "finish",
        "OutputBudgetError",
    ),
    Rule(
        "the outside signal stops the run",
        "its own reason",
        "(the caller's)",
        "07_limits_and_cancellation",
        "race",
        "c) the outside signal",
    ),
    Rule(
        "a write needs the application's yes",
        "ApprovalError (or a denial)",
        "approval required",
        "09a_approval",
        "check_batch",
        "self.writes.check",
    ),
    Rule("a refused batch may go back to the model", "the refusal's own", "", "11_recovery", "steps", "give_back"),
)


# The error and phrase cells that are words, not a class name or a contract phrase: only these are translated.
PROSE = frozenset({"its own reason", "ApprovalError (or a denial)", "the refusal's own", "(the caller's)"})


def _said(text: str) -> str:
    return _(text) if text in PROSE else text


def line_of(rule: Rule) -> int:
    """The line of loop.py where `rule` is enforced (1-based)."""
    source, first = inspect.getsourcelines(loop._Run)
    inside = False
    for offset, text in enumerate(source):
        if text.strip().startswith((f"def {rule.method}(", f"async def {rule.method}(")):
            inside = True
        elif inside and rule.marker in text:
            return first + offset
    raise LookupError(f"loop.py has no line with {rule.marker!r} in {rule.method}: update agentlab/lab/cheatsheet.py")


@dataclass(frozen=True)
class Cheatsheet:
    """The table, as HTML for a notebook and as text for a terminal."""

    rows: tuple[tuple[str, str, str, str, str], ...]

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, str]:
        return {"text/plain": self.text(), "text/html": self.html()}

    def text(self) -> str:
        return "\n".join(
            f"{rule}\n    {error} · {_('says {phrase}').format(phrase=phrase or '-')} · {notebook}\n    {where}"
            for rule, error, phrase, notebook, where in self.rows
        )

    def html(self) -> str:
        cell = look.attr(look.CELL)
        names = (_("rule"), _("error"), _("says"), _("notebook"), _("in loop.py"))
        head = "".join(f"<th{cell}>{html.escape(name)}</th>" for name in names)
        body = "".join(
            f"<tr{look.attr(look.ROW)}>" + "".join(f"<td{cell}>{html.escape(value)}</td>" for value in row) + "</tr>"
            for row in self.rows
        )
        return f"<table{look.attr(f'{look.TABLE};{look.SANS}')}><tr{look.attr(look.ROW)}>{head}</tr>{body}</table>"


def cheatsheet() -> Cheatsheet:
    """Every rule with its error, the phrase its message says, its notebook and its line in agentlab/loop.py."""
    rows = tuple(
        (_(r.rule), _said(r.error), _said(r.phrase), r.notebook, f"loop.py:{line_of(r)} ({r.method})") for r in RULES
    )
    return Cheatsheet(rows)


__all__ = ["PROSE", "RULES", "Cheatsheet", "Rule", "cheatsheet", "line_of"]
