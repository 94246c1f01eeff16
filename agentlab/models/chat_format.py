"""OpenAI Chat Completions (and every OpenAI-compatible server): agentlab's history to the wire and back.

Pure functions on plain JSON data, no SDK: `tool_specs(tools)` and
`to_messages(history)` build the request; `decision_from(response)` reads the
response body into a decision for `agent_loop`, or raises a ModelOutputError
that keeps the raw output. A call the model got wrong (arguments that are not
JSON, no id) is left in the decision as it came, for the loop to refuse and,
within `max_refusals`, give back to the model.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from agentlab.jsonc import compact_json
from agentlab.models.transcript import (
    args_from_json,
    check_name,
    check_reason,
    described,
    malformed,
    tokens,
    turns,
    with_usage,
)

FORMAT = "Chat Completions"


def tool_specs(tools: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The tools as the request's `tools`: `{"type": "function", "function": {name, description, parameters}}`."""
    return [
        {"type": "function", "function": {"name": name, "description": text, "parameters": schema}}
        for name, text, schema in described(dict(tools))
    ]


def to_messages(history: Sequence[dict[str, Any]], system: str | None = None) -> list[dict[str, Any]]:
    """The history as Chat Completions messages: calls as `tool_calls`, one `tool` message per call id."""
    out: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
    for turn in turns(history):
        if turn.kind == "user":
            out.append({"role": "user", "content": turn.text})
        elif turn.kind == "final":
            out.append({"role": "assistant", "content": turn.text})
        else:
            calls = [
                {
                    "id": call["id"],
                    "type": "function",
                    "function": {"name": call["name"], "arguments": compact_json(call["args"])},
                }
                for call in turn.calls
            ]
            out.append({"role": "assistant", "content": None, "tool_calls": calls})
            out.extend({"role": "tool", "tool_call_id": r.call_id, "content": r.content} for r in turn.results)
    return out


def decision_from(response: Any) -> dict[str, Any]:
    """A Chat Completions response body as a decision; what a model gets wrong is a ModelOutputError."""
    choices = response.get("choices") if isinstance(response, dict) else None
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise malformed(f"malformed response: no choices in the {FORMAT} response", response)
    choice = choices[0]
    message = choice.get("message")
    if not isinstance(message, dict):
        raise malformed(f"malformed response: the {FORMAT} choice has no message", response)
    spent = tokens_of(response)
    reason = check_reason(choice.get("finish_reason"), "finish_reason", response)
    if message.get("refusal"):
        raise malformed(f"the model refused: {message['refusal']!r:.200}", message)
    if reason == "length":
        raise malformed(
            "incomplete output: the model hit its output token limit (finish_reason 'length') before it finished; "
            "raise the adapter's max_output_tokens, or ask for less",
            message,
        )
    if reason == "content_filter":
        raise malformed("content filter: the provider withheld the output (finish_reason 'content_filter')", message)
    tool_calls = message.get("tool_calls")
    if tool_calls:
        if not isinstance(tool_calls, list):
            raise malformed("malformed response: tool_calls must be a list", message)
        return with_usage({"kind": "tools", "calls": [_call(call, message) for call in tool_calls]}, spent)
    content = message.get("content")
    if not isinstance(content, str):
        raise malformed(f"malformed response: neither tool calls nor text (finish_reason {reason!r})", message)
    return with_usage({"kind": "final", "text": content}, spent)


def tokens_of(response: Any) -> dict[str, int] | None:
    """The turn's token counts from a response body (`usage.prompt_tokens`, `completion_tokens`), if any."""
    usage = response.get("usage") if isinstance(response, dict) else None
    usage = usage if isinstance(usage, dict) else {}
    return tokens(usage.get("prompt_tokens"), usage.get("completion_tokens"))


def _call(call: Any, raw: Any) -> dict[str, Any]:
    if not isinstance(call, dict):
        raise malformed(f"malformed call: expected an object, got {call!r:.80}", raw)
    if call.get("type", "function") != "function" or not isinstance(call.get("function"), dict):
        raise malformed(
            f"malformed call {call.get('id')!r}: a {call.get('type')!r} call, not a function call; "
            "agentlab runs function tools only",
            raw,
        )
    function = call["function"]
    name = check_name(function.get("name"), raw)
    call_id = call.get("id")  # as sent, even missing: the loop refuses an unusable id, and answers under its own
    return {"id": call_id, "name": name, "args": args_from_json(function.get("arguments"), call_id, name, raw, FORMAT)}


__all__ = ["FORMAT", "decision_from", "to_messages", "tokens_of", "tool_specs"]
