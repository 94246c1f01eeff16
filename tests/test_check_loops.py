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
from agentlab.classroom.check import BOUND_S, _run_behaviour, check

LOOPS = Path(__file__).resolve().parent / "fixtures" / "loops"
WRONG = sorted((LOOPS / "wrong").glob("*.py"))
RIGHT = sorted((LOOPS / "right").glob("*.py"))

EXPECTED: dict[str, tuple[str, str]] = {
    "a__plain__deadline_only_between_turns": ("deadline_ignoring_signal", "deadline_ignoring_signal/hung"),
    "a__plain__run_while_checking": ("malformed_decisions", "malformed_decisions/ran:*"),
    "a__plain__shallow_copy_of_history": ("model_sees_snapshot", "model_sees_snapshot/shared_history"),
    "a__plain__tool_budget_counted_per_batch": ("tool_and_turn_budgets", "tool_and_turn_budgets/*:calls_per_turn"),
    "a__plain__turn_budget_off_by_one": ("tool_and_turn_budgets", "tool_and_turn_budgets/*:max_turns"),
    "a__plain__validate_catches_valueerror_only": ("invalid_args_never_run", "invalid_args_never_run/*:other_error"),
    "a__plain__wrong_error_class_tool_budget": ("tool_and_turn_budgets", "*/wrong_class:*"),
    "a__race__cancel_swallowed_in_tool": ("deadline_covers_tools", "diagnosis/swallowed_cancel"),
    "a__race__context_skips_calls_messages": ("context_counts_calls", "context_counts_calls/undercount:calls"),
    "a__race__leaks_steps_task": ("deadline_ignoring_signal", "*/leaked_tasks"),
    "a__race__results_in_completion_order": ("results_in_call_order", "results_in_call_order/call_order"),
    "a__race__signal_not_aborted_on_deadline": (
        "signal_aborted_on_deadline",
        "signal_aborted_on_deadline/signal_not_aborted",
    ),
    "a__race__turn_budget_checked_after_call": ("tool_and_turn_budgets", "tool_and_turn_budgets/*:max_turns"),
    "a__race__validate_result_ignored": ("args_copied_at_boundary", "args_copied_at_boundary/validated_value_ignored"),
    "a__threads__forbid_repeats_name_only": ("repeats_forbidden", "repeats_forbidden/*:repeats_gap"),
    "a__threads__outer_signal_passed_to_tools": (
        "signal_aborted_on_deadline",
        "signal_aborted_on_deadline/tool_signal",
    ),
    "a__threads__signal_polled_between_turns": ("abort_midway", "abort_midway/hung"),
    "a__threads__timer_restarted_each_turn": ("deadline_covers_tools", "deadline_covers_tools/*:per_step"),
    "a__threads__tool_errors_sent_to_model": ("tool_failures_reported", "tool_failures_reported/*:tool_raised"),
    "a__waitfor__cancel_wrapped_as_tool_error": ("deadline_covers_tools", "diagnosis/swallowed_cancel"),
    "a__waitfor__dup_ids_same_turn_only": ("duplicate_call_id", "duplicate_call_id/*"),
    "a__waitfor__sync_model_blocks_loop": ("deadline_blocking_model", "deadline_blocking_model/*:blocking_model"),
    "a__waitfor__tool_budget_per_call": ("tool_and_turn_budgets", "tool_and_turn_budgets/ran:calls_per_turn"),
    "a__waitfor__tools_not_timed": ("deadline_covers_tools", "deadline_covers_tools/hung"),
    "b__classbased__abort_reason_rewrapped": (
        "context_output_cancellation",
        "context_output_cancellation/abort_identity",
    ),
    "b__classbased__args_shallow_copied": ("args_copied_at_boundary", "args_copied_at_boundary/shallow_copy"),
    "b__classbased__cancel_swallowed_in_tool": ("deadline_covers_tools", "diagnosis/swallowed_cancel"),
    "b__classbased__checks_and_runs_interleaved": ("batch_checked_whole", "batch_checked_whole/ran:*"),
    "b__classbased__context_exact_refused": ("limits_reached_exactly", "limits_reached_exactly/exact_context"),
    "b__classbased__deadline_between_turns": ("deadline_ignoring_signal", "deadline_ignoring_signal/hung"),
    "b__classbased__shallow_history_to_model": ("model_sees_snapshot", "model_sees_snapshot/shared_history"),
    "b__ducktyped__abort_only_at_start": ("abort_midway", "abort_midway/hung"),
    "b__ducktyped__callees_not_told": ("signal_aborted_on_deadline", "signal_aborted_on_deadline/signal_not_aborted"),
    "b__ducktyped__dup_ids_previous_turn_only": ("duplicate_call_id", "duplicate_call_id/*:turns_later"),
    "b__ducktyped__losing_task_not_cancelled": ("deadline_ignoring_signal", "*/leaked_tasks"),
    "b__functional__calls_exact_refused": ("limits_reached_exactly", "limits_reached_exactly/exact_turns_calls"),
    "b__functional__context_skips_calls": ("context_counts_calls", "context_counts_calls/undercount:calls"),
    "b__functional__dup_ids_only_in_batch": ("duplicate_call_id", "duplicate_call_id/*"),
    "b__functional__output_exact_refused": ("limits_reached_exactly", "limits_reached_exactly/exact_output"),
    "b__functional__turns_off_by_one": ("tool_and_turn_budgets", "tool_and_turn_budgets/*:max_turns"),
    "b__functional__validate_result_ignored": (
        "args_copied_at_boundary",
        "args_copied_at_boundary/validated_value_ignored",
    ),
    "b__gather__batch_counts_as_one_call": ("tool_and_turn_budgets", "tool_and_turn_budgets/*:calls_per_turn"),
    "b__gather__exception_group_leaks": ("unknown_tool", "diagnosis/exception_group"),
    "b__gather__json_dumps_spaces": ("result_reaches_model", "diagnosis/json_spaces"),
    "b__gather__sync_tool_blocks_loop": ("deadline_blocking_model", "deadline_blocking_model/*:blocking_model"),
    "b__gather__validates_inside_gather": ("batch_checked_whole", "batch_checked_whole/ran:*"),
    "classes__budget_counts_turns_only": ("tool_and_turn_budgets", "tool_and_turn_budgets/*:calls_per_turn"),
    "classes__context_counts_last_message": ("context_counts_calls", "context_counts_calls/undercount:turns"),
    "classes__ids_of_last_turn_only": ("duplicate_call_id", "duplicate_call_id/*:turns_later"),
    "classes__shallow_history_copy": ("model_sees_snapshot", "model_sees_snapshot/shared_history"),
    "classes__signal_waiter_left_running": ("signal_aborted_on_deadline", "*/leaked_tasks"),
    "timeout__abort_reason_rewrapped": ("context_output_cancellation", "context_output_cancellation/abort_identity"),
    "timeout__names_case_insensitive": ("unknown_tool", "unknown_tool/*:near_name"),
    "timeout__signal_only_checked_at_start": ("abort_midway", "abort_midway/hung"),
    "timeout__validated_value_ignored": ("args_copied_at_boundary", "args_copied_at_boundary/validated_value_ignored"),
    "timeout__wait_for_per_step": ("deadline_covers_tools", "deadline_covers_tools/*:per_step"),
    # the held-out set: graded once before any row was tuned on it (see the closing note of issue 11)
    "a__plain__json_dumps_separators": ("compact_json_results", "compact_json_results/json_format"),
    "a__plain__tools_index_keyerror": ("inherited_names_refused", "inherited_names_refused/*"),
    "a__race__abort_reason_rewrapped": ("abort_midway", "abort_midway/abort_identity"),
    "a__race__dup_ids_only_previous_turn": ("duplicate_call_id", "duplicate_call_id/*:turns_later"),
    "a__threads__context_off_by_one": ("limits_reached_exactly", "limits_reached_exactly/exact_context"),
    "a__threads__shallow_copy_of_args": ("args_copied_at_boundary", "args_copied_at_boundary/shallow_copy"),
    "a__waitfor__timeout_per_step": ("deadline_covers_tools", "deadline_covers_tools/per_step"),
    "b__classbased__unknown_tool_wrong_class": ("unknown_tool", "*/wrong_class:*"),
    "b__ducktyped__no_precheck_model_called": (
        "context_output_cancellation",
        "context_output_cancellation/*:pre_aborted",
    ),
    "b__ducktyped__timeout_units": ("deadline_ignoring_signal", "deadline_ignoring_signal/hung"),
    "b__functional__context_counts_whole_message": ("context_counts_calls", "context_counts_calls/overcount"),
    "b__functional__empty_batch_accepted": ("malformed_decisions", "malformed_decisions/*:malformed_no_calls"),
    "b__gather__budget_checked_after_run": ("budget_before_running", "budget_before_running/*"),
    "b__gather__callId_key": ("result_reaches_model", "result_reaches_model/wrong_tool_message"),
}

# Mistakes no row catches, and why. The workbook answer has the same gap: a tool that aborts the outside signal as
# it returns lets the next tool of its batch start in the same turn of the event loop, before any race can see it.
UNCAUGHT = {
    "b__ducktyped__abort_not_checked_between_tools": "no check of the signal between the tools of a batch",
}


def agent_loop_in(path: Path) -> Any:
    spec = importlib.util.spec_from_file_location(f"fixture_{path.parent.name}_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.agent_loop


def test_every_wrong_loop_names_its_mistake_and_has_an_expectation() -> None:
    assert len(WRONG) >= 50 and len(RIGHT) >= 4
    for path in WRONG:
        assert path.read_text(encoding="utf-8").lstrip().startswith('"""'), f"{path.name}: no docstring"
    assert sorted([*EXPECTED, *UNCAUGHT, *MISNAMED]) == sorted(p.stem for p in WRONG)


# Mistakes a row catches, but whose hint names another cause: (row, the hint it gets, what it should say).
MISNAMED = {
    "a__waitfor__output_budget_uses_remaining": (
        "limits_reached_exactly",
        "limits_reached_exactly/exact_context",
        "the answer is compared with what the context left over, not with max_chars: an output-budget hint",
    ),
}

CAUGHT = [p for p in WRONG if p.stem not in UNCAUGHT and p.stem not in MISNAMED]


@pytest.mark.parametrize("path", CAUGHT, ids=[p.stem for p in CAUGHT])
def test_each_wrong_loop_is_caught_by_its_row_with_the_hint_for_its_mistake(path: Path) -> None:
    key, hint_id = EXPECTED[path.stem]
    row = _run_behaviour(get(key), agent_loop_in(path), BOUND_S)
    assert not row.passed, f"{path.stem}: {key} passed"
    assert row.hint_id == hint_id, f"{path.stem}: {row}"


@pytest.mark.parametrize("path", RIGHT, ids=[p.stem for p in RIGHT])
def test_each_right_loop_passes_every_row(path: Path) -> None:
    report = check(agent_loop_in(path))
    assert report.passed, str(report)


@pytest.mark.parametrize("name", sorted(MISNAMED))
def test_a_misnamed_mistake_is_still_caught_by_its_row(name: str) -> None:
    key, hint_id, _ = MISNAMED[name]
    row = _run_behaviour(get(key), agent_loop_in(LOOPS / "wrong" / f"{name}.py"), BOUND_S)
    assert not row.passed and row.hint_id == hint_id, f"{name}: {row}"
