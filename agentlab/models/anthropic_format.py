"""Anthropic Messages: agentlab's history to `messages` and back.

Calls are `tool_use` content blocks; their results go back as `tool_result`
blocks at the start of the next *user* message, all the results of one batch
in one message (two user messages in a row are merged: the API wants the
roles to alternate). `input` comes already parsed, and must be an object: one
that is not, or a call with no id, is left in the decision for the loop to
refuse. With extended thinking, the API wants the `thinking` blocks that came
with a batch of calls sent back, unchanged, at the head of that assistant
message: `thinking_of(response)` keeps them by call id, and `to_messages`
puts them back. Pure functions on plain JSON data, no SDK.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from agentlab.models.transcript import check_name, check_reason, described, malformed, tokens, turns, with_usage

FORMAT = "Anthropic Messages"

# stop_reason -> what it means, for the ones that are not an answer or a call
STOPPED = {
    "max_tokens": "incomplete output: the model hit its output token limit (stop_reason 'max_tokens'); "
    "raise the adapter's max_output_tokens, or ask for less",
    "refusal": "the model refused (stop_reason 'refusal')",
    "pause_turn": "paused turn (stop_reason 'pause_turn'): a server-side tool is still running; "
    "agentlab runs the application's own tools only",
    "model_context_window_exceeded": "the history no longer fits the model's context window "
    "(stop_reason 'model_context_window_exceeded'); lower max_chars so the loop stops first",
}


def tool_specs(tools: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The tools as `{"name", "description", "input_schema"}`."""
    return [
        {"name": name, "description": text, "input_schema": schema} for name, text, schema in described(dict(tools))
    ]


THINKING = ("thinking", "redacted_thinking")


def to_messages(
    history: Sequence[dict[str, Any]], thinking: Mapping[str, list[dict[str, Any]]] | None = None
) -> list[dict[str, Any]]:
    """The history as Anthropic messages: `tool_use` blocks, then ONE user message of `tool_result` blocks.

    `thinking` maps a call id to the thinking blocks the model sent just before that call (`thinking_of`);
    each goes back in its place, before its `tool_use`.
    """
    thinking = thinking or {}
    out: list[dict[str, Any]] = []

    def add(role: str, blocks: list[dict[str, Any]]) -> None:
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": role, "content": blocks})

    for turn in turns(history):
        if turn.kind == "user":
            add("user", [{"type": "text", "text": turn.text}])
        elif turn.kind == "final":
            add("assistant", [{"type": "text", "text": turn.text}])
        else:
            blocks: list[dict[str, Any]] = []
            for c in turn.calls:
                blocks += thinking.get(c["id"], [])
                blocks.append({"type": "tool_use", "id": c["id"], "name": c["name"], "input": c["args"]})
            add("assistant", blocks)
            add(
                "user",
                [
                    {"type": "tool_result", "tool_use_id": r.call_id, "content": r.content, "is_error": r.is_error}
                    for r in turn.results
                ],
            )
    return out


def decision_from(response: Any) -> dict[str, Any]:
    """A Messages response body as a decision; a stop that is not an answer is a ModelOutputError."""
    content = response.get("content") if isinstance(response, dict) else None
    if not isinstance(content, list):
        raise malformed(f"malformed response: no content list in the {FORMAT} response", response)
    spent = tokens_of(response)
    reason = check_reason(response.get("stop_reason"), "stop_reason", response)
    if reason in STOPPED:
        raise malformed(STOPPED[reason], content)
    calls, texts = [], []
    for block in content:
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "tool_use":
            name = check_name(block.get("name"), content)
            # As sent: an input that is not an object, or no id, is the loop's to refuse (and give back).
            calls.append({"id": block.get("id"), "name": name, "args": block.get("input")})
        elif kind == "text" and isinstance(block.get("text"), str):
            texts.append(block["text"])  # text beside calls is the model thinking aloud: not a proposal
        elif kind in THINKING:
            continue  # not a proposal; kept for the next request by thinking_of
        else:
            raise malformed(
                f"malformed output: a {kind!r} block, not a tool_use or text; agentlab runs the application's "
                "own tools only",
                content,
            )
    if calls:
        return with_usage({"kind": "tools", "calls": calls}, spent)
    if texts:
        return with_usage({"kind": "final", "text": "".join(texts)}, spent)
    raise malformed(f"malformed response: neither tool_use nor text (stop_reason {reason!r})", content)


def thinking_of(response: Any) -> dict[str, list[dict[str, Any]]]:
    """The thinking blocks of a response, by the id of the `tool_use` each came just before, unchanged."""
    content = response.get("content") if isinstance(response, dict) else None
    found: dict[str, list[dict[str, Any]]] = {}
    waiting: list[dict[str, Any]] = []
    for block in content if isinstance(content, list) else []:
        kind = block.get("type") if isinstance(block, dict) else None
        if kind in THINKING:
            waiting.append(block)
        elif kind == "tool_use" and waiting:
            if isinstance(block.get("id"), str):
                found[block["id"]] = waiting
            waiting = []
    return found


def tokens_of(response: Any) -> dict[str, int] | None:
    """The turn's token counts from a response body (`usage.input_tokens`, `output_tokens`), if any."""
    usage = response.get("usage") if isinstance(response, dict) else None
    usage = usage if isinstance(usage, dict) else {}
    return tokens(usage.get("input_tokens"), usage.get("output_tokens"))


__all__ = ["FORMAT", "STOPPED", "THINKING", "decision_from", "thinking_of", "to_messages", "tokens_of", "tool_specs"]
