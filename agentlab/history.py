"""The history of a run, and the read-only view of it that the model is given.

The history is a list of messages, each a plain dict:

    {"role": "user", "content": "..."}                         the input
    {"role": "assistant", "calls": [{"id", "name", "args"}]}   a batch the loop accepted
    {"role": "tool", "call_id": "...", "content": "..."}       one call's result, as JSON text
    {"role": "assistant", "content": "..."}                    the final answer

An assistant message may also carry "usage": the tokens a real model reported
for that turn. Nothing else is in it: the history is the run's record.

`Messages` is a speed measure, not an idea to learn: the loop must hand the
model the history without letting it change the loop's own copy, and copying
the whole history every turn would cost more the longer a run gets.
"""

from __future__ import annotations

import operator
from collections.abc import Iterator, Sequence
from typing import Any

from agentlab.jsonc import compact_json, copy_json

Message = dict[str, Any]


class Messages(Sequence[Message]):
    """What the model sees: the history as it was when the model was called.

    Read-only, and every message you read is a fresh copy, so nothing the
    model does to it reaches the loop's own history. Costs nothing to make,
    however long the history is: no message is copied until it is read.
    """

    __slots__ = ("_history", "_length")

    def __init__(self, history: list[Message], length: int) -> None:
        self._history, self._length = history, length

    def __len__(self) -> int:
        return self._length

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return [copy_message(self._history[i]) for i in range(self._length)[index]]
        # operator.index: only a real integer index (as a list takes), never a float or a str
        return copy_message(self._history[range(self._length)[operator.index(index)]])

    def __iter__(self) -> Iterator[Message]:
        return (copy_message(self._history[i]) for i in range(self._length))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (Messages, list, tuple)):
            return list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # equal to a list, so unhashable like one

    def __repr__(self) -> str:
        return f"Messages({list(self)!r})"


def copy_message(message: Message) -> Message:
    """A copy of one history message that shares nothing mutable with it."""
    copied = dict(message)
    if "calls" in copied:
        copied["calls"] = [
            {"id": call["id"], "name": call["name"], "args": copy_json(call["args"])} for call in copied["calls"]
        ]
    if "usage" in copied:  # a real model's tokens for the turn
        copied["usage"] = dict(copied["usage"])
    return copied


def context_size(message: Message) -> int:
    """Characters a message adds to the context: its content, or its calls as compact JSON."""
    if "calls" in message:
        return len(compact_json(message["calls"]))
    return len(message["content"])


__all__ = ["Message", "Messages", "context_size", "copy_message"]
