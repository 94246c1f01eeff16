"""The checker is itself tested: each common mistake fails exactly the rows it should, with the right hint.

The mutants are not hand-written loops. Each is the model answer of the last workbook
(`teachers/source/workbooks/06_limits.ipynb`, the cells tagged `agent-loop`) with one small source
substitution, the way mutation testing makes them: so each mistake is realistic, sits in
otherwise correct code, and there is one loop to maintain, the one students are shown.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from agentlab.classroom.check import check

WORKBOOK = Path(__file__).resolve().parent.parent / "teachers" / "source" / "workbooks" / "06_limits.ipynb"

# The bound per behaviour: the timing rows of the model answer take up to a second on a busy machine.
BOUND_S = 2.5


def model_answer() -> str:
    """The final workbook's code: its setup and every cell of the student's loop, in order."""
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
        "getattr_lookup",
        "looks tools up as attributes, JavaScript style: getattr(SimpleNamespace(**tools), name)",
        (
            ("        tool = tools.get(name)\n", "        tool = getattr(SimpleNamespace(**tools), name, None)\n"),
            ("import time\n", "import time\nfrom types import SimpleNamespace\n"),
        ),
        {"unknown_tool": "unknown_tool/*:__class__"},
    ),
    Mutant(
        "defaultdict_lookup",
        "looks tools up with tools[name] and catches KeyError: a defaultdict makes a tool up",
        (
            (
                "        tool = tools.get(name)\n        if tool is None:\n            raise",
                "        try:\n            tool = tools[name]\n        except KeyError:\n            raise",
            ),
        ),
        {"inherited_names_refused": "inherited_names_refused/*"},
    ),
    Mutant(
        "validate_after_run",
        "runs each call first and validates its args afterwards",
        (
            ("            value = tool.validate(mine)\n", "            value = None\n"),
            (
                "                content = await run_tool(checked, controller.signal)\n",
                "                content = await run_tool(checked, controller.signal)\n"
                "                checked.tool.validate(copy.deepcopy(checked.args))\n",
            ),
        ),
        {
            "invalid_args_never_run": "invalid_args_never_run/ran:*",
            "batch_checked_whole": "batch_checked_whole/ran:*",
            "args_copied_at_boundary": "args_copied_at_boundary/validated_value_ignored",
        },
    ),
    Mutant(
        "budget_after_run",
        "counts a tool call against max_calls only after running it",
        (
            ("            if calls_made + len(calls) > max_calls:\n", "            if False:\n"),
            (
                "                content = await run_tool(checked, controller.signal)\n",
                "                content = await run_tool(checked, controller.signal)\n"
                "                if calls_made > max_calls:\n"
                "                    raise ToolBudgetError(f'tool budget exhausted: max_calls={max_calls}')\n",
            ),
        ),
        {
            "tool_and_turn_budgets": "tool_and_turn_budgets/ran:max_calls",
            "budget_before_running": "budget_before_running/*",
            "limits_reached_exactly": "limits_reached_exactly/past_calls",
        },
    ),
    Mutant(
        "budget_call_by_call",
        "checks max_calls before each call instead of before the whole batch",
        (
            ("            if calls_made + len(calls) > max_calls:\n", "            if False:\n"),
            (
                "                calls_made += 1\n",
                "                calls_made += 1\n"
                "                if calls_made > max_calls:\n"
                "                    raise ToolBudgetError(f'tool budget exhausted: max_calls={max_calls}')\n",
            ),
        ),
        {
            "tool_and_turn_budgets": "tool_and_turn_budgets/ran:calls_per_turn",
            "budget_before_running": "budget_before_running/*",
        },
    ),
    Mutant(
        "half_batch",
        "checks each call just before running it, so a bad call is found after the good ones ran",
        (
            (
                "            batch = check_batch(calls, tools, seen_ids, seen_calls, forbid_repeats)\n",
                "            batch = calls\n",
            ),
            (
                "            for checked in batch:\n",
                "            for proposed in batch:\n"
                "                [checked] = check_batch([proposed], tools, seen_ids, seen_calls, forbid_repeats)\n",
            ),
            ('"args": c.args} for c in batch]', '"args": copy.deepcopy(c["args"])} for c in batch]'),
            ('[{"id": c.id, "name": c.name,', '[{"id": c["id"], "name": c["name"],'),
        ),
        {"batch_checked_whole": "batch_checked_whole/ran:*", "repeats_forbidden": "repeats_forbidden/*:repeats_batch"},
    ),
    Mutant(
        "deadline_between_steps",
        "checks the clock (and the signal) only between steps: no race",
        (("    return await race(steps(), timeout_ms, signal, controller)", "    return await steps()"),),
        {
            "deadline_ignoring_signal": "deadline_ignoring_signal/hung",
            "deadline_blocking_model": "deadline_blocking_model/*:blocking_model",
            "deadline_covers_tools": "deadline_covers_tools/hung",
            "signal_aborted_on_deadline": "signal_aborted_on_deadline/hung",
            "abort_midway": "abort_midway/hung",
        },
    ),
    Mutant(
        "ids_per_batch_only",
        "refuses a call id seen earlier in the batch, but not one seen in an earlier turn",
        (("        if call_id in seen_ids or call_id in batch_ids:", "        if call_id in batch_ids:"),),
        {"duplicate_call_id": "duplicate_call_id/*"},
    ),
    Mutant(
        "json_with_spaces",
        "writes tool results with json.dumps: spaces, 18.0, and a TypeError for a set",
        (
            ("        return compact_json(result)\n", "        return json.dumps(result)\n"),
            ("import time\n", "import json\nimport time\n"),
        ),
        {
            "result_reaches_model": "diagnosis/json_spaces",
            "history_shape": "diagnosis/json_spaces",
            "results_in_call_order": "diagnosis/json_spaces",
            "compact_json_results": "diagnosis/json_spaces",  # one cause, one hint: said once in the report
            "tool_failures_reported": "tool_failures_reported/bare:*",
            "context_counts_calls": "context_counts_calls/overcount",
        },
    ),
    Mutant(
        "model_mutates_history",
        "hands the model the loop's own history list",
        (
            (
                "await invoke(model, copy.deepcopy(history), controller.signal)",
                "await invoke(model, history, controller.signal)",
            ),
        ),
        {"model_sees_snapshot": "model_sees_snapshot/shared_history"},
    ),
    Mutant(
        "ignores_signal",
        "never looks at the outside signal",
        (("    controller = AbortController()  #", "    signal = None\n    controller = AbortController()  #"),),
        {
            "context_output_cancellation": "context_output_cancellation/*:pre_aborted",
            "abort_midway": "abort_midway/hung",
        },
    ),
    Mutant(
        "no_output_budget",
        "never checks the final text against max_chars",
        (("                if len(text) > max_chars:\n", "                if False:\n"),),
        {"context_output_cancellation": "context_output_cancellation/*:output"},
    ),
    Mutant(
        "context_misses_calls",
        "counts the context as the contents only, leaving the calls messages out",
        (
            (
                '    return sum(len(compact_json(m["calls"])) if "calls" in m else len(m["content"]) for m in history)',
                '    return sum(len(m.get("content", "")) for m in history)',
            ),
        ),
        {"context_counts_calls": "context_counts_calls/undercount:calls"},
    ),
    Mutant(
        "wrong_call_id",
        "ties every result of a batch to the last call's id",
        (('"call_id": checked.id', '"call_id": batch[-1].id'),),
        {"history_shape": "history_shape/history", "results_in_call_order": "results_in_call_order/call_order"},
    ),
    Mutant(
        "deadline_leaves_signal",
        "raises on the deadline without aborting the signal the model and tools were given",
        (("        controller.abort(reason)  #", "        pass  #"),),
        {
            "signal_aborted_on_deadline": "signal_aborted_on_deadline/signal_not_aborted",
            "abort_midway": "abort_midway/abort_not_passed_on",
        },
    ),
    Mutant(
        "args_not_copied",
        "keeps the model's own args dict instead of a copy",
        (('        args = copy.deepcopy(proposed["args"])', '        args = proposed["args"]'),),
        {"args_copied_at_boundary": "args_copied_at_boundary/history_not_copied"},
    ),
    Mutant(
        "turns_off_by_one",
        "refuses the last allowed turn",
        (("            if turns >= max_turns:", "            if turns + 1 >= max_turns:"),),
        {
            "tool_and_turn_budgets": "tool_and_turn_budgets/*:max_turns",
            "limits_reached_exactly": "limits_reached_exactly/exact_turns_calls",
        },
    ),
    Mutant(
        "one_turn_too_many",
        "lets the model take one turn past max_turns",
        (("            if turns >= max_turns:", "            if turns > max_turns:"),),
        {
            "tool_and_turn_budgets": "tool_and_turn_budgets/*:max_turns",
            "limits_reached_exactly": "limits_reached_exactly/past_turns",
        },
    ),
    Mutant(
        "no_shape_check",
        "reads the decision without checking its shape",
        (("            check_decision(decision)\n", ""),),
        {"malformed_decisions": "malformed_decisions/*:malformed_kind"},
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


def test_the_model_answer_passes_every_row() -> None:
    report = check(agent_loop_of(model_answer(), "model_answer"), bound_s=BOUND_S)
    assert report.passed, str(report)


def test_there_are_at_least_twelve_distinct_mistakes() -> None:
    assert len(MUTANTS) >= 12
    assert len({m.name for m in MUTANTS}) == len(MUTANTS)
    assert len({mutate(model_answer(), m) for m in MUTANTS}) == len(MUTANTS)


@pytest.mark.parametrize("mutant", MUTANTS, ids=[m.name for m in MUTANTS])
def test_each_mistake_fails_exactly_its_rows_with_the_right_hint(mutant: Mutant) -> None:
    report = check(agent_loop_of(mutate(model_answer(), mutant), mutant.name), bound_s=BOUND_S)
    caught = {row.key: row.hint_id for row in report.failures}
    assert caught == mutant.caught, f"{mutant.name} ({mutant.mistake}):\n{report}"
