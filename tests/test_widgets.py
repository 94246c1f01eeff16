"""The playground, without a browser: set a control, await settled(), read the status and the view."""

from __future__ import annotations

import asyncio
import time

import pytest

from agentlab import (
    AbortError,
    AgentResult,
    ConfigError,
    ContextBudgetError,
    DeadlineError,
    ModelError,
    OutputBudgetError,
    ToolBudgetError,
    TurnBudgetError,
)
from agentlab.lab.fakes import final
from agentlab.lab.scenarios import Knob, Scenario, get_scenario
from agentlab.lab.widgets import REPLACED, RUNNING_AFTER_S, SNAPSHOT, STOPPED, Playground, playground, render_view


def waiting(signals: list) -> Scenario:
    """A model that sleeps `delay_ms` ignoring its signal, and keeps every signal it is given."""

    def build(knobs):
        async def model(messages, signal):
            signals.append(signal)
            await asyncio.sleep(knobs["delay_ms"] / 1000)
            return final(f"waited {knobs['delay_ms']} ms")

        return model, {}

    return Scenario("waits", "Waits", "q", build, knobs=(Knob("delay_ms", "delay", 0, 10_000, 0),))


async def test_creating_a_playground_runs_the_scenario_once() -> None:
    pg = playground("weather")
    assert isinstance(pg, Playground) and isinstance(pg.outcome, AgentResult)
    assert pg.status == "✓ answered: Pune: rain, 18°C"
    assert set(pg.controls) == {"max_turns", "max_calls", "timeout_ms", "max_chars", "case"}
    assert pg.view.value == render_view(pg.scenario, pg.settings(), pg.outcome)
    assert "✓ answered: Pune: rain, 18°C" in pg.view.value and pg.stop.disabled


async def test_a_control_change_reruns_and_the_view_follows() -> None:
    pg = playground("tool_names")
    assert pg.status.startswith("✗ UnknownToolError: unknown tool '__class__'")
    pg.controls["name"].value = 0  # the drop-down's "lookup"
    await pg.settled()
    assert (
        pg.status
        == "✓ answered: A: The Pragmatic Programmer (on the shelf); A: The Pragmatic Programmer (on the shelf)"
    )
    assert "name=lookup · good_calls_before=1" in pg.view.value and "refused" not in pg.view.value


@pytest.mark.parametrize(
    ("key", "start", "control", "value", "error"),
    [
        ("budgets", {}, "max_turns", 3, TurnBudgetError),
        ("budgets", {}, "max_calls", 5, ToolBudgetError),
        ("limits", {}, "max_chars", 500, ContextBudgetError),
        ("limits", {}, "answer_size", 900, OutputBudgetError),
        ("deadline", {"timeout_ms": 2000}, "timeout_ms", 100, DeadlineError),
    ],
)
async def test_each_limit_trips_from_its_control(key: str, start: dict, control: str, value: int, error: type) -> None:
    pg = playground(key, **start)
    assert isinstance(pg.outcome, AgentResult)
    pg.controls[control].value = value
    await pg.settled()
    assert type(pg.outcome) is error
    assert pg.status == f"✗ {error.__name__}: {pg.outcome}"
    assert "class='gauge tripped'" in pg.view.value and "✗ stopped" in pg.view.value


async def test_out_of_range_control_values_are_clamped_and_still_run() -> None:
    pg = playground("budgets")
    pg.controls["max_turns"].value = -5
    await pg.settled()
    assert pg.controls["max_turns"].value == 0
    assert pg.status.startswith("✗ TurnBudgetError: turn budget exhausted: the model was called 0 times")
    pg.controls["max_turns"].value = 10**6
    await pg.settled()
    assert pg.controls["max_turns"].value == pg.controls["max_turns"].max == 12
    assert isinstance(pg.outcome, AgentResult)


@pytest.mark.parametrize(
    ("settings", "phrase"),
    [
        ({"max_turns": -1}, "max_turns must be a whole number >= 0 for the playground's slider, got -1"),
        ({"timeout_ms": 2.5}, "timeout_ms must be a whole number >= 0"),
        ({"calls_per_turn": 99}, "calls_per_turn must be a whole number from 1 to 5, got 99"),
        ({"speed": 1}, "the playground 'budgets' has no setting 'speed'; its settings are: max_turns, "),
    ],
)
def test_bad_start_values_are_a_config_error(settings: dict, phrase: str) -> None:
    with pytest.raises(ConfigError, match=phrase):
        playground("budgets", **settings)


def test_a_start_value_beyond_a_slider_widens_it() -> None:
    pg = playground("budgets", max_chars=100_000, timeout_ms=300.0)
    assert (pg.controls["max_chars"].value, pg.controls["max_chars"].max) == (100_000, 200_000)
    assert pg.controls["timeout_ms"].value == 300


async def test_a_model_that_raises_renders_its_error_escaped() -> None:
    def build(knobs):
        async def model(messages, signal):
            raise RuntimeError("<b>boom</b>")

        return model, {}

    pg = playground(Scenario("raises", "Raises", "q", build))
    assert isinstance(pg.outcome, ModelError)
    assert pg.status == "✗ ModelError: the model raised RuntimeError: <b>boom</b>"
    assert "&lt;b&gt;boom&lt;/b&gt;" in pg.view.value and "<b>boom" not in pg.view.value


def test_a_scenario_that_cannot_build_shows_why() -> None:
    def build(knobs):
        raise ValueError("no model today")

    assert playground(Scenario("broken", "Broken", "q", build)).status == "✗ ValueError: no model today"


@pytest.mark.usefixtures("no_leaked_threads")
async def test_stop_aborts_a_slow_run_through_its_signal() -> None:
    signals: list = []
    pg = playground(waiting(signals))
    pg.controls["delay_ms"].value = 5000
    assert "… running" not in pg.view.value and pg.stop.disabled  # a quick run would not flicker
    await asyncio.sleep(2 * RUNNING_AFTER_S)
    assert "… running" in pg.view.value and "class='stale'" in pg.view.value and not pg.stop.disabled
    assert pg.stop.button_style == "danger"  # red while it can stop a run, grey when it cannot
    started = time.perf_counter()
    pg.stop.click()
    await asyncio.wait_for(pg.settled(), 2)
    assert time.perf_counter() - started < 1
    assert isinstance(pg.outcome, AbortError) and pg.status == f"✗ AbortError: {STOPPED}"
    assert signals[-1].aborted and pg.stop.disabled


@pytest.mark.usefixtures("no_leaked_threads")
async def test_a_new_run_cancels_the_one_in_flight() -> None:
    signals: list = []
    pg = playground(waiting(signals))
    pg.controls["delay_ms"].value = 5000
    await asyncio.sleep(0.05)
    started = time.perf_counter()
    pg.controls["delay_ms"].value = 10
    await asyncio.wait_for(pg.settled(), 2)
    assert time.perf_counter() - started < 1
    assert pg.status == "✓ answered: waited 10 ms" and "delay_ms=10" in pg.view.value
    assert len(signals) == 3 and str(signals[1].reason) == REPLACED and not signals[2].aborted


@pytest.mark.usefixtures("no_leaked_threads")
async def test_dragging_a_slider_over_a_blocking_model_never_freezes_the_caller() -> None:
    pg = playground("deadline", timeout_ms=5000, blocking=1, model_delay_ms=0)
    started = time.perf_counter()
    for delay in range(200, 1200, 200):  # five changes in a row, as a drag sends them: 3 s of blocking in all
        pg.controls["model_delay_ms"].value = delay
    tick = time.perf_counter()
    await asyncio.sleep(0.01)  # the caller's event loop still turns while the model blocks its thread
    assert time.perf_counter() - tick < 1.0 and tick - started < 1.0  # generous: a loaded CI machine
    await asyncio.wait_for(pg.settled(), 10)
    assert pg.status == "✓ answered: A: The Pragmatic Programmer (on the shelf)"
    assert "model_delay_ms=1000" in pg.view.value


async def test_the_mimebundle_carries_a_static_snapshot_of_the_last_run(masked) -> None:
    first, second = playground("budgets", max_calls=5), playground("budgets", max_calls=5)
    bundle = first._repr_mimebundle_()
    assert bundle["application/vnd.jupyter.widget-view+json"]["model_id"] == first.box.model_id
    # deterministic, whatever the widget ids, once the time each run measured is masked as nbval masks it
    assert masked(bundle["text/html"]) == masked(second._repr_mimebundle_()["text/html"])
    assert bundle["text/plain"] == second._repr_mimebundle_()["text/plain"]
    assert bundle["text/html"] == render_view(first.scenario, first.settings(), first.outcome, snapshot=True)
    assert bundle["text/plain"].startswith(SNAPSHOT) and SNAPSHOT in bundle["text/html"]  # it says what it is
    assert bundle["text/plain"].splitlines()[1:3] == [
        "playground budgets: max_turns=4 · max_calls=5 · timeout_ms=2000 · max_chars=4000 · calls_per_turn=2 · "
        "turns_before_answer=3",
        "✗ stopped: ToolBudgetError",
    ]


@pytest.mark.usefixtures("no_leaked_threads")
async def test_the_snapshot_shows_the_last_finished_run_while_another_runs() -> None:
    pg = playground(waiting([]))
    pg.controls["delay_ms"].value = 5000
    await asyncio.sleep(0.05)
    snapshot = pg._repr_mimebundle_()
    assert "… running" not in snapshot["text/html"] and "✓ answered: waited 0 ms" in snapshot["text/html"]
    pg.close()
    await asyncio.wait_for(pg.settled(), 2)
    assert pg.status == "✗ AbortError: aborted: the playground was closed" and pg.box.comm is None
    assert sorted(pg._repr_mimebundle_()) == ["text/html", "text/plain"]


def test_a_playground_by_key_or_by_scenario_is_the_same() -> None:
    by_key, by_scenario = playground("call_ids"), playground(get_scenario("call_ids"))
    assert by_key.status == by_scenario.status and by_key.scenario is by_scenario.scenario
    with pytest.raises(ConfigError, match="no scenario 'nope'"):
        playground("nope")
