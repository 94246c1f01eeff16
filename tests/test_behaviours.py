"""The package's own loop passes every behaviour, the seven reference ones and the rules.

The behaviours themselves live in `agentlab.behaviours`; this file only runs them.
"""

from __future__ import annotations

import pytest

from agentlab import ConfigError, agent_loop
from agentlab.behaviours import ALL, EXTRA_STEPS, REFERENCE, RULES, STEPS, BehaviourFailed, get, select


@pytest.mark.parametrize("behaviour", ALL, ids=[b.key for b in ALL])
async def test_agent_loop_passes(behaviour) -> None:
    await behaviour(agent_loop)


def test_the_seven_reference_behaviours_are_the_seeds_in_order() -> None:
    assert [b.key for b in REFERENCE] == [
        "result_reaches_model",
        "unknown_tool",
        "invalid_args_never_run",
        "tool_and_turn_budgets",
        "duplicate_call_id",
        "deadline_ignoring_signal",
        "context_output_cancellation",
    ]
    assert all(b.reference for b in REFERENCE) and not any(b.reference for b in RULES)


def test_every_behaviour_belongs_to_a_step_and_every_step_has_behaviours() -> None:
    assert {b.step for b in ALL} == set(STEPS + EXTRA_STEPS)
    assert sum(len(select(step)) for step in STEPS + EXTRA_STEPS) == len(ALL)
    assert len(select(reference_only=True)) == 7


def test_every_step_means_every_workbook_step_and_an_extra_step_is_asked_for_by_name() -> None:
    assert "recovery" in EXTRA_STEPS and not set(EXTRA_STEPS) & set(STEPS)
    assert [b.step for b in select()] == [b.step for b in ALL if b.step in STEPS]
    assert select("recovery") and all(b.step == "recovery" for b in select("recovery"))


def test_lookup_by_key_names_the_alternatives() -> None:
    assert get("unknown_tool").title.startswith("A bad name")
    with pytest.raises(ConfigError, match="unknown_tool"):
        get("no_such_behaviour")


async def test_a_loop_that_skips_the_name_check_fails_with_a_clue() -> None:
    async def trusting_loop(input, model, tools, **options):
        decision = await model([{"role": "user", "content": input}], None)
        for call in decision.get("calls", []):
            getattr(tools, call["name"])  # the classic mistake: an attribute lookup
        return None

    with pytest.raises(BehaviourFailed) as failure:
        await get("unknown_tool")(trusting_loop)
    assert failure.value.clue.startswith(("no_error", "wrong_error"))


async def test_a_loop_that_never_returns_fails_instead_of_hanging() -> None:
    import asyncio

    async def hanging_loop(input, model, tools, **options):
        await asyncio.sleep(3600)

    with pytest.raises(BehaviourFailed) as failure:
        await get("duplicate_call_id")(hanging_loop)
    assert failure.value.clue == "hung"
