"""`max_refusals`: what the loop itself decides about refusals returned to the model (issue 13).

The rules a student's loop must also keep (one message per call id, nothing ran, the budget, 0 is today's
contract) are behaviours of the "recovery" step in agentlab.behaviours; this file covers the loop's own choices:
the ids it makes for calls whose id cannot carry a result, the words of the error once the budget is spent,
what is and is not a refusal, and how the sync entry point and the trace show it.
"""

from __future__ import annotations

import json
import re

import pytest

from agentlab import (
    ApprovalError,
    ConfigError,
    DuplicateCallIdError,
    ModelOutputError,
    Tool,
    ToolBudgetError,
    TurnBudgetError,
    UnknownToolError,
    WriteBudgetError,
    agent_loop,
    agent_loop_sync,
    parse_lookup_args,
)
from agentlab.lab.fakes import Scripted, call, calls, final
from agentlab.lab.trace import render_text, steps


def lookup_tools(ran: list | None = None) -> dict[str, Tool]:
    async def run(value):
        if ran is not None:
            ran.append(value)
        return value

    return {"lookup": Tool(validate=parse_lookup_args, run=run)}


def tool_messages(history: list[dict]) -> list[tuple[str, dict]]:
    return [(m["call_id"], json.loads(m["content"])) for m in history if m["role"] == "tool"]


GOOD = call("lookup", {"id": "A"}, "g1")


@pytest.mark.parametrize(
    "bad",
    [
        {"name": "lookup", "args": {"id": "B"}},  # no id
        {"id": 7, "name": "lookup", "args": {"id": "B"}},  # not a string
        {"id": "", "name": "lookup", "args": {"id": "B"}},  # empty
    ],
    ids=["missing", "not_a_string", "empty"],
)
async def test_a_call_without_a_usable_id_is_answered_under_an_id_the_loop_makes(bad: dict) -> None:
    model = Scripted(calls(GOOD, bad), calls(call("lookup", {"id": "B"}, "g2")), final("done"))
    result = await agent_loop("q", model, lookup_tools(), max_refusals=1)
    assert result.history[1]["calls"][1]["id"] == "refused-1-2"
    (_, first), (made, refused), _ = tool_messages(result.history)
    assert made == "refused-1-2" and "malformed call #2" in refused["refused"]
    assert "'refused-1-2'" in first["not_run"]


async def test_a_duplicate_id_keeps_its_first_use_and_the_duplicate_gets_a_made_id() -> None:
    again = call("lookup", {"id": "B"}, "g1")
    model = Scripted(calls(GOOD), calls(again), calls(call("lookup", {"id": "B"}, "g3")), final("done"))
    result = await agent_loop("q", model, lookup_tools(), max_refusals=1)
    ids = [m["call_id"] for m in result.history if m["role"] == "tool"]
    assert ids == ["g1", "refused-2-1", "g3"]
    assert "duplicate call id 'g1': it was used in turn 1" in tool_messages(result.history)[1][1]["refused"]


async def test_a_made_id_never_repeats_one_the_model_used() -> None:
    squatter = call("lookup", {"id": "A"}, "refused-2-1")
    model = Scripted(calls(squatter), calls({"name": "lookup", "args": {}}), final("done"))
    result = await agent_loop("q", model, lookup_tools(), max_refusals=1)
    ids = [m["call_id"] for m in result.history if m["role"] == "tool"]
    assert ids == ["refused-2-1", "refused-2-1-1"]


async def test_ids_of_a_refused_batch_count_as_used() -> None:
    """Each id in the history is tied to exactly one tool message, so a retry needs fresh ids."""
    model = Scripted(calls(call("nope", {}, "x1")), calls(call("lookup", {"id": "A"}, "x1")), final("done"))
    with pytest.raises(DuplicateCallIdError, match="duplicate call id 'x1'"):
        await agent_loop("q", model, lookup_tools(), max_refusals=1)


async def test_the_spent_budget_is_named_in_the_error_only_when_there_was_one() -> None:
    unknown = calls(call("nope", {}, "n1"))
    with pytest.raises(UnknownToolError) as plain:
        await agent_loop("q", Scripted(unknown), lookup_tools())
    assert "max_refusals" not in str(plain.value)
    model = Scripted(unknown, calls(call("nope", {}, "n2")))
    with pytest.raises(UnknownToolError) as spent:
        await agent_loop("q", model, lookup_tools(), max_refusals=1)
    assert str(spent.value).startswith("unknown tool 'nope' (call 'n2')")
    assert str(spent.value).endswith(
        "The refusal budget is spent: 1 refused batch was already returned to the model (max_refusals=1)"
    )
    assert spent.value.usage.refusals == 1


async def test_a_refused_batch_costs_a_turn_but_not_a_tool_call() -> None:
    model = Scripted(calls(call("nope", {}, "n1")), calls(GOOD), final("done"))
    result = await agent_loop("q", model, lookup_tools(), max_refusals=1, max_calls=1, max_turns=3)
    assert (result.usage.turns, result.usage.calls, result.usage.refusals) == (3, 1, 1)
    with pytest.raises(TurnBudgetError):
        await agent_loop("q", Scripted(calls(call("nope", {}, "n1")), final("done")), {}, max_refusals=5, max_turns=1)


async def test_limits_and_malformed_decisions_are_not_refusals() -> None:
    ran: list = []
    two = calls(GOOD, call("lookup", {"id": "B"}, "g2"))
    with pytest.raises(ToolBudgetError):
        await agent_loop("q", Scripted(two), lookup_tools(ran), max_calls=1, max_refusals=3)
    with pytest.raises(ModelOutputError, match="malformed decision"):
        await agent_loop("q", Scripted({"kind": "shout"}), lookup_tools(ran), max_refusals=3)

    async def write(value):
        ran.append(value)
        return "written"

    writer = {"save": Tool(validate=lambda args: None, run=write, writes=True)}
    with pytest.raises(ApprovalError, match="approval required"):
        await agent_loop("q", Scripted(calls(call("save", {}, "w1"))), writer, max_refusals=3)
    with pytest.raises(WriteBudgetError):
        model = Scripted(calls(call("save", {}, "w1")))
        await agent_loop("q", model, writer, max_refusals=3, approve=lambda c: True, max_writes=0)
    assert ran == []


async def test_a_bad_call_after_a_write_in_the_batch_is_refused_before_anything_is_asked() -> None:
    asked: list = []
    writer = {"save": Tool(validate=lambda args: None, run=lambda value: "ok", writes=True)}
    model = Scripted(calls(call("save", {}, "w1"), call("nope", {}, "n1")), final("done"))
    result = await agent_loop("q", model, writer, max_refusals=1, approve=lambda c: asked.append(c) or True)
    assert asked == [] and result.usage.writes == 0


@pytest.mark.parametrize("value", [-1, 1.5, True, "2"])
async def test_max_refusals_must_be_a_whole_number(value) -> None:
    with pytest.raises(ConfigError, match="max_refusals must be a whole number"):
        await agent_loop("q", Scripted(final("done")), {}, max_refusals=value)


def test_the_sync_entry_point_passes_max_refusals_on() -> None:
    model = Scripted(calls(call("nope", {}, "n1")), calls(GOOD), final("done"))
    result = agent_loop_sync("q", model, lookup_tools(), max_refusals=1)
    assert (result.text, result.usage.refusals, result.limits.max_refusals) == ("done", 1, 1)


async def test_the_trace_shows_returned_refusals_apart_from_results_and_gauges_the_budget() -> None:
    model = Scripted(calls(GOOD, call("nope", {}, "n1")), calls(call("lookup", {"id": "A"}, "g2")), final("done"))
    result = await agent_loop("q", model, lookup_tools(), max_refusals=2)
    kinds = [(s.kind, s.call_id) for s in steps(result) if s.call_id]
    assert kinds == [
        ("call", "g1"),
        ("call", "n1"),
        ("not_run", "g1"),
        ("refused", "n1"),
        ("call", "g2"),
        ("result", "g2"),
    ]
    text = render_text(result)
    assert "✗ refused, returned to the model" in text and "– not run — call 'n1' of this batch was refused" in text
    assert "refusals 1 / 2" in text
    assert "refusals" not in render_text(await agent_loop("q", Scripted(final("done")), {}))


async def test_a_recovered_history_is_a_transcript_every_provider_accepts() -> None:
    """One answer per call id, right after its batch, each refusal marked as an error; made ids are plain."""
    from agentlab.models import anthropic_format, chat_format
    from agentlab.models.transcript import turns

    model = Scripted(
        calls(GOOD, {"name": "lookup", "args": {"id": "B"}}),
        calls(call("nope", {}, "g1")),
        calls(call("lookup", {"id": "A"}, "g2")),
        final("done"),
    )
    result = await agent_loop("q", model, lookup_tools(), max_refusals=2)
    batches = [turn for turn in turns(result.history) if turn.kind == "calls"]
    assert [[(r.call_id, r.is_error) for r in turn.results] for turn in batches] == [
        [("g1", True), ("refused-1-2", True)],
        [("refused-2-1", True)],
        [("g2", False)],
    ]
    assert all(re.fullmatch(r"[A-Za-z0-9_-]+", c["id"]) for turn in batches for c in turn.calls)
    chat = chat_format.to_messages(result.history)
    assert [m["tool_call_id"] for m in chat if m["role"] == "tool"] == ["g1", "refused-1-2", "refused-2-1", "g2"]
    blocks = [b for m in anthropic_format.to_messages(result.history) if m["role"] == "user" for b in m["content"]]
    assert [b.get("is_error") for b in blocks if b["type"] == "tool_result"] == [True, True, True, False]


async def test_a_refused_turn_keeps_the_tokens_a_real_model_reported() -> None:
    reported = {"input_tokens": 5, "output_tokens": 1}
    model = Scripted({**calls(call("nope", {}, "n1")), "usage": reported}, final("done"))
    result = await agent_loop("q", model, lookup_tools(), max_refusals=1)
    assert result.history[1]["usage"] == reported and result.usage.tokens == 6
