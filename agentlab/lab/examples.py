"""Small, fixed tools and models for the demo, the tutorial and the notebooks.

Everything here is deterministic: fixed data, no network, no randomness.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agentlab.tools import Tool, parse_lookup_args

# -- the tutorial's weather agent (seed 003) -----------------------------------


def check_city(args: Mapping[str, Any]) -> None:
    """The tutorial's check: `city` must be a string of at most 80 characters."""
    city = args.get("city") if isinstance(args, Mapping) else None
    if not isinstance(city, str) or len(city) > 80:
        raise ValueError("city must be a string with at most 80 characters")


async def get_weather(args: Mapping[str, Any]) -> dict[str, Any]:
    """Fixed data; a real tool would call a weather service here, behind the same contract."""
    return {"city": args["city"], "condition": "rain", "temperatureC": 18}


# What a real model is told about getWeather (`Tool.parameters`); `check_city` is what the application checks.
WEATHER_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {"city": {"type": "string", "maxLength": 80, "description": "The city's name, such as Pune."}},
    "required": ["city"],
    "additionalProperties": False,
}


def weather_tools() -> dict[str, Tool]:
    """The tutorial's one narrow tool, `getWeather`."""
    return {
        "getWeather": Tool(
            validate=check_city,
            run=get_weather,
            description="Current weather in a city.",
            parameters=WEATHER_PARAMETERS,
        )
    }


class WeatherDemo:
    """The tutorial's deterministic model: ask for Pune's weather, then report it."""

    async def decide(self, input: Mapping[str, Any]) -> dict[str, Any]:
        observations = input["observations"]
        if not observations:
            return {"type": "tool_call", "name": "getWeather", "arguments": {"city": "Pune"}}
        weather = observations[0]["result"]
        return {"type": "final", "text": f"{weather['city']}: {weather['condition']}, {weather['temperatureC']}°C"}


WEATHER_GOAL = "What is the weather in Pune?"


class ScriptedDecider:
    """A decider that proposes the given decisions in turn, one per observation so far.

    The tutorial's "test the boundaries" cases are scripted deciders.
    """

    def __init__(self, *decisions: dict[str, Any]) -> None:
        self.decisions = decisions

    async def decide(self, input: Mapping[str, Any]) -> dict[str, Any]:
        return self.decisions[min(len(input["observations"]), len(self.decisions) - 1)]


def _ask_weather(city: Any) -> dict[str, Any]:
    return {"type": "tool_call", "name": "getWeather", "arguments": {"city": city}}


BOUNDARY_CASES: dict[str, ScriptedDecider] = {
    "unknown-tool": ScriptedDecider({"type": "tool_call", "name": "deleteEverything", "arguments": {}}),
    "invalid-city": ScriptedDecider(_ask_weather(42)),
    "same-call-twice": ScriptedDecider(_ask_weather("Pune"), _ask_weather("Pune")),
}

# -- a lookup tool over a tiny catalogue (the exercise's read-only tool) ---------

CATALOGUE: dict[str, dict[str, Any]] = {
    "A": {"id": "A", "title": "The Pragmatic Programmer", "year": 1999, "available": True},
    "B": {"id": "B", "title": "Structure and Interpretation of Computer Programs", "year": 1985, "available": False},
    "C": {"id": "C", "title": "Designing Data-Intensive Applications", "year": 2017, "available": True},
}


async def lookup_book(args: Mapping[str, str]) -> dict[str, Any]:
    """A read-only lookup: the record for an id, or {"found": false}."""
    record = CATALOGUE.get(args["id"])
    return dict(record, found=True) if record else {"id": args["id"], "found": False}


# What a real model is told about lookup; `parse_lookup_args` is what the application checks.
LOOKUP_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "id": {"type": "string", "minLength": 1, "maxLength": 64, "description": "The book's id, such as A."}
    },
    "required": ["id"],
    "additionalProperties": False,
}


def lookup_tools() -> dict[str, Tool]:
    """One read-only tool, `lookup`, whose args are checked by `parse_lookup_args`."""
    return {
        "lookup": Tool(
            validate=parse_lookup_args,
            run=lookup_book,
            description="Look a book up by id.",
            parameters=LOOKUP_PARAMETERS,
        )
    }


__all__ = [
    "BOUNDARY_CASES",
    "CATALOGUE",
    "LOOKUP_PARAMETERS",
    "WEATHER_GOAL",
    "WEATHER_PARAMETERS",
    "ScriptedDecider",
    "WeatherDemo",
    "check_city",
    "get_weather",
    "lookup_book",
    "lookup_tools",
    "weather_tools",
]
