"""from_decider: the tutorial's interface (seed 003) plugged into agent_loop."""

from __future__ import annotations

import pytest

from agentlab import (
    ConfigError,
    ModelOutputError,
    RepeatedCallError,
    ToolArgsError,
    UnknownToolError,
    agent_loop,
    from_decider,
)
from agentlab.adapters import observations_from
from agentlab.lab.examples import BOUNDARY_CASES, WEATHER_GOAL, ScriptedDecider, WeatherDemo, weather_tools


async def test_the_tutorials_demo_prints_pune_rain_18() -> None:
    result = await agent_loop(
        WEATHER_GOAL, from_decider(WeatherDemo()), weather_tools(), max_turns=5, forbid_repeats=True
    )
    assert result.text == "Pune: rain, 18°C"
    assert result.history[1] == {
        "role": "assistant",
        "calls": [{"id": "call_1", "name": "getWeather", "args": {"city": "Pune"}}],
    }


@pytest.mark.parametrize(
    ("case", "error"),
    [("unknown-tool", UnknownToolError), ("invalid-city", ToolArgsError), ("same-call-twice", RepeatedCallError)],
)
async def test_the_tutorials_boundaries_fail_before_any_effect(case, error) -> None:
    ran = []
    tools = weather_tools()
    original = tools["getWeather"].run

    async def counting(args):
        ran.append(args)
        return await original(args)

    tools["getWeather"] = type(tools["getWeather"])(validate=tools["getWeather"].validate, run=counting)
    with pytest.raises(error):
        await agent_loop(WEATHER_GOAL, from_decider(BOUNDARY_CASES[case]), tools, forbid_repeats=True)
    assert len(ran) == (1 if case == "same-call-twice" else 0)


async def test_call_ids_are_generated_in_order_and_observations_carry_results() -> None:
    seen = []

    class Recorder:
        async def decide(self, input):
            seen.append(input)
            if len(input["observations"]) < 2:
                return {"type": "tool_call", "name": "getWeather", "arguments": {"city": f"City{len(seen)}"}}
            return {"type": "final", "text": "ok"}

    result = await agent_loop("goal", from_decider(Recorder()), weather_tools())
    ids = [m["calls"][0]["id"] for m in result.history if "calls" in m]
    assert ids == ["call_1", "call_2"]
    assert seen[2]["goal"] == "goal"
    assert seen[2]["observations"][1] == {
        "tool": "getWeather",
        "arguments": {"city": "City2"},
        "result": {"city": "City2", "condition": "rain", "temperatureC": 18},
    }


async def test_a_plain_decider_works_too() -> None:
    class Plain:
        def decide(self, input):
            return {"type": "final", "text": "sync"}

    assert (await agent_loop("q", from_decider(Plain()), {})).text == "sync"


async def test_an_unknown_decision_type_is_malformed_and_keeps_the_history() -> None:
    with pytest.raises(ModelOutputError, match="malformed") as raised:
        await agent_loop("q", from_decider(ScriptedDecider({"type": "shrug"})), {})
    assert raised.value.history == [{"role": "user", "content": "q"}]


def test_from_decider_needs_a_decide_method() -> None:
    with pytest.raises(ConfigError, match="decide"):
        from_decider(object())


def test_observations_ignore_unanswered_calls() -> None:
    messages = [
        {"role": "user", "content": "g"},
        {"role": "assistant", "calls": [{"id": "a", "name": "t", "args": {}}, {"id": "b", "name": "t", "args": {}}]},
        {"role": "tool", "call_id": "a", "content": "1"},
    ]
    assert observations_from(messages) == ("g", [{"tool": "t", "arguments": {}, "result": 1}])
