"""A second model interface: the tutorial's `decider`, plugged into `agent_loop`.

The tutorial (seed 003) describes its model as an object with one method:

    decision = await decider.decide({"goal": str, "observations": [...]})
    # {"type": "tool_call", "name": str, "arguments": {...}} or {"type": "final", "text": str}

It sees the goal and what each earlier tool call returned, proposes one call at
a time, and never invents call ids. `from_decider` turns such an object into a
`model(messages, signal)` for `agent_loop`: it rebuilds the observations from
the history and numbers the calls `call_1`, `call_2`, ... Every check stays in
the loop; the adapter only translates.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable, Sequence
from typing import Any

from agentlab.callees import is_async_callable
from agentlab.errors import ConfigError, ModelOutputError


def observations_from(messages: Sequence[dict[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
    """The goal (the first user message) and one observation per finished tool call."""
    goal = ""
    observations: list[dict[str, Any]] = []
    pending: dict[str, dict[str, Any]] = {}
    for message in messages:
        role = message.get("role")
        if role == "user" and not goal:
            goal = message["content"]
        elif role == "assistant" and "calls" in message:
            for call in message["calls"]:
                pending[call["id"]] = {"tool": call["name"], "arguments": call["args"]}
        elif role == "tool" and message.get("call_id") in pending:
            observation = pending.pop(message["call_id"])
            observation["result"] = json.loads(message["content"])
            observations.append(observation)
    return goal, observations


def translate(decision: Any, call_number: int) -> dict[str, Any]:
    """A decider's decision as a decision of `agent_loop`'s model interface."""
    if isinstance(decision, dict) and decision.get("type") == "final":
        return {"kind": "final", "text": decision.get("text")}
    if isinstance(decision, dict) and decision.get("type") == "tool_call":
        call = {"id": f"call_{call_number}", "name": decision.get("name"), "args": decision.get("arguments")}
        return {"kind": "tools", "calls": [call]}
    raise ModelOutputError(
        "malformed decision from the decider: expected "
        '{"type": "tool_call", "name": ..., "arguments": {...}} or {"type": "final", "text": ...}, '
        f"got {decision!r:.200}"
    )


def from_decider(decider: Any) -> Callable[..., Any]:
    """Adapt an object with `decide({"goal", "observations"})` to a `model` for `agent_loop`.

    An async `decide` gives an async model; a plain one gives a plain model,
    which the loop runs in a worker thread like any blocking model.
    """
    decide = getattr(decider, "decide", None)
    if not callable(decide):
        raise ConfigError(f"from_decider needs an object with a decide(input) method, got {type(decider).__name__}")

    def ask(messages: Sequence[dict[str, Any]]) -> tuple[Any, int]:
        goal, observations = observations_from(messages)
        calls_so_far = sum(len(m["calls"]) for m in messages if "calls" in m)
        return decide({"goal": goal, "observations": observations}), calls_so_far + 1

    if is_async_callable(decide):

        async def model(messages: Sequence[dict[str, Any]]) -> dict[str, Any]:
            pending, number = ask(messages)
            return translate(await pending, number)

    else:

        def model(messages: Sequence[dict[str, Any]]) -> Any:  # type: ignore[misc]
            decision, number = ask(messages)
            if inspect.isawaitable(decision):
                return _later(decision, number)
            return translate(decision, number)

    model.__qualname__ = model.__name__ = f"from_decider({type(decider).__name__})"
    return model


async def _later(decision: Any, number: int) -> dict[str, Any]:
    return translate(await decision, number)


__all__ = ["from_decider", "observations_from", "translate"]
