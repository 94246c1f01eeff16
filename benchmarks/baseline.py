"""The bare baseline: the smallest loop that does the same work, and nothing else.

No validation, no copies, no budgets but `max_turns`, no deadline and no
abort: the model gets the history list itself, and whatever it proposes runs.
Its cost per turn is the floor that every other system is measured against.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

Model = Callable[[list[dict[str, Any]]], Awaitable[dict[str, Any]]]
ToolFunction = Callable[[dict[str, Any]], Awaitable[Any]]


async def bare_loop(input: str, model: Model, tools: dict[str, ToolFunction], max_turns: int) -> str:
    """Ask the model, run what it asks for, repeat until it answers; trust everything."""
    history: list[dict[str, Any]] = [{"role": "user", "content": input}]
    for _ in range(max_turns):
        decision = await model(history)
        if decision["kind"] == "final":
            history.append({"role": "assistant", "content": decision["text"]})
            return decision["text"]
        history.append({"role": "assistant", "calls": decision["calls"]})
        for call in decision["calls"]:
            result = await tools[call["name"]](call["args"])
            history.append({"role": "tool", "call_id": call["id"], "content": json.dumps(result)})
    raise RuntimeError(f"no answer after {max_turns} turns")
