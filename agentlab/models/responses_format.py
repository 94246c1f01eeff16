"""The OpenAI Responses API: agentlab's history to `input` items and back.

Calls are `function_call` items correlated by `call_id` (not their `id`);
results go back as `function_call_output` items. The adapter sends the whole
transcript every turn (`store=False`), so nothing lives on the provider's
side. Pure functions on plain JSON data, no SDK.
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

FORMAT = "Responses"


def tool_specs(tools: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The tools as flat `{"type": "function", "name", "description", "parameters"}` entries."""
    return [
        {"type": "function", "name": name, "description": text, "parameters": schema}
        for name, text, schema in described(dict(tools))
    ]


def to_input(history: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The history as Responses `input` items: one `function_call_output` per `call_id`."""
    out: list[dict[str, Any]] = []
    for turn in turns(history):
        if turn.kind == "user":
            out.append({"role": "user", "content": turn.text})
        elif turn.kind == "final":
            out.append({"role": "assistant", "content": turn.text})
        else:
            out.extend(
                {
                    "type": "function_call",
                    "call_id": call["id"],
                    "name": call["name"],
                    "arguments": compact_json(call["args"]),
                }
                for call in turn.calls
            )
            out.extend(
                {"type": "function_call_output", "call_id": r.call_id, "output": r.content} for r in turn.results
            )
    return out


def decision_from(response: Any) -> dict[str, Any]:
    """A Responses body as a decision; an incomplete, refused or malformed one is a ModelOutputError."""
    output = response.get("output") if isinstance(response, dict) else None
    if not isinstance(output, list):
        raise malformed(f"malformed response: no output list in the {FORMAT} response", response)
    spent = tokens_of(response)
    if check_reason(response.get("status"), "status", response) == "incomplete":
        details = response.get("incomplete_details")
        reason = details.get("reason") if isinstance(details, dict) else None
        if reason == "content_filter":
            raise malformed("content filter: the provider withheld the output (status 'incomplete')", output)
        raise malformed(
            f"incomplete output: the response stopped early (reason {reason!r}); raise the adapter's "
            "max_output_tokens, or ask for less",
            output,
        )
    calls, texts = [], []
    for item in output:
        kind = item.get("type") if isinstance(item, dict) else None
        if kind == "function_call":
            name = check_name(item.get("name"), output)
            call_id = item.get("call_id")  # as sent, even missing: the loop refuses it (see chat_format)
            args = args_from_json(item.get("arguments"), call_id, name, output, FORMAT)
            calls.append({"id": call_id, "name": name, "args": args})
        elif kind == "message":
            parts = item.get("content") or []
            if not isinstance(parts, list):
                raise malformed(f"malformed response: a message's content must be a list, got {parts!r:.80}", output)
            for part in parts:
                if isinstance(part, dict) and part.get("type") == "refusal":
                    raise malformed(f"the model refused: {part.get('refusal')!r:.200}", output)
                if isinstance(part, dict) and part.get("type") == "output_text" and isinstance(part.get("text"), str):
                    texts.append(part["text"])
        elif kind in ("reasoning", None) and isinstance(item, dict):
            continue  # a reasoning model's thinking: not a proposal (not sent back either: store=False)
        else:
            raise malformed(
                f"malformed output: a {kind!r} item, not a function call or a message; agentlab runs "
                "function tools only",
                output,
            )
    if calls:
        return with_usage({"kind": "tools", "calls": calls}, spent)
    if texts:
        return with_usage({"kind": "final", "text": "".join(texts)}, spent)
    raise malformed("malformed response: neither function calls nor text", output)


def tokens_of(response: Any) -> dict[str, int] | None:
    """The turn's token counts from a response body (`usage.input_tokens`, `output_tokens`), if any."""
    usage = response.get("usage") if isinstance(response, dict) else None
    usage = usage if isinstance(usage, dict) else {}
    return tokens(usage.get("input_tokens"), usage.get("output_tokens"))


__all__ = ["FORMAT", "decision_from", "to_input", "tokens_of", "tool_specs"]
