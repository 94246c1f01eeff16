"""The playground's scenarios: the agreed keys, deterministic first runs, and knobs and limits that matter."""

from __future__ import annotations

import asyncio
import time

import pytest

from agentlab import (
    AbortController,
    AgentResult,
    ApprovalError,
    ConfigError,
    ContextBudgetError,
    DeadlineError,
    DuplicateCallIdError,
    ModelOutputError,
    OutputBudgetError,
    RepeatedCallError,
    TokenBudgetError,
    ToolArgsError,
    ToolBudgetError,
    ToolError,
    TurnBudgetError,
    UnknownToolError,
    WriteBudgetError,
)
from agentlab.lab.scenarios import (
    DEFAULT_LIMITS,
    LIMIT_NAMES,
    PROVIDER_ANSWERS,
    SCENARIOS,
    WIRE_FORMATS,
    Knob,
    Scenario,
    get_scenario,
    run_scenario,
)
from agentlab.lab.trace import render_text

# What each scenario's defaults do: an answer (its text) or the error that shows the notebook's rule.
FIRST_RUNS = {
    "call_ids": "c1 → A: The Pragmatic Programmer (on the shelf); "
    "c2 → B: Structure and Interpretation of Computer Programs (on loan); "
    "c3 → C: Designing Data-Intensive Applications (on the shelf)",
    "tool_names": UnknownToolError,
    "tool_args": ToolArgsError,
    "budgets": "done: 6 lookups in 3 turns, then this answer in turn 4",
    "duplicate_ids": DuplicateCallIdError,
    "deadline": DeadlineError,
    "limits": "Summary: " + ("The model proposes; the application verifies and executes. " * 3)[:111],
    "weather": "Pune: rain, 18°C",
    "real_model": ModelOutputError,
    "approval": "Sorry, Linus: denied (an agent may not cancel a customer's reservation).",
    "write_budget": WriteBudgetError,
    "at_most_once": "w1: reservation 3 (1 left on hand); w2: reservation 3 (1 left on hand)",
    "whole_or_nothing": DeadlineError,
    "recovery": UnknownToolError,
}


def test_the_agreed_scenarios_exist_in_notebook_order() -> None:
    assert list(SCENARIOS) == list(FIRST_RUNS)
    for key, scenario in SCENARIOS.items():
        assert scenario.key == key and scenario.title and scenario.input
        assert set(scenario.limits) <= set(LIMIT_NAMES)


@pytest.mark.parametrize("key", list(FIRST_RUNS))
async def test_the_first_run_is_instructive_and_deterministic(key: str) -> None:
    first, second = await run_scenario(key), await run_scenario(get_scenario(key))
    expected = FIRST_RUNS[key]
    if isinstance(expected, str):
        assert isinstance(first, AgentResult) and first.text == expected
    else:
        assert type(first) is expected
    assert render_text(first) == render_text(second)


@pytest.mark.parametrize(
    ("key", "settings", "expected"),
    [
        ("call_ids", {"max_calls": 2}, ToolBudgetError),
        ("call_ids", {"per_turn": 1, "max_turns": 3}, TurnBudgetError),
        ("call_ids", {"books": 1}, "c1 → A: The Pragmatic Programmer (on the shelf)"),
        (
            "tool_names",
            {"name": 0},
            "A: The Pragmatic Programmer (on the shelf); A: The Pragmatic Programmer (on the shelf)",
        ),
        ("tool_names", {"name": 3, "good_calls_before": 0}, UnknownToolError),
        ("tool_args", {"args": 0}, "A: The Pragmatic Programmer (on the shelf)"),
        ("tool_args", {"args": 6}, "Z: no such book"),
        ("tool_args", {"args": 3}, ToolArgsError),
        ("budgets", {"max_calls": 5}, ToolBudgetError),
        ("budgets", {"max_turns": 3}, TurnBudgetError),
        ("budgets", {"calls_per_turn": 1}, "done: 3 lookups in 3 turns, then this answer in turn 4"),
        ("budgets", {"turns_before_answer": 0}, "done: 0 lookups in 0 turns, then this answer in turn 1"),
        (
            "duplicate_ids",
            {"reuse_id_on_turn": 0},
            "A: The Pragmatic Programmer (on the shelf); "
            "B: Structure and Interpretation of Computer Programs (on loan); "
            "C: Designing Data-Intensive Applications (on the shelf)",
        ),
        ("duplicate_ids", {"reuse_id_on_turn": 1}, DuplicateCallIdError),
        ("deadline", {"model_delay_ms": 20}, "A: The Pragmatic Programmer (on the shelf)"),
        ("deadline", {"blocking": 2, "model_delay_ms": 0, "timeout_ms": 50}, DeadlineError),
        ("limits", {"result_size": 900}, ContextBudgetError),
        ("limits", {"max_chars": 500}, ContextBudgetError),
        ("limits", {"answer_size": 900}, OutputBudgetError),
        ("weather", {"case": 1}, UnknownToolError),
        ("weather", {"case": 2}, ToolArgsError),
        ("weather", {"case": 3}, RepeatedCallError),
        ("recovery", {"max_refusals": 2}, "A: The Pragmatic Programmer (on the shelf)"),
        ("recovery", {"max_refusals": 0, "slips": 0}, "A: The Pragmatic Programmer (on the shelf)"),
        ("recovery", {"max_refusals": 2, "slip": 1}, "A: The Pragmatic Programmer (on the shelf)"),
        ("recovery", {"max_refusals": 2, "slip": 2}, "A: The Pragmatic Programmer (on the shelf)"),
        ("recovery", {"max_refusals": 2, "slip": 3}, "A: The Pragmatic Programmer (on the shelf)"),
        ("recovery", {"max_refusals": 0, "slip": 1}, ToolArgsError),
        ("recovery", {"max_refusals": 0, "slip": 2}, ModelOutputError),
        ("recovery", {"max_refusals": 0, "slip": 3}, DuplicateCallIdError),
        ("recovery", {"max_refusals": 5, "slips": 6, "max_turns": 4}, TurnBudgetError),
        ("approval", {"policy": 0}, ApprovalError),
        ("approval", {"policy": 3}, "Sorry, Linus: denied (no writes today)."),
        ("approval", {"copies": 2}, "Done, Linus: reservation 3 (1 left on hand)."),
        (
            "approval",
            {"policy": 1},
            "Done, Linus: I cancelled Alan's reservation 2 to free copies; yours is reservation 3 (1 left on hand).",
        ),
        ("approval", {"policy": 1, "max_writes": 2}, ConfigError),  # the budget is 09b's knob, not this one's
        ("write_budget", {"max_writes": 6}, "6 reservations made, in 3 turns of 2"),
        ("write_budget", {"turns": 2}, "4 reservations made, in 2 turns of 2"),
        ("write_budget", {"writes_per_turn": 5, "turns": 1}, WriteBudgetError),
        ("write_budget", {"max_writes": 0, "turns": 1, "writes_per_turn": 1}, WriteBudgetError),
        ("at_most_once", {"key": 1}, "w1: reservation 3 (1 left on hand); w2: reservation 4 (0 left on hand)"),
        ("at_most_once", {"ids": 1}, DuplicateCallIdError),
        ("at_most_once", {"times": 1}, "w1: reservation 3 (1 left on hand)"),
        (
            "whole_or_nothing",
            {"card_ms": 100},
            "Eve: reservation 3 (2 left on hand); deposit taken inside the transaction",
        ),
        (
            "whole_or_nothing",
            {"card_ms": 100, "deposit": 2},
            "Eve: reservation 3 (2 left on hand); deposit taken after the commit",
        ),
        ("whole_or_nothing", {"card_ms": 100, "card_service": 1}, ToolError),
        ("whole_or_nothing", {"card_service": 2, "card_ms": 1500, "write_grace_ms": 0}, DeadlineError),
    ],
)
async def test_each_knob_and_limit_changes_the_outcome(key: str, settings: dict, expected: object) -> None:
    outcome = await run_scenario(key, **settings)
    if isinstance(expected, str):
        assert isinstance(outcome, AgentResult), outcome
        assert outcome.text == expected
    else:
        assert type(outcome) is expected, outcome


# What each of real_model's provider answers becomes, in every wire format: the adapter's or the loop's refusal,
# with the phrase that says which fault it was.
PROVIDER_OUTCOMES = {
    "a good call, then an answer": (AgentResult, "A: The Pragmatic Programmer (on the shelf)"),
    "arguments that are not JSON": (ModelOutputError, "malformed call"),
    "a call with no id": (ModelOutputError, "the id must be a non-empty string"),
    "an invented tool name": (UnknownToolError, "unknown tool 'search_catalogue'"),
    "an answer cut off at its token limit": (ModelOutputError, "incomplete output"),
    "a server that stalls mid-answer": (DeadlineError, "timeout_ms=300"),
}


@pytest.mark.parametrize("wire_format", range(len(WIRE_FORMATS)), ids=[label for label, _ in WIRE_FORMATS])
@pytest.mark.parametrize("answer", range(len(PROVIDER_ANSWERS)), ids=PROVIDER_ANSWERS)
async def test_each_provider_answer_meets_its_check_in_every_wire_format(answer: int, wire_format: int) -> None:
    """Every choice of real_model, through the real SDK and adapter: fast, and the stall ended by the deadline."""
    pytest.importorskip("openai")
    pytest.importorskip("anthropic")
    assert set(PROVIDER_OUTCOMES) == set(PROVIDER_ANSWERS)
    await run_scenario("real_model", wire_format=wire_format)  # the SDK imported once, off the clock
    started = time.perf_counter()
    outcome = await run_scenario("real_model", answer=answer, wire_format=wire_format, timeout_ms=300)
    took = time.perf_counter() - started
    kind, phrase = PROVIDER_OUTCOMES[PROVIDER_ANSWERS[answer]]
    assert type(outcome) is kind, outcome
    assert phrase in (outcome.text if isinstance(outcome, AgentResult) else str(outcome))
    if kind is DeadlineError:
        assert 0.29 < took < 1.5, took  # the server's stall lasts a minute: the deadline ended it
    else:
        assert took < 1.0, took
    assert render_text(outcome) == render_text(
        await run_scenario("real_model", answer=answer, wire_format=wire_format, timeout_ms=300)
    )


@pytest.mark.parametrize(
    ("settings", "expected"),
    [
        ({"answer": 0, "max_tokens": 440}, "A: The Pragmatic Programmer (on the shelf)"),  # 193 + 243 tokens
        ({"answer": 0, "max_tokens": 430}, TokenBudgetError),
        ({"answer": 0, "max_tokens": 0}, TokenBudgetError),
        ({"answer": 0, "max_turns": 1}, TurnBudgetError),
        ({"answer": 0, "max_calls": 0}, ToolBudgetError),
    ],
)
async def test_real_models_limits_hold_against_the_scripted_provider(settings: dict, expected: object) -> None:
    pytest.importorskip("openai")
    outcome = await run_scenario("real_model", **settings)
    if isinstance(expected, str):
        assert isinstance(outcome, AgentResult) and outcome.text == expected, outcome
    else:
        assert type(outcome) is expected, outcome


async def test_a_writing_scenario_gets_a_fresh_shop_every_run() -> None:
    """The same settings twice give the same reservations: nothing of one run's writes reaches the next."""
    # The store's default key (key=1): a second run on the same shop would find no copy of D left for w1.
    first = await run_scenario("at_most_once", times=3, key=1)
    second = await run_scenario("at_most_once", times=3, key=1)
    assert render_text(first) == render_text(second)
    assert "w3: rejected by the shop (only 0 of book D on hand; 1 asked for)" in first.text


@pytest.mark.parametrize(
    ("settings", "outcome"),
    [
        ({}, "↺ rolled back: nothing of it was applied"),  # stopped mid-write, the card service honours the stop
        ({"card_service": 2}, "↺ rolled back: nothing of it was applied"),  # deaf, but done within the grace
        ({"card_service": 2, "card_ms": 3000}, "? outcome unknown: still running when the run stopped"),
    ],
)
async def test_a_write_stopped_by_the_deadline_says_what_became_of_it(settings: dict, outcome: str) -> None:
    result = await run_scenario("whole_or_nothing", **settings)
    assert isinstance(result, DeadlineError) and outcome in render_text(result)


async def test_the_deadline_holds_against_the_blocking_model_too() -> None:
    started = time.perf_counter()
    outcome = await run_scenario("deadline", blocking=1, timeout_ms=100, model_delay_ms=1500)
    assert isinstance(outcome, DeadlineError)
    assert time.perf_counter() - started < 1.2  # not the model's 1.5 s


async def test_a_signal_stops_a_slow_run_and_its_reason_is_returned() -> None:
    controller = AbortController()
    asyncio.get_running_loop().call_later(0.05, controller.abort, "stopped by the test")
    started = time.perf_counter()
    outcome = await run_scenario("limits", model_delay_ms=5000, signal=controller.signal)
    assert str(outcome) == "aborted: stopped by the test"
    assert time.perf_counter() - started < 3  # not the model's 5 s


@pytest.mark.parametrize(
    ("settings", "phrase"),
    [
        ({"max_turns": -1}, "max_turns must be a whole number >= 0, got -1"),
        ({"calls_per_turn": 9}, "calls_per_turn must be a whole number from 1 to 5, got 9"),
        ({"calls_per_turn": True}, "calls_per_turn must be a whole number from 1 to 5, got True"),
        ({"max_writes": 2}, "scenario 'budgets' has no setting 'max_writes'; its settings are: max_turns, "),
    ],
)
async def test_bad_settings_come_back_as_a_config_error(settings: dict, phrase: str) -> None:
    outcome = await run_scenario("budgets", **settings)
    assert isinstance(outcome, ConfigError) and phrase in str(outcome)


async def test_call_ids_shows_a_loop_without_call_ids_pairing_results_wrongly() -> None:
    """Notebook 01's naive loop: calls in parallel, results appended as they finish, with no call id. A is slow."""
    import json

    from agentlab.lab.naive import Answer, NaiveRun

    async def no_ids(question, model, tools, **limits):
        history = [{"role": "user", "content": question}]
        while True:
            decision = await model(history, None)
            if decision["kind"] == "final":
                return Answer(decision["text"], history)
            history.append({"role": "assistant", "calls": decision["calls"]})
            for done in asyncio.as_completed([tools[c["name"]].run(c["args"]) for c in decision["calls"]]):
                history.append({"role": "tool", "content": json.dumps(await done)})

    naive = await run_scenario("call_ids", naive=no_ids)
    assert isinstance(naive, NaiveRun)
    assert naive.text.startswith("c1 → A: Structure and Interpretation of Computer Programs (on loan); c2 → B: The")
    for slow_a_ms in (0, 200):  # agent_loop ties each result to its call id however long A takes
        assert (await run_scenario("call_ids", slow_a_ms=slow_a_ms)).text == FIRST_RUNS["call_ids"]


async def test_an_unknown_scenario_lists_the_keys() -> None:
    with pytest.raises(ConfigError, match="no scenario 'nope'; the scenarios are: call_ids, tool_names"):
        get_scenario("nope")
    assert isinstance(await run_scenario("nope"), ConfigError)


def test_defaults_fill_in_the_loops_own_limits() -> None:
    scenario = Scenario("mine", "Mine", "q", build=lambda knobs: (None, {}), limits={"max_turns": 2})
    assert scenario.defaults() == {**DEFAULT_LIMITS, "max_turns": 2}
    assert DEFAULT_LIMITS == {"max_turns": 6, "max_calls": 8, "timeout_ms": 5000, "max_chars": 50_000}


@pytest.mark.parametrize(
    ("make", "phrase"),
    [
        (lambda: Knob("k", "k", 0, 3, 7), "its default 7 is outside 0..3"),
        (lambda: Knob("k", "k", 0, 3, 0, choices=("a", "b")), "a knob with 2 choices ranges from 0 to 1"),
        (lambda: Scenario("s", "S", "q", lambda knobs: (None, {}), limits={"max_tokens": 3}), "unknown limits"),
        (lambda: Scenario("s", "S", "q", lambda knobs: (None, {}), knobs=(Knob("max_turns", "t", 0, 1, 0),)), "knob"),
        (lambda: Scenario("s", "S", "q", lambda knobs: (None, {}), loop_knobs=("max_refusals",)), "loop_knobs"),
    ],
)
def test_a_badly_defined_scenario_is_a_config_error(make, phrase: str) -> None:
    with pytest.raises(ConfigError, match=phrase):
        make()
