"""A notebook's naive loop, run on a playground's scenario: the same model and tools, no rule.

Each lesson writes a loop without its rule ("Without the rule") and the
playground can run the scenario through it instead of `agent_loop`, so the
learner sees the rule's point by flipping one toggle. A naive loop keeps no
record a trace could show, so the model and the tools are watched from
outside: the trace is the run as the model saw it (the messages of its last
turn and its last decision), and the gauges count what was spent against the
limits the naive loop was never told to keep.

A naive loop has no deadline and ignores the abort signal. Two things here stop
it anyway, at the edges it cannot avoid: the watched model and tools raise the
stop (the Stop button, a newer run) when they are next called or while they
wait, and a run still going after `NAIVE_BOUND_S` is given up on.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import inspect
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from agentlab.abort import AbortController, AbortSignal
from agentlab.callees import Callee
from agentlab.history import context_size
from agentlab.i18n import _, ngettext
from agentlab.result import Limits, Usage
from agentlab.tools import Tool

NaiveLoop = Callable[..., Any]
# How long a naive run may go on before the playground gives up on it: it has no deadline of its own.
NAIVE_BOUND_S = 3.0
# A naive run's trace keeps this many messages at each end.
_KEPT = 20
# What a naive run still going after NAIVE_BOUND_S says (in English here; `_` translates it where shown).
GAVE_UP = (
    "the naive loop was still running after {seconds} s; the playground gave up on it "
    "(nothing in it would ever stop it)"
)


class Answer(NamedTuple):
    """What a notebook's naive loop returns, as the exercise's loop does: `{text, history}`."""

    text: str
    history: list[dict[str, Any]]


@dataclass
class NaiveRun:
    """A naive loop's answer, with the run as the model saw it and what it spent."""

    text: str
    history: list[dict[str, Any]]
    usage: Usage
    limits: Limits


class NaiveCrash(Exception):
    """A naive loop that raised (or ran on past the bound): its error, with the run as the model saw it.

    `gave_up_after_s` is set when the playground gave up on a naive loop still running: the message is then the
    playground's own, said in the learner's language when shown.
    """

    def __init__(
        self,
        message: str,
        history: list[dict[str, Any]],
        usage: Usage,
        limits: Limits,
        gave_up_after_s: float | None = None,
    ) -> None:
        super().__init__(message)
        self.history, self.usage, self.limits, self.rejected = history, usage, limits, None
        self.gave_up_after_s = gave_up_after_s

    def __str__(self) -> str:
        if self.gave_up_after_s is None:
            return super().__str__()
        return _(GAVE_UP).format(seconds=f"{self.gave_up_after_s:g}")

    @property
    def where(self) -> str:
        """Where it stopped, for the trace: a naive loop keeps no record of which call it was running."""
        return _("in turn {turn}, in the naive loop's own code").format(turn=self.usage.turns)


@dataclass
class _Watch:
    """What the model and the tools were seen doing."""

    started: float = field(default_factory=time.perf_counter)
    seen: list[dict[str, Any]] = field(default_factory=list)  # the messages of the model's last turn
    last: dict[str, Any] | None = None  # its last decision, as a history message
    turns: int = 0
    calls: int = 0

    def history(self) -> list[dict[str, Any]]:
        """The run as the model last saw it; a very long one keeps its start and its end, to stay readable."""
        seen = self.seen
        if len(seen) > 2 * _KEPT:
            left_out = len(seen) - 2 * _KEPT
            shown = ngettext(
                "(… {n} messages of the naive run not shown …)",
                "(… {n} messages of the naive run not shown …)",
                left_out,
            )
            gap = {"role": "user", "content": shown.format(n=left_out)}
            seen = [*seen[:_KEPT], gap, *seen[-_KEPT:]]
        return [*seen, *([self.last] if self.last is not None else [])]

    def usage(self) -> Usage:
        chars = 0
        for message in self.history():
            with contextlib.suppress(KeyError, TypeError, ValueError):  # a naive loop's odd message: not counted
                chars += context_size(message)
        return Usage(self.turns, self.calls, chars, round((time.perf_counter() - self.started) * 1000, 3))


def _plain(messages: Any) -> list[dict[str, Any]]:
    try:
        return [dict(message) for message in messages]
    except (TypeError, ValueError):
        return []


async def _stoppable(work: Any, signal: AbortSignal | None) -> Any:
    """Await `work`, unless `signal` is aborted first: then raise its reason."""
    if signal is None:
        return await work
    if signal.aborted:
        raise _reason(signal)
    task = asyncio.ensure_future(work)
    stop = asyncio.ensure_future(signal.wait())
    try:
        await asyncio.wait({task, stop}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stop.cancel()
    if task.done():
        return task.result()
    task.cancel()
    raise _reason(signal)


def _reason(signal: AbortSignal) -> BaseException:
    reason = signal.reason
    return reason if isinstance(reason, BaseException) else RuntimeError(str(reason))


def _watched_model(model: Any, watch: _Watch, signal: AbortSignal | None) -> Callable[..., Any]:
    callee = Callee(model, 2, "model")

    async def watched(messages: Any, *_: Any) -> Any:
        # A model that answers at once never lets the event loop run: without this await, a naive loop that never
        # ends would never let the bound (or Stop) through, and would spin its thread for ever.
        await asyncio.sleep(0)
        watch.turns += 1
        watch.seen, watch.last = _plain(messages), None
        decision = await _stoppable(callee(messages, signal), signal)
        if isinstance(decision, Mapping):
            if decision.get("kind") == "tools":
                watch.last = {"role": "assistant", "calls": copy.deepcopy(list(decision.get("calls") or []))}
            else:
                watch.last = {"role": "assistant", "content": str(decision.get("text", ""))}
        return decision

    return watched


class _Deferred:
    """An awaitable that starts its work only when awaited: a naive loop that makes a tool's coroutine and then
    crashes before awaiting it leaves no "coroutine was never awaited" warning in the notebook."""

    def __init__(self, start: Callable[[], Any]) -> None:
        self.start = start

    def __await__(self) -> Any:
        return self.start().__await__()


def _watched_tools(tools: Mapping[str, Tool], watch: _Watch, signal: AbortSignal | None) -> dict[str, Tool]:
    def watched(tool: Tool) -> Tool:
        callee = Callee(tool.run, 3, "tool")

        async def running(args: Any, rest: tuple[Any, ...]) -> Any:
            watch.calls += 1
            return await _stoppable(callee(args, signal, *rest[1:]), signal)

        def run(args: Any, *rest: Any) -> _Deferred:
            return _Deferred(lambda: running(args, rest))

        return Tool(validate=tool.validate, run=run)

    return {name: watched(tool) for name, tool in tools.items()}


def _options(loop: NaiveLoop, limits: Mapping[str, Any]) -> dict[str, Any]:
    """The limits the naive loop's signature takes (all of them with **kwargs): it is free to ignore them."""
    try:
        parameters = inspect.signature(loop).parameters.values()
    except (TypeError, ValueError):
        return {}
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
        return dict(limits)
    names = {p.name for p in parameters}
    return {name: value for name, value in limits.items() if name in names}


async def run_naive(
    loop: NaiveLoop,
    question: str,
    model: Any,
    tools: Mapping[str, Tool],
    limits: Mapping[str, Any],
    signal: AbortSignal | None = None,
) -> NaiveRun | NaiveCrash:
    """Run `loop(question, model, tools, ...)` watched; its answer, or its error, with what it spent.

    Never raises what the naive loop raised: it comes back as a NaiveCrash, so a
    playground shows every outcome alike.
    """
    watch = _Watch()
    signal = signal if signal is not None else AbortController().signal  # tools that read it get one that never aborts
    bound = Limits(**{name: limits[name] for name in ("max_turns", "max_calls", "timeout_ms", "max_chars")})
    try:
        model, tools = _watched_model(model, watch, signal), _watched_tools(tools, watch, signal)
        work = loop(question, model, tools, **_options(loop, limits))
        answer = await asyncio.wait_for(work, NAIVE_BOUND_S)
    except TimeoutError:
        message = GAVE_UP.format(seconds=f"{NAIVE_BOUND_S:g}")  # str() of the crash says it in the learner's language
        return NaiveCrash(message, watch.history(), watch.usage(), bound, gave_up_after_s=NAIVE_BOUND_S)
    except Exception as error:
        return NaiveCrash(f"{type(error).__name__}: {error}", watch.history(), watch.usage(), bound)
    text = getattr(answer, "text", answer)
    return NaiveRun(text if isinstance(text, str) else repr(text), watch.history(), watch.usage(), bound)


__all__ = ["NAIVE_BOUND_S", "Answer", "NaiveCrash", "NaiveRun", "run_naive"]
