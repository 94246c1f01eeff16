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
import re
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
    """A call's `arguments`, which the format says is a JSON string, parsed.

    Text that is not JSON is the model's own mistake, and the commonest: it is returned as it is, the raw
    text, so that the loop refuses the call ("the args must be a dict") and, within `max_refusals`, gives it
    back to the model to correct. Valid JSON that is not an object (`[1, 2]`, `"A"`) is returned parsed, for
    the same refusal. Arguments that are not a string at all are the server's fault, not the model's:
    a ModelOutputError here.
    """
    if not isinstance(text, str):
        raise malformed(
            f"malformed call {call_id!r} ({name}): {fmt} sends arguments as a JSON string, got "
            f"{type(text).__name__} {_short(text)}; the server does not follow the format",
            raw,
        )
    try:
        return json.loads(text) if text.strip() else {}
    except ValueError:
        return text  # the loop refuses it, quoting it: the raw text stays in the history's refusal and the trace


def check_name(name: Any, raw: Any) -> str:
    """A call's tool name, which every format sends as a string; anything else is the server's fault."""
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


def check_reason(reason: Any, field: str, raw: Any) -> Any:
    """A response's stop reason (`finish_reason`, `status`, `stop_reason`): a string, or absent."""
    if reason is not None and not isinstance(reason, str):
        raise malformed(f"malformed response: {field} must be a string, got {_short(reason)}", raw)
    return reason


def wellformed(value: Any) -> Any:
    """`value` (a request body) with every lone surrogate in its strings replaced by U+FFFD.

    JSON allows a lone surrogate (`"\\ud800"`), so a model's arguments may hold one; but the SDKs encode
    a request as UTF-8, which has none, and would fail with a UnicodeEncodeError. The history keeps what
    the model sent; only the bytes on the wire change.
    """
    if isinstance(value, str):
        return _LONE.sub("\ufffd", value) if not value.isascii() and _LONE.search(value) else value
    if isinstance(value, dict):
        return {wellformed(key): wellformed(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [wellformed(item) for item in value]
    return value


_LONE = re.compile("[\ud800-\udfff]")  # a surrogate code point in a str: UTF-8 cannot encode any of them


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
    "check_name",
    "check_reason",
    "described",
    "malformed",
    "tokens",
    "turns",
    "wellformed",
    "with_usage",
]
