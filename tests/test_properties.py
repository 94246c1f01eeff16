"""The loop holds whatever the model and the tools do: property tests against adversaries.

Each example is a `Scenario` from `agentlab.testing.adversaries`: random limits (zeros
and exact boundaries included), a model that answers with any decision, valid
or malformed, at once, late or never, that raises anything or scribbles on
what it was given, hostile tools, and maybe an abort from outside. Every
example is checked against every invariant of issue 6 (`adversaries.check`).

Each hypothesis example is a batch of one to six scenarios played at once on
one event loop (about 2,100 scenarios in all), deterministic (derandomized)
so CI always runs the same ones; the long random campaign is `make soak`.
"""

from __future__ import annotations

import os
import threading
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentlab.testing.adversaries import (
    AbortPlan,
    ModelTurn,
    Scenario,
    Timing,
    own_run_queue_wait,
    run_queue_waits,
    run_scenarios,
    scenarios,
    waited_for_cpu,
)

# How many examples each test runs is scaled by AGENTLAB_PROPERTY_SCALE (1 = the CI default).
SCALE = float(os.environ.get("AGENTLAB_PROPERTY_SCALE", "1"))


def fixed(examples: int) -> settings:
    return settings(
        max_examples=max(1, round(examples * SCALE)),
        deadline=None,
        derandomize=True,
        database=None,
        print_blob=True,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )


def holds(batch: list[Scenario]) -> None:
    for report in run_scenarios(batch):
        assert report.violations == [], f"{report.outcome}: " + "\n".join(report.violations)


def batches(timeouts: st.SearchStrategy[int] | None = None) -> st.SearchStrategy[list[Scenario]]:
    """A few scenarios played at once on one event loop: the same checks, in a quarter of the wall time."""
    return st.lists(scenarios() if timeouts is None else scenarios(timeouts=timeouts), min_size=1, max_size=6)


@fixed(500)
@given(batches())
def test_the_loop_holds_against_any_adversary(batch: list[Scenario]) -> None:
    holds(batch)


@fixed(100)
@given(batches(timeouts=st.just(200)))
def test_the_loop_holds_when_there_is_time_for_many_turns(batch: list[Scenario]) -> None:
    holds(batch)


@fixed(250)
@given(batches(timeouts=st.integers(0, 3)))
def test_the_loop_holds_when_the_deadline_is_zero_or_nearly(batch: list[Scenario]) -> None:
    holds(batch)


@fixed(60)
@given(scenarios())
def test_the_loop_holds_against_one_adversary_alone(scenario: Scenario) -> None:
    """Alone on its event loop, a run is also checked for the time it spends inspecting a hostile decision."""
    holds([scenario])


# -- what the soak takes off a run's time on a busy host, and what it never does ------------------------------


@pytest.mark.skipif(not os.path.exists("/proc/self/schedstat"), reason="the kernel reports no run-queue waits")
def test_time_spent_asleep_is_never_taken_off_as_waiting_for_a_cpu() -> None:
    before = run_queue_waits()
    time.sleep(0.5)  # a loop that sleeps past its deadline must still be blamed: sleeping is not being kept off a CPU
    after = run_queue_waits()
    assert threading.get_native_id() in after
    assert 0.0 <= waited_for_cpu(before, after) < 0.25


def test_waiting_for_a_cpu_is_the_longest_wait_of_one_thread_not_the_sum() -> None:
    assert waited_for_cpu({1: 2.0, 2: 5.0}, {1: 2.3, 2: 5.1}) == pytest.approx(0.3)  # they may have waited at once
    assert waited_for_cpu({1: 2.0}, {1: 2.0, 3: 0.4}) == pytest.approx(0.4)  # a thread started since counts from 0
    assert waited_for_cpu({1: 2.0}, {}) == 0.0


@pytest.mark.skipif(not os.path.exists("/proc/self/schedstat"), reason="the kernel reports no run-queue waits")
def test_the_aborting_threads_own_wait_is_measured_and_sleeping_is_not_part_of_it() -> None:
    # An abort from another thread is delivered by that thread: on a loaded host it can wait for a CPU (holding the
    # GIL) before the loop is even woken, and the soak takes that wait off the abort's latency, as it does a stall.
    before = own_run_queue_wait()
    time.sleep(0.3)
    assert 0.0 <= own_run_queue_wait() - before < 0.2
    never = (ModelTurn({"kind": "final", "text": "never"}, Timing("never")),)  # only the abort ends it
    scenario = Scenario(never, abort=AbortPlan(5, from_thread=True), listeners=("block", "raise"), timeout_ms=2000)
    [report] = run_scenarios([scenario])
    assert report.violations == [] and report.outcome == "abort reason"
    assert (
        report.abort_latency_ms is not None and report.stalled_ms < 100
    )  # the listener's 100 ms sleep is not taken off
