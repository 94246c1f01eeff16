"""What every provider format needs from agentlab's history, and what every adapter checks coming back.

The history is agentlab's own: `{"role": "user", "content"}`, `{"role":
"assistant", "calls": [{"id", "name", "args"}]}`, `{"role": "tool", "call_id",
"content"}`, `{"role": "assistant", "content"}`. Every provider rejects a
transcript in which a call has no result (OpenAI: "An assistant message with
'tool_calls' must be followed by tool messages responding to each
'tool_call_id'"; Anthropic: "`tool_use` ids were found without `tool_result`
blocks immediately after"). A history cut short by a deadline or an abort has
exactly such calls, so `turns(history)` gives each batch of calls exactly one
result per call id, the loop's own record where there is one and a stated
"abandoned" result where there is none.

Pure functions on plain data: no SDK, no network.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from agentlab.errors import ConfigError, ModelOutputError
from agentlab.jsonc import compact_json

# The result sent for a call that has none in the history (the run stopped before it finished).
ABANDONED = compact_json({"abandoned": True, "note": "no result: the run stopped before this call finished"})


@dataclass(frozen=True)
class Result:
    """One call's result as it is sent back: its content, and whether it reports a failure."""

    call_id: str
    content: str
    is_error: bool


@dataclass(frozen=True)
class Turn:
    """One step of a transcript: a user message, an answer, or a batch of calls with one result each."""

    kind: str  # "user", "final" or "calls"
    text: str = ""
    calls: tuple[dict[str, Any], ...] = ()
    results: tuple[Result, ...] = ()


def turns(history: Sequence[dict[str, Any]]) -> Iterator[Turn]:
    """The history as provider-ready turns: every call answered exactly once, right after its batch."""
    index = 0
    while index < len(history):
        message = history[index]
        index += 1
        role = message.get("role")
        if "calls" in message:
            calls = tuple(message["calls"])
            found: dict[str, str] = {}
            while index < len(history) and history[index].get("role") == "tool":
                result = history[index]
                if result.get("call_id") not in {call["id"] for call in calls}:
                    raise ConfigError(
                        f"the history has a result for call {result.get('call_id')!r}, which the batch before it "
                        "did not ask for; pass a history made by agent_loop, unchanged"
                    )
                found[result["call_id"]] = result["content"]  # the last record of a call wins (e.g. rolled back)
                index += 1
            results = tuple(
                Result(c["id"], found.get(c["id"], ABANDONED), _reports_failure(found.get(c["id"], ABANDONED)))
                for c in calls
            )
            yield Turn("calls", calls=calls, results=results)
        elif role == "user":
            yield Turn("user", text=str(message["content"]))
        elif role == "assistant":
            yield Turn("final", text=str(message["content"]))
        elif role == "tool":
            raise ConfigError(
                f"the history has a result for call {message.get('call_id')!r} with no call before it; "
                "pass a history made by agent_loop, unchanged"
            )
        else:
            raise ConfigError(f"the history has a message with role {role!r}; expected user, assistant or tool")


def _reports_failure(content: str) -> bool:
    """The loop's own records of a call that did not do its work: abandoned, rolled back, outcome unknown,
    or refused and returned to the model (`max_refusals`), its own call or another of its batch."""
    try:
        value = json.loads(content)
    except ValueError:
        return False
    if not isinstance(value, dict):
        return False
    if set(value) in ({"refused"}, {"not_run"}):
        return True
    return value.get("abandoned") is True or value.get("rolled_back") is True or value.get("outcome") == "unknown"


def args_from_json(text: Any, call_id: Any, name: Any, raw: Any, fmt: str) -> Any:
    """A call's `arguments`, which the format says is a JSON string, parsed; anything else is malformed.

    Valid JSON that is not an object (`[1, 2]`, `"A"`) is returned as it is: the loop refuses it with
    "the args must be a dict", as it does for every model.
    """
    if not isinstance(text, str):
        raise malformed(
            f"malformed call {call_id!r} ({name}): {fmt} sends arguments as a JSON string, got "
            f"{type(text).__name__} {_short(text)}; the server does not follow the format",
            raw,
        )
    try:
        return json.loads(text) if text.strip() else {}
    except ValueError as error:
        raise malformed(
            f"malformed call {call_id!r} ({name}): its arguments are not JSON ({error}): {_short(text)}", raw
        ) from None


def check_id(call_id: Any, name: Any, raw: Any) -> str:
    """A provider's call id, which must be a non-empty string; a missing one is malformed, never made up here.

    An id the adapter invented would tie the result to nothing the provider issued, and would hide a
    broken server; the loop's duplicate-id check then covers a repeated one.
    """
    if not isinstance(call_id, str) or not call_id:
        raise malformed(f"malformed call ({name}): it has no call id (got {_short(call_id)})", raw)
    return call_id


def check_name(name: Any, raw: Any) -> str:
    if not isinstance(name, str):
        raise malformed(f"malformed call: the tool name must be a string, got {_short(name)}", raw)
    return name


def tokens(input_tokens: Any, output_tokens: Any) -> dict[str, int] | None:
    """The provider's token counts for one turn, or None when it reported none (or nonsense)."""
    counts = {"input_tokens": input_tokens, "output_tokens": output_tokens}
    if all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in counts.values()):
        return counts
    return None


def with_usage(decision: dict[str, Any], usage: dict[str, int] | None) -> dict[str, Any]:
    if usage is not None:
        decision["usage"] = usage
    return decision


def malformed(message: str, raw: Any) -> ModelOutputError:
    """A ModelOutputError that keeps the provider's raw output as `rejected`, for the trace."""
    return ModelOutputError(message, rejected=raw)


def described(tools: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    """Each tool's name, description and parameters schema; a tool without a schema cannot be described."""
    out = []
    for name, tool in tools.items():
        parameters = getattr(tool, "parameters", None)
        if parameters is None:
            raise ConfigError(
                f"tool {name!r} has no parameters schema, so a real model cannot be told its args: "
                'give it Tool(..., parameters={"type": "object", "properties": {...}, "required": [...]})'
            )
        out.append((name, getattr(tool, "description", "") or "", parameters))
    return out


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 120 else text[:117] + "..."


__all__ = [
    "ABANDONED",
    "Result",
    "Turn",
    "args_from_json",
    "check_id",
    "check_name",
    "described",
    "malformed",
    "tokens",
    "turns",
    "with_usage",
]
