"""The loop holds whatever the model and the tools do: property tests against adversaries.

Each example is a `Scenario` from `agentlab.adversaries`: random limits (zeros
and exact boundaries included), a model that answers with any decision, valid
or malformed, at once, late or never, that raises anything or scribbles on
what it was given, hostile tools, and maybe an abort from outside. Every
example is checked against every invariant of issue 6 (`adversaries.check`).

Deterministic (derandomized) so CI always runs the same examples; the long
random campaign is `make soak`.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentlab.adversaries import Scenario, run_scenario, scenarios

EXAMPLES = int(os.environ.get("AGENTLAB_PROPERTY_EXAMPLES", "600"))

fixed = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    database=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def holds(scenario: Scenario) -> None:
    report = run_scenario(scenario)
    assert report.violations == [], f"{report.outcome}: " + "\n".join(report.violations)


@fixed
@given(scenarios())
def test_the_loop_holds_against_any_adversary(scenario: Scenario) -> None:
    holds(scenario)


@fixed
@given(scenarios(timeouts=st.just(200)))
def test_the_loop_holds_when_there_is_time_for_many_turns(scenario: Scenario) -> None:
    holds(scenario)


@fixed
@given(scenarios(timeouts=st.integers(0, 3)))
def test_the_loop_holds_when_the_deadline_is_zero_or_nearly(scenario: Scenario) -> None:
    holds(scenario)
