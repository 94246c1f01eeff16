"""The "recovery" rows can fail: each mistake fails exactly the rows it should, with the right hint.

The mutants are agentlab's own loop (agentlab/loop.py, and its recovery path, agentlab/loop_refusals.py) with one
small source substitution each, as in tests/test_check_mutants.py: the workbooks' model answer has no
`max_refusals`, so the one loop that does is the one to mutate. Each mistake is one a reader of notebook 11 could make.
"""

from __future__ import annotations

import sys
import types
from dataclasses import dataclass
from pathlib import Path

import pytest

from agentlab.classroom.check import check

LOOP = Path(__file__).resolve().parent.parent / "agentlab" / "loop.py"
REFUSALS = LOOP.with_name("loop_refusals.py")
BOUND_S = 2.5


@dataclass(frozen=True)
class Mutant:
    """A mistake: `edits` are (old, new) substitutions, each `old` found exactly once; `caught` maps row -> hint id."""

    name: str
    mistake: str
    edits: tuple[tuple[str, str], ...]
    caught: dict[str, str]


MUTANTS = (
    Mutant(
        "returns_at_zero",
        "returns one refusal to the model even when max_refusals=0",
        (
            (
                "        if run.usage.refusals >= self.max_refusals:",
                "        if run.usage.refusals > self.max_refusals:",
            ),
        ),
        {
            "zero_refusals_is_todays_contract": "zero_refusals_is_todays_contract/*",
            "refusal_answers_every_call": "refusal_answers_every_call/zero_first",
            "refusal_budget_ends_the_run": "refusal_budget_ends_the_run/*",
        },
    ),
    Mutant(
        "answers_only_the_refused_call",
        "answers the refused call and leaves its batch-mates unanswered",
        (
            (
                "            if number == run.checking:\n",
                "            if number != run.checking:\n                continue\n            if True:\n",
            ),
        ),
        {
            "refusal_answers_every_call": "refusal_answers_every_call/*",
            "refusals_tie_to_usable_ids": "refusals_tie_to_usable_ids/*",
        },
    ),
    Mutant(
        "own_words",
        "tells the model 'invalid call' instead of the error's own words",
        (('content = {"refused": refusal.message}', 'content = {"refused": "invalid call, try again"}'),),
        {"refusal_answers_every_call": "refusal_answers_every_call/*"},
    ),
    Mutant(
        "keeps_duplicate_ids",
        "answers a duplicate id under that same id, so one id gets two tool messages",
        (
            (
                "if not isinstance(call_id, str) or not call_id or call_id in run.seen_ids:",
                "if not isinstance(call_id, str) or not call_id:",
            ),
        ),
        {
            "refusal_answers_every_call": "refusal_answers_every_call/*:duplicate_id",
            "refusals_tie_to_usable_ids": "refusals_tie_to_usable_ids/*",
        },
    ),
    Mutant(
        "runs_the_good_calls",
        "runs the calls checked before the refused one, then returns the refusal",
        (
            (
                "        for number, call in enumerate(calls, 1):\n            self.checking = number",
                "        self.checked_so_far = checked\n"
                "        for number, call in enumerate(calls, 1):\n            self.checking = number",
            ),
            (
                "                self.refusals.give_back(payload, refusal, spent)",
                "                for good in self.checked_so_far:\n"
                "                    await self.run_tool(good)\n"
                "                self.refusals.give_back(payload, refusal, spent)",
            ),
        ),
        {
            "zero_refusals_is_todays_contract": "zero_refusals_is_todays_contract/ran:*",
            "returned_batch_never_runs": "returned_batch_never_runs/*",
            "refusal_budget_ends_the_run": "refusal_budget_ends_the_run/ran:*",
        },
    ),
    Mutant(
        "limits_returned",
        "returns a blown tool budget to the model as if it were a refusal",
        (
            (
                "REFUSALS = (UnknownToolError,",
                "REFUSALS = (ToolBudgetError, UnknownToolError,",
            ),
        ),
        {"limits_are_not_refusals": "limits_are_not_refusals/*"},
    ),
)


def mutant_loop(mutant: Mutant):
    """loop.py and its recovery path (loop_refusals.py), each edit made in the one file that holds it."""
    sources = {path: path.read_text(encoding="utf-8") for path in (LOOP, REFUSALS)}
    for old, new in mutant.edits:
        found = [path for path, source in sources.items() if source.count(old) == 1]
        total = sum(source.count(old) for source in sources.values())
        assert total == 1 and found, f"{mutant.name}: {old!r} is in loop.py and loop_refusals.py {total} times"
        sources[found[0]] = sources[found[0]].replace(old, new)
    refusals = _module(f"mutant_{mutant.name}_refusals", sources[REFUSALS])
    original = sys.modules["agentlab.loop_refusals"]
    sys.modules["agentlab.loop_refusals"] = refusals  # the mutant loop imports the mutant recovery path
    try:
        return _module(f"mutant_{mutant.name}", sources[LOOP]).agent_loop
    finally:
        sys.modules["agentlab.loop_refusals"] = original


def _module(name: str, source: str) -> types.ModuleType:
    module = types.ModuleType(name)
    sys.modules[name] = module  # dataclasses look their module up
    try:
        exec(compile(source, f"<{name}>", "exec"), module.__dict__)
    finally:
        del sys.modules[name]
    return module


def test_the_loop_itself_passes_every_recovery_row() -> None:
    report = check(mutant_loop(Mutant("none", "no mistake", (), {})), "recovery", bound_s=BOUND_S)
    assert report.passed and len(report.rows) >= 6, str(report)


@pytest.mark.parametrize("mutant", MUTANTS, ids=[m.name for m in MUTANTS])
def test_each_recovery_mistake_fails_exactly_its_rows_with_the_right_hint(mutant: Mutant) -> None:
    report = check(mutant_loop(mutant), "recovery", bound_s=BOUND_S)
    caught = {row.key: row.hint_id for row in report.failures}
    assert caught == mutant.caught, f"{mutant.name} ({mutant.mistake}):\n{report}"


def test_a_loop_without_max_refusals_fails_every_recovery_row() -> None:
    from agentlab import agent_loop

    async def workbook_loop(
        input,
        model,
        tools=None,
        *,
        max_turns=6,
        max_calls=8,
        timeout_ms=5000,
        max_chars=50_000,
        signal=None,
        forbid_repeats=False,
    ):
        return await agent_loop(
            input,
            model,
            tools,
            max_turns=max_turns,
            max_calls=max_calls,
            timeout_ms=timeout_ms,
            max_chars=max_chars,
            signal=signal,
            forbid_repeats=forbid_repeats,
        )

    rows = check(workbook_loop, "recovery", bound_s=BOUND_S).rows
    assert {(row.passed, row.hint_id) for row in rows} == {(False, "diagnosis/no_max_refusals")}
