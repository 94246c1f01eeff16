"""Fake models: deterministic stand-ins for a language model.

A fake model is enough to test a loop, because the loop must never trust the
model anyway: what matters is what the model *proposes*, and a fake can
propose anything, including what a real model does on a bad day.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Callable, Sequence
from typing import Any

from agentlab.abort import AbortSignal

Decision = dict[str, Any]


def final(text: str) -> Decision:
    """A final answer."""
    return {"kind": "final", "text": text}


def call(name: str, args: dict[str, Any], id: str) -> dict[str, Any]:
    """One tool call, as it appears in a decision."""
    return {"id": id, "name": name, "args": args}


def calls(*batch: dict[str, Any]) -> Decision:
    """A tools decision with the given calls."""
    return {"kind": "tools", "calls": list(batch)}


class Scripted:
    """Answers with the given decisions, one per turn, and remembers what it saw.

    An item may also be a function `messages -> decision`, for a decision
    that depends on what came back. `seen` holds the last message the model
    was shown on each turn.
    """

    def __init__(self, *script: Decision | Callable[[Sequence[dict[str, Any]]], Decision]) -> None:
        self.script = list(script)
        self.seen: list[dict[str, Any]] = []

    async def __call__(self, messages: Sequence[dict[str, Any]], signal: AbortSignal) -> Decision:
        self.seen.append(messages[-1])
        turn = len(self.seen)
        if turn > len(self.script):
            raise RuntimeError(f"the script has {len(self.script)} decision(s) and the loop asked for a turn {turn}")
        step = self.script[turn - 1]
        return step(messages) if callable(step) else step

    @property
    def turns(self) -> int:
        return len(self.seen)


class KeepsCalling:
    """Never answers: asks for the same tool every turn, with fresh ids `c1`, `c2`, ...

    `same_id=True` reuses one id, `batch` asks for several calls per turn.
    """

    def __init__(
        self, name: str = "lookup", args: dict[str, Any] | None = None, *, batch: int = 1, same_id: bool = False
    ) -> None:
        self.name, self.args, self.batch, self.same_id = name, args or {"id": "A"}, batch, same_id
        self.ids = itertools.count(1)
        self.turns = 0

    async def __call__(self, messages: Sequence[dict[str, Any]], signal: AbortSignal) -> Decision:
        self.turns += 1
        return calls(
            *(
                call(self.name, dict(self.args), "same" if self.same_id else f"c{next(self.ids)}")
                for _ in range(self.batch)
            )
        )


class NeverAnswers:
    """An async model that ignores the signal and waits forever.

    `cancelled` becomes True when the loop cancels it, which shows that its
    `finally` blocks ran.
    """

    def __init__(self) -> None:
        self.cancelled = False

    async def __call__(self, messages: Sequence[dict[str, Any]], signal: AbortSignal) -> Decision:
        never: asyncio.Future[Decision] = asyncio.get_running_loop().create_future()
        try:
            return await never
        finally:
            self.cancelled = True


class Blocks:
    """A plain (sync) model that blocks its thread for `seconds`, ignoring the signal."""

    def __init__(self, seconds: float, then: Decision | None = None) -> None:
        self.seconds, self.then = seconds, then or final("finally awake")

    def __call__(self, messages: Sequence[dict[str, Any]], signal: AbortSignal) -> Decision:
        time.sleep(self.seconds)
        return self.then


class BlocksFirst:
    """A plain (sync) model that blocks its thread for `delay_ms`, ignoring the signal, then lets `model` decide.

    `model` may be async: the loop awaits what this returns.
    """

    def __init__(self, model: Callable[..., Any], delay_ms: float) -> None:
        self.model, self.delay_ms = model, delay_ms

    def __call__(self, messages: Sequence[dict[str, Any]], signal: AbortSignal) -> Any:
        time.sleep(self.delay_ms / 1000)
        return self.model(messages, signal)


class Slow:
    """Wraps a model and thinks for `delay_ms` first, stopping early if the signal aborts."""

    def __init__(self, model: Callable[..., Any], delay_ms: float) -> None:
        self.model, self.delay_ms = model, delay_ms

    async def __call__(self, messages: Sequence[dict[str, Any]], signal: AbortSignal) -> Decision:
        try:
            reason = await asyncio.wait_for(signal.wait(), self.delay_ms / 1000)
        except TimeoutError:
            return await self.model(messages, signal)
        raise reason


__all__ = ["Blocks", "BlocksFirst", "KeepsCalling", "NeverAnswers", "Scripted", "Slow", "call", "calls", "final"]
