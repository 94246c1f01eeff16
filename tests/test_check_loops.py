"""Loops written from scratch, outside the workbook: every wrong one is caught with a hint for its real mistake,
every right one passes every row.

tests/fixtures/loops/wrong/<style>__<mistake>.py each start with a docstring naming the mistake and the rule it
breaks; tests/fixtures/loops/right/ are correct loops in other styles than the workbook's. EXPECTED says, for each
wrong loop, the row that must catch it and the hint that must name its mistake.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest

from agentlab.behaviours import get
from agentlab.check import BOUND_S, _run_behaviour, check

LOOPS = Path(__file__).resolve().parent / "fixtures" / "loops"
WRONG = sorted((LOOPS / "wrong").glob("*.py"))
RIGHT = sorted((LOOPS / "right").glob("*.py"))

EXPECTED: dict[str, tuple[str, str]] = {
    "classes__budget_counts_turns_only": ("tool_and_turn_budgets", "tool_and_turn_budgets/*:calls_per_turn"),
    "classes__context_counts_last_message": ("context_counts_calls", "context_counts_calls/undercount:turns"),
    "classes__ids_of_last_turn_only": ("duplicate_call_id", "duplicate_call_id/*:turns_later"),
    "classes__shallow_history_copy": ("model_sees_snapshot", "model_sees_snapshot/shared_history"),
    "classes__signal_waiter_left_running": ("signal_aborted_on_deadline", "*/leaked_tasks"),
    "timeout__abort_reason_rewrapped": ("abort_midway", "abort_midway/abort_identity"),
    "timeout__names_case_insensitive": ("unknown_tool", "unknown_tool/*:near_name"),
    "timeout__signal_only_checked_at_start": ("abort_midway", "abort_midway/hung"),
    "timeout__validated_value_ignored": ("args_copied_at_boundary", "args_copied_at_boundary/validated_value_ignored"),
    "timeout__wait_for_per_step": ("deadline_covers_tools", "deadline_covers_tools/*:per_step"),
}


def agent_loop_in(path: Path) -> Any:
    spec = importlib.util.spec_from_file_location(f"fixture_{path.parent.name}_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.agent_loop


def test_every_wrong_loop_names_its_mistake_and_has_an_expectation() -> None:
    assert len(WRONG) >= 10 and len(RIGHT) >= 2
    for path in WRONG:
        assert path.read_text(encoding="utf-8").lstrip().startswith('"""'), f"{path.name}: no docstring"
    assert sorted(EXPECTED) == sorted(p.stem for p in WRONG)


@pytest.mark.parametrize("path", WRONG, ids=[p.stem for p in WRONG])
def test_each_wrong_loop_is_caught_by_its_row_with_the_hint_for_its_mistake(path: Path) -> None:
    key, hint_id = EXPECTED[path.stem]
    row = _run_behaviour(get(key), agent_loop_in(path), BOUND_S)
    assert not row.passed, f"{path.stem}: {key} passed"
    assert row.hint_id == hint_id, f"{path.stem}: {row}"


@pytest.mark.parametrize("path", RIGHT, ids=[p.stem for p in RIGHT])
def test_each_right_loop_passes_every_row(path: Path) -> None:
    report = check(agent_loop_in(path))
    assert report.passed, str(report)
