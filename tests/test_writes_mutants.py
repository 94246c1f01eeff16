"""The "writes" rows catch the mistakes one makes writing workbook 7, each with the hint that names it.

As in tests/test_check_mutants.py, each mutant is the model answer of workbook 7
(`teachers/source/workbooks/07_writes.ipynb`, its cells tagged `agent-loop`) with one small source substitution,
so that each mistake sits in otherwise correct code.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from agentlab import agent_loop
from agentlab.behaviours import select
from agentlab.classroom.check import check

WORKBOOK = Path(__file__).resolve().parent.parent / "teachers" / "source" / "workbooks" / "07_writes.ipynb"
BOUND_S = 1.5


def model_answer() -> str:
    cells = json.loads(WORKBOOK.read_text(encoding="utf-8"))["cells"]
    return "\n\n".join("".join(c["source"]) for c in cells if "agent-loop" in c["metadata"].get("tags", []))


@dataclass(frozen=True)
class Mutant:
    """A mistake: `edits` are (old, new) substitutions, each `old` found exactly once; `caught` maps row -> hint id."""

    name: str
    mistake: str
    edits: tuple[tuple[str, str], ...]
    caught: dict[str, str]


MUTANTS = (
    Mutant(
        "no_policy_check",
        "forgets that a write without an approve policy is refused",
        (("    if approve is None:\n", "    if False:\n"),),
        {"writes_need_approval": "writes_need_approval/*:no_policy"},
    ),
    Mutant(
        "writes_checked_one_by_one",
        "checks approval and the write budget for each write as it comes, after the calls before it ran",
        (
            ("            check_writes(batch, approve, writes_done, max_writes)\n", ""),
            (
                "                if checked.tool.writes:\n",
                "                if checked.tool.writes:\n"
                "                    check_writes([checked], approve, writes_done, max_writes)\n",
            ),
        ),
        {
            "writes_need_approval": "writes_need_approval/*:no_policy",
            "write_budget_checked_first": "write_budget_checked_first/*:over",
        },
    ),
    Mutant(
        "truthy_answers",
        "decides by truthiness, so 'yes' approves and None denies",
        (
            (
                "    if type(answer) is bool:\n        return Approval(answer)\n",
                "    if not isinstance(answer, Approval):\n        return Approval(bool(answer))\n",
            ),
        ),
        {"denial_is_the_result": "denial_is_the_result/*:odd_answer"},
    ),
    Mutant(
        "denial_raises",
        "ends the run on a denial instead of returning it to the model",
        (
            (
                '                        content = compact_json({"denied": True, "reason": reason})\n',
                '                        raise ApprovalError(f"denied: {reason}")\n',
            ),
        ),
        {
            "denial_is_the_result": "denial_is_the_result/*:denial_raised",
            "write_budget_checked_first": "write_budget_checked_first/*:denial_raised",
        },
    ),
    Mutant(
        "denial_without_reason",
        "tells the model only that the write was denied, not why",
        (('compact_json({"denied": True, "reason": reason})', 'compact_json({"denied": True})'),),
        {"denial_is_the_result": "denial_is_the_result/denial_content"},
    ),
    Mutant(
        "budget_off_by_one",
        "refuses a batch that would use the last write left",
        (("    if len(writes) > left:\n", "    if len(writes) >= left:\n"),),
        {"write_budget_checked_first": "write_budget_checked_first/*:exact"},
    ),
    Mutant(
        "budget_per_batch",
        "checks max_writes against each batch alone, not what the run has written",
        (("    left = max_writes - writes_done\n", "    left = max_writes\n"),),
        {"write_budget_checked_first": "write_budget_checked_first/*:over"},
    ),
    Mutant(
        "denied_writes_counted",
        "counts a write when it is proposed, so a denied write uses the budget",
        (
            ("                        writes_done += 1\n", ""),
            (
                "                    approval = await ask_approval(",
                "                    writes_done += 1\n                    approval = await ask_approval(",
            ),
        ),
        {"write_budget_checked_first": "write_budget_checked_first/*:denied_counted"},
    ),
    Mutant(
        "no_idempotency_key",
        "runs the write like a read, without its call: the tool cannot tell a retry from a new request",
        (
            (
                "        result = await invoke(checked.tool.run, checked.value, signal, tool_call)\n",
                "        result = await invoke(checked.tool.run, checked.value, signal)\n",
            ),
        ),
        {"approval_before_each_write": "approval_before_each_write/no_key"},
    ),
    Mutant(
        "policy_sees_the_value",
        "shows the policy what validate returned instead of the args the model proposed",
        (
            (
                "invoke(approve, ToolCall(checked.id, checked.name, copy.deepcopy(checked.args)), signal)",
                "invoke(approve, ToolCall(checked.id, checked.name, checked.value), signal)",
            ),
        ),
        {"approval_before_each_write": "approval_before_each_write/approve_call"},
    ),
    Mutant(
        "async_policies_only",
        "awaits the policy directly, so a plain function policy breaks the run",
        (
            (
                "    answer = await invoke(approve, ToolCall(",
                "    answer = await approve(ToolCall(",
            ),
        ),
        {"approval_before_each_write": "approval_before_each_write/*:raised"},
    ),
    Mutant(
        "no_grace",
        "raises the moment the run is stopped, leaving a write in flight half done",
        (("        if writing:", "        if False:"),),
        {"stopped_write_settles": "stopped_write_settles/no_grace"},
    ),
)


def mutate(source: str, mutant: Mutant) -> str:
    for old, new in mutant.edits:
        assert source.count(old) == 1, f"{mutant.name}: {old!r} is in the model answer {source.count(old)} times"
        source = source.replace(old, new)
    return source


def agent_loop_of(source: str, name: str):
    namespace: dict = {"__name__": f"mutant_{name}"}
    exec(compile(source, f"<{name}>", "exec"), namespace)
    return namespace["agent_loop"]


def test_the_package_loop_and_the_model_answer_pass_every_write_row_and_the_exercise() -> None:
    assert check(agent_loop, step="writes").passed
    answer = agent_loop_of(model_answer(), "model_answer")
    for step in ("writes", None):
        # the write rows are quick; the exercise's deadline rows take longer than BOUND_S on purpose
        report = check(answer, step=step, bound_s=BOUND_S) if step else check(answer)
        assert report.passed, str(report)


def test_a_loop_without_writes_fails_every_write_row() -> None:
    source = (WORKBOOK.parent / "06_limits.ipynb").read_text(encoding="utf-8")
    cells = json.loads(source)["cells"]
    code = "\n\n".join("".join(c["source"]) for c in cells if "agent-loop" in c["metadata"].get("tags", []))
    report = check(agent_loop_of(code, "workbook_5"), step="writes", bound_s=BOUND_S)
    assert [row.key for row in report.failures] == [b.key for b in select("writes")]


@pytest.mark.parametrize("mutant", MUTANTS, ids=[m.name for m in MUTANTS])
def test_each_write_mistake_fails_exactly_its_rows_with_the_right_hint(mutant: Mutant) -> None:
    report = check(agent_loop_of(mutate(model_answer(), mutant), mutant.name), step="writes", bound_s=BOUND_S)
    caught = {row.key: row.hint_id for row in report.failures}
    assert caught == mutant.caught, f"{mutant.name} ({mutant.mistake}):\n{report}"
