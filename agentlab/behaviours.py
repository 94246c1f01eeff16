"""The reference behaviours of the loop, defined once.

Each behaviour is an async function that takes an implementation of
`agent_loop` (the package's own, or a student's) and raises
`BehaviourFailed` if the implementation does not behave. pytest, the
notebooks and the student checker all run these same definitions.

The first seven are the exercise's reference tests (seed 000), ported one for
one; like the originals they match errors by the phrase in their message
(`/unknown tool/`), so any implementation that raises a clear error passes.
The rest check the other rules of the contract.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import inspect
import json
import random
import re
import string
import textwrap
import time
import weakref
from collections import defaultdict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from agentlab import callees, errors, i18n
from agentlab.abort import AbortController
from agentlab.errors import ConfigError
from agentlab.jsonc import compact_json
from agentlab.tools import Tool, parse_lookup_args

AgentLoop = Callable[..., Awaitable[Any]]

# Every run a behaviour makes is bounded, so a broken implementation fails
# the behaviour instead of hanging it.
RUN_BOUND_S = 2.0


class BehaviourFailed(AssertionError):
    """What the behaviour expected, what happened instead, and a `clue` for hints."""

    def __init__(self, expected: str, happened: str, clue: str) -> None:
        super().__init__(f"expected {expected}; instead {happened}")
        self.expected, self.happened, self.clue = expected, happened, clue


@dataclass(frozen=True)
class Behaviour:
    """One behaviour: `key` names it, `step` is the workbook step it belongs to."""

    key: str
    title: str
    step: str
    reference: bool
    check: Callable[[AgentLoop], Awaitable[None]]

    async def __call__(self, agent_loop: AgentLoop) -> None:
        await self.check(agent_loop)


STEPS = ("basics", "shapes", "checks", "budgets", "deadline", "limits")
# Steps beyond the workbooks (each appends itself at the end of this file): asked for by name, never part of
# "every step", so that a loop written for the workbooks is not failed for an option it was never asked for.
EXTRA_STEPS: tuple[str, ...] = ()

# -- the names, ids and values of the scenarios --------------------------------------


class Names:
    """The call ids, tool name, values and texts the scenarios use.

    Without a seed they are the exercise's own ("c1", "lookup", "A"); a grading
    run passes a seed, so that every run uses different ones and an
    implementation that replays answers keyed on the scenarios' strings fails.
    """

    def __init__(self, seed: int | None = None) -> None:
        self.seed = seed
        if seed is None:
            self.prefix, self.tool, self.letters, self.done = "c", "lookup", "ABCDEFGHJK", "done"
            return
        rng = random.Random(seed)
        alphabet = "abcdefghjkmnpqrstuvwxyz23456789"
        self.prefix = rng.choice(("call_", "toolu_", "c", "fc-", "id")) + "".join(rng.choices(alphabet, k=5)) + "_"
        self.tool = rng.choice(("lookup", "find_book", "fetch_record", "search", "get_item", "catalog"))
        self.letters = "".join(rng.sample(string.ascii_uppercase, 10))
        self.done = rng.choice(("done", "finished", "all set", "here you go", "ok")) + f" {rng.randrange(100, 999)}"

    def id(self, n: int) -> str:
        """The n-th call id of a scenario."""
        return f"{self.prefix}{n}"

    def value(self, n: int) -> str:
        """The n-th lookup value ("A", "B", ... without a seed)."""
        return self.letters[(n - 1) % len(self.letters)] * (1 + abs(n - 1) // len(self.letters))

    def call(self, n: int, value: int | None = None, name: str | None = None) -> dict[str, Any]:
        """A lookup call: id n, looking up value n (or `value`)."""
        return {"id": self.id(n), "name": name or self.tool, "args": {"id": self.value(n if value is None else value)}}


_names = Names()


def vary(seed: int | None) -> Names:
    """Use the names of `seed` in every scenario from now on (None: the exercise's own); return them."""
    global _names
    _names = Names(seed)
    return _names


def names() -> Names:
    """The names the scenarios use now."""
    return _names


# -- small tools and models the behaviours share --------------------------------


class _Log:
    """What a scenario saw: the model's calls (messages and signal) and every tool run (value and signal)."""

    def __init__(self) -> None:
        self.seen: list[list[Any]] = []  # the messages of each model call, as the model got them
        self.signals: list[Any] = []  # the signal of each model call
        self.ran: list[Any] = []  # the value each tool run got
        self.tool_signals: list[Any] = []
        self.events: list[tuple[float, str]] = []  # when each model call and tool run started
        self.ended: float | None = None  # when the watched run returned or raised

    def mark(self, what: str) -> None:
        self.events.append((time.perf_counter(), what))

    async def watch(self, run: Awaitable[Any]) -> Any:
        """Await the run, noting when it ended."""
        try:
            return await run
        finally:
            self.ended = time.perf_counter()

    @property
    def turns(self) -> int:
        return len(self.seen)


def _lookup(ran: list[Any] | None = None, log: _Log | None = None, latency: float = 0.0) -> dict[str, Tool]:
    """The reference's lookup tool; every value `run` receives is appended to `ran` (and `log.ran`)."""

    async def run(value: Any, signal: Any = None) -> Any:
        for where in (ran, log.ran if log else None):
            if where is not None:
                where.append(value)
        if log is not None:
            log.tool_signals.append(signal)
            log.mark("tool run")
        if latency:
            await asyncio.sleep(latency)
        return parse_lookup_args(value)

    return {_names.tool: Tool(validate=parse_lookup_args, run=run)}


def _sync_lookup(log: _Log) -> dict[str, Tool]:
    """The lookup tool with a plain (not async) run."""

    def run(value: Any, signal: Any = None) -> Any:
        log.ran.append(value)
        log.tool_signals.append(signal)
        log.mark("tool run")
        return parse_lookup_args(value)

    return {_names.tool: Tool(validate=parse_lookup_args, run=run)}


def _tools_model(*batches: Any, log: _Log | None = None, final: str | None = None) -> Callable[..., Awaitable[Any]]:
    """An async model that proposes `batches` in turn, then answers `final` ("done").

    A batch is a list of calls, or a function of the messages that returns a decision.
    """
    turns = iter(batches)

    async def model(messages: Any, signal: Any = None) -> Any:
        if log is not None:
            log.seen.append(_plain(messages))
            log.signals.append(signal)
            log.mark("model call")
        batch = next(turns, None)
        if batch is None:
            return {"kind": "final", "text": _names.done if final is None else final}
        if callable(batch):
            return await batch(messages) if inspect.iscoroutinefunction(batch) else batch(messages)
        return {"kind": "tools", "calls": batch}

    return model


def _plain(messages: Any) -> list[Any]:
    """A deep copy of what the model was given, as plain lists and dicts (whatever sequence the loop passed)."""
    try:
        return copy.deepcopy([dict(m) if isinstance(m, dict) else m for m in messages])
    except Exception:  # something that cannot be copied: the behaviour compares what it can
        return [repr(messages)]


def _tool_message(call_id: str, content: str) -> dict[str, Any]:
    return {"role": "tool", "call_id": call_id, "content": content}


def _describe(error: BaseException) -> str:
    return f"it raised {type(error).__name__}: {error}" if str(error) else f"it raised {type(error).__name__}"


# Tasks a run leaves behind are looked for only on the event loops the checker made for a behaviour:
# a notebook's own loop runs the kernel's tasks too.
_WATCHED: weakref.WeakSet[asyncio.AbstractEventLoop] = weakref.WeakSet()
LEAK_GRACE_S = 0.2


def watch_tasks(loop: asyncio.AbstractEventLoop) -> None:
    """Make every run on `loop` fail if it leaves a task running after it returned or raised."""
    _WATCHED.add(loop)


async def _bounded(run: Awaitable[Any], bound_s: float = RUN_BOUND_S) -> Any:
    loop = asyncio.get_running_loop()
    before = asyncio.all_tasks() if loop in _WATCHED else set()
    try:
        outcome = await asyncio.wait_for(run, bound_s)
    except TimeoutError:  # a hang is the cause; whatever it left running follows from it
        raise BehaviourFailed(
            f"the run to end within {bound_s:g} s", "it was still running, so the check gave up on it", "hung"
        ) from None
    except BaseException:
        if loop in _WATCHED:
            await _no_task_left(before)
        raise
    if loop in _WATCHED:
        await _no_task_left(before)
    return outcome


async def _no_task_left(before: set[asyncio.Task[Any]]) -> None:
    """Fail if a task the run started is still running a moment after the run ended (it is then cancelled)."""
    started = [t for t in asyncio.all_tasks() - before if t is not asyncio.current_task() and not t.done()]
    if started:
        await asyncio.wait(started, timeout=LEAK_GRACE_S)
    held = callees.running_inline()  # with no threads, a plain callee holds its task as it would hold a thread
    leaked = [t for t in started if not t.done() and t not in held]
    swallowed = [t for t in leaked if t.cancelling() > 0]  # asked to stop, and still running: it caught the cancel
    for task in leaked:
        task.cancel()
    if swallowed:
        raise BehaviourFailed(
            "a task the loop cancelled (asyncio.CancelledError) to stop",
            f"{len(swallowed)} cancelled task(s) of the run went on running: the cancellation was caught and not "
            "raised again",
            "swallowed_cancel",
        )
    if leaked:
        names_ = ", ".join(sorted({getattr(t.get_coro(), "__qualname__", "?") for t in leaked}))
        raise BehaviourFailed(
            "no task of the run to be still running once agent_loop has returned or raised",
            f"{len(leaked)} task{'s' if len(leaked) > 1 else ''} of the run ({names_}) "
            f"{'were' if len(leaked) > 1 else 'was'} still running",
            "leaked_tasks",
        )


async def _returns(run: Awaitable[Any], what: str, clue: str = "raised") -> Any:
    """Await a run that should succeed; return its result."""
    try:
        return await _bounded(run)
    except BehaviourFailed:
        raise
    except Exception as error:
        raise BehaviourFailed(what, _describe(error), clue) from error


async def _rejects(run: Awaitable[Any], phrase: str, clue: str, ran: list[Any] | None = None) -> BaseException:
    """Await a run that should fail with an error whose message matches `phrase`.

    `ran` collects what the run's tools received; if the run fails this check
    after a tool ran, the clue is `ran:...`, the mistake that most likely explains it.
    """
    try:
        result = await _bounded(run)
    except BehaviourFailed:
        raise
    except Exception as error:
        if not re.search(phrase, str(error)):
            happened, kind = _describe(error) + _ran_note(ran), _kind("wrong_error", ran)
            raise BehaviourFailed(f"an error matching /{phrase}/", happened, kind + clue) from error
        wanted = _CLASSES.get(phrase)
        if wanted is not None and isinstance(error, tuple(_CLASSES.values())) and not isinstance(error, wanted):
            raise BehaviourFailed(
                f"agentlab's {wanted.__name__} for this limit (or an error class of your own)",
                f"{_describe(error)}: agentlab's class for another rule",
                "wrong_class:" + clue,
            ) from error
        return error
    text = getattr(result, "text", result)
    happened = f"the run returned {text!r}" + _ran_note(ran)
    raise BehaviourFailed(f"an error matching /{phrase}/", happened, _kind("no_error", ran) + clue)


# The error classes of agentlab, by the phrase a behaviour expects. A student may raise their own classes;
# one of agentlab's, though, must be the one for the rule (not TurnBudgetError for the tool budget).
_CLASSES: dict[str, type[Exception]] = {
    "unknown tool": errors.UnknownToolError,
    "args": errors.ToolArgsError,
    "tool budget": errors.ToolBudgetError,
    "turn budget": errors.TurnBudgetError,
    "duplicate call id": errors.DuplicateCallIdError,
    "deadline": errors.DeadlineError,
    "context budget": errors.ContextBudgetError,
    "output budget": errors.OutputBudgetError,
    "malformed": errors.ModelOutputError,
    "repeated tool call without progress": errors.RepeatedCallError,
}


def _kind(kind: str, ran: list[Any] | None) -> str:
    return "ran:" if ran else f"{kind}:"


def _ran_note(ran: list[Any] | None) -> str:
    return f", and run was called with {ran[0]!r}" if ran else ""


def _nothing_ran(ran: list[Any], clue: str, scenario: str = "") -> None:
    if ran:
        raise BehaviourFailed(
            f"that no tool of the rejected batch ran{scenario}", f"run was called with {ran[0]!r}", f"ran:{clue}"
        )


def _model_calls(log: _Log, expected: int, scenario: str, clue: str) -> None:
    """Confirm a check by what did not happen: the model was called exactly `expected` times."""
    if log.turns != expected:
        raise BehaviourFailed(
            f"{scenario}: the model to be called {_times(expected)}",
            f"it was called {_times(log.turns)}",
            clue,
        )


def _times(n: int) -> str:
    return {0: "not at all", 1: "once", 2: "twice"}.get(n, f"{n} times")


async def _quiet_after(log: _Log, scenario: str, clue: str, wait_s: float = 0.2) -> None:
    """Confirm that nothing of a stopped run goes on: no model call or tool run started after it raised.

    The run must have been awaited through `log.watch`, which notes when it ended.
    """
    await asyncio.sleep(wait_s)
    later = [what for when, what in log.events if log.ended is not None and when > log.ended]
    if later:
        counts = ", ".join(f"{later.count(what)} {what}{'s' if later.count(what) > 1 else ''}" for what in set(later))
        raise BehaviourFailed(
            f"{scenario}: nothing of the run to start once agent_loop had raised",
            f"{counts} started after it raised",
            clue,
        )


async def _control(agent_loop: AgentLoop, scenario: str, **options: Any) -> None:
    """The same loop on a run it must let through: a valid call runs, its result reaches the model, the answer
    comes back. A row about refusing is earned only by a loop that also does the work."""
    n, log = _names, _Log()
    model = _tools_model([n.call(9)], log=log)
    result = await _returns(agent_loop("q", model, _lookup(log=log), **options), f"{scenario} to succeed", "control")
    expected = _tool_message(n.id(9), compact_json({"id": n.value(9)}))
    got = log.seen[1][-1] if len(log.seen) > 1 and log.seen[1] else "no second model call"
    if len(log.ran) != 1 or not _same_result(got, expected) or getattr(result, "text", None) != n.done:
        raise BehaviourFailed(
            f"{scenario}: the valid call to run once, its result {expected} to reach the model, and the answer "
            f"{n.done!r} to come back",
            f"{len(log.ran)} tool run(s); the model's last message was {got}; result.text was "
            f"{getattr(result, 'text', None)!r}",
            "control",
        )


def _same_result(got: Any, expected: dict[str, Any]) -> bool:
    """The tool message answers the same call with the same JSON value (its spelling is another row's business)."""
    try:
        same_json = json.loads(got["content"]) == json.loads(expected["content"])
        return bool(same_json and got["role"] == "tool" and got["call_id"] == expected["call_id"])
    except Exception:
        return False


def _takes(function: Any, option: str) -> bool:
    """True if `function` (or what it wraps) accepts the keyword `option`, or any keyword."""
    try:
        parameters = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):
        return True
    return any(p.name == option or p.kind is p.VAR_KEYWORD for p in parameters)


def _hang() -> Awaitable[Any]:
    return asyncio.get_running_loop().create_future()  # never resolves


# -- the seven reference behaviours (seed 000) ------------------------------------


async def result_reaches_model(agent_loop: AgentLoop) -> None:
    """A tool result with the right call id reaches the model."""
    n = _names
    log = _Log()
    model = _tools_model([n.call(1)], log=log)
    result = await _returns(agent_loop("question", model, _lookup()), f"the run to return {n.done!r}")
    expected = _tool_message(n.id(1), compact_json({"id": n.value(1)}))
    if log.turns < 2:
        raise BehaviourFailed("the model to be asked again after the tool ran", "it was asked once", "no_second_turn")
    if log.seen[1][-1:] != [expected]:
        got = log.seen[1][-1] if log.seen[1] else "no message"
        raise BehaviourFailed(f"the model's last message to be {expected}", f"it was {got}", "wrong_tool_message")
    if getattr(result, "text", None) != n.done:
        raise BehaviourFailed(f"result.text == {n.done!r}", f"result was {result!r}", "wrong_result")
    # three turns: a plain (not async) tool, then a slow one; each result reaches the next model call
    for tools, clue in ((_sync_lookup(log := _Log()), "sync_tool"), (_lookup(log=(log := _Log()), latency=0.03), "")):
        model = _tools_model([n.call(2)], [n.call(3)], log=log)
        scenario = "a run of three turns" + (" with a plain `def` tool" if clue else " with a slow async tool")
        await _returns(agent_loop("question", model, tools), f"{scenario} to succeed", clue or "raised")
        for turn, number in ((1, 2), (2, 3)):
            expected = _tool_message(n.id(number), compact_json({"id": n.value(number)}))
            got = log.seen[turn][-1] if len(log.seen) > turn and log.seen[turn] else "no call"
            if got != expected:
                raise BehaviourFailed(
                    f"{scenario}: the model's last message in turn {turn + 1} to be {expected}",
                    f"it was {got}",
                    clue or "wrong_tool_message",
                )


async def unknown_tool(agent_loop: AgentLoop) -> None:
    """A bad name, including an inherited one, doesn't run a tool."""
    for name in ("deleteEverything", "toString", "__class__", "keys"):
        await _rejects(agent_loop("q", _tools_model([{"id": "1", "name": name, "args": {}}]), {}), "unknown tool", name)
    # names that differ from a real tool's only in case, spaces or separators are not that tool
    real = _names.tool
    for name in (real.upper(), f" {real}", f"{real}\n", real.replace("_", "-") if "_" in real else real.title()):
        ran: list[Any] = []
        model = _tools_model([{"id": _names.id(1), "name": name, "args": {"id": _names.value(1)}}])
        await _rejects(agent_loop("q", model, _lookup(ran)), "unknown tool", "near_name", ran)
        _nothing_ran(ran, "near_name", f" (the model asked for {name!r}; the tool is {real!r})")
    await _control(agent_loop, "the same run with the exact tool name")


async def invalid_args_never_run(agent_loop: AgentLoop) -> None:
    """Args that fail validation never reach run."""
    ran: list[Any] = []
    model = _tools_model([{"id": "1", "name": _names.tool, "args": {"id": 7}}])
    await _rejects(agent_loop("q", model, _lookup(ran)), "args", "invalid_args", ran)
    _nothing_ran(ran, "invalid_args")

    # a validate may fail in any way: a KeyError, a TypeError, its own exception class
    class Unacceptable(Exception):
        pass

    def strict(args: Any) -> Any:
        kind = args["kind"]  # KeyError when missing
        if not isinstance(kind, str):
            raise TypeError(f"kind must be a string, not {type(kind).__name__}")
        raise Unacceptable(f"no such kind: {kind}")

    for args in ({}, {"kind": 3}, {"kind": "nonsense"}):
        ran = []

        async def run(value: Any, signal: Any = None, *, ran: list[Any] = ran) -> Any:
            ran.append(value)
            return "ran"

        model = _tools_model([{"id": _names.id(1), "name": "strict", "args": args}])
        await _rejects(agent_loop("q", model, {"strict": Tool(validate=strict, run=run)}), "args", "other_error", ran)
        _nothing_ran(ran, "other_error")
    await _control(agent_loop, "a run with valid args")


async def tool_and_turn_budgets(agent_loop: AgentLoop) -> None:
    """The tool-call limit and the turn limit."""
    ids = iter(range(1, 1_000_000))
    log = _Log()

    async def model(messages: Any, signal: Any = None) -> dict[str, Any]:
        log.seen.append([])
        return {"kind": "tools", "calls": [_names.call(next(ids), value=0)]}

    ran: list[Any] = []
    await _rejects(agent_loop("q", model, _lookup(ran), max_calls=0), "tool budget", "max_calls", ran)
    _nothing_ran(ran, "max_calls")
    log = _Log()
    await _rejects(agent_loop("q", model, _lookup(), max_turns=1), "turn budget", "max_turns")
    _model_calls(log, 1, "with max_turns=1", "max_turns")
    # the tool budget is for the whole run, not per turn: 2 calls, then a batch of 2 with max_calls=3
    ran = []
    n = _names
    model = _tools_model([n.call(1), n.call(2)], [n.call(3), n.call(4)])
    await _rejects(agent_loop("q", model, _lookup(ran), max_calls=3), "tool budget", "calls_per_turn")
    if len(ran) != 2:
        raise BehaviourFailed(
            "with max_calls=3, the 2 calls of turn 1 to run and the batch of 2 of turn 2 to be refused whole",
            f"{len(ran)} tool runs happened",
            "calls_per_turn" if len(ran) > 3 else "ran:calls_per_turn",
        )


async def duplicate_call_id(agent_loop: AgentLoop) -> None:
    """A repeated call id is refused."""

    async def model(messages: Any, signal: Any = None) -> dict[str, Any]:
        return {"kind": "tools", "calls": [{"id": "same", "name": _names.tool, "args": {"id": "A"}}]}

    await _rejects(agent_loop("q", model, _lookup()), "duplicate call id", "across_turns")
    # an id used two turns earlier is as much a duplicate as one used in the turn before
    n, ran = _names, []
    model = _tools_model([n.call(1)], [n.call(2)], [n.call(1, value=3)])
    await _rejects(agent_loop("q", model, _lookup(ran)), "duplicate call id", "turns_later")
    if len(ran) != 2:
        raise BehaviourFailed(
            "the calls of turns 1 and 2 to run and the reused id of turn 3 to run nothing",
            f"{len(ran)} tool runs happened",
            "turns_later",
        )
    # ids that only look alike are different ids: compared exactly, they are all new
    base = n.id(7)
    variants = [base, base.upper() if base.upper() != base else base.lower(), f"{base} ", f"{base}0"]
    model = _tools_model(*[[{"id": v, "name": n.tool, "args": {"id": n.value(i)}}] for i, v in enumerate(variants)])
    await _returns(
        agent_loop("q", model, _lookup()),
        f"a run with the distinct ids {variants} to succeed (ids are compared exactly)",
        "near_ids",
    )


async def deadline_ignoring_signal(agent_loop: AgentLoop) -> None:
    """The deadline works even with a model that ignores the signal."""

    async def model(messages: Any, signal: Any = None) -> dict[str, Any]:
        return await _hang()

    await _rejects(agent_loop("q", model, {}, timeout_ms=15), "deadline", "async_model")
    # at a larger scale: two quick turns, then a model that never answers; the deadline is for the whole run
    n, log = _names, _Log()

    async def stalls(messages: Any) -> Any:
        return await _hang()

    model = _tools_model([n.call(1)], [n.call(2)], stalls, log=log)
    started = time.perf_counter()
    await _rejects(log.watch(agent_loop("q", model, _lookup(log=log), timeout_ms=250)), "deadline", "whole_run")
    elapsed = time.perf_counter() - started
    if elapsed > 0.25 + 0.8:
        raise BehaviourFailed(
            "the deadline error within 0.8 s of timeout_ms=250", f"it took {elapsed:.2f} s", "whole_run"
        )
    await _quiet_after(log, "after the deadline", "ran_after_deadline")


async def context_output_cancellation(agent_loop: AgentLoop) -> None:
    """Context, output and cancellation have hard limits."""

    def answer(text: str, log: _Log) -> Callable[..., Awaitable[dict[str, Any]]]:
        async def model(messages: Any, signal: Any = None) -> dict[str, Any]:
            log.seen.append([])
            return {"kind": "final", "text": text}

        return model

    log = _Log()
    await _rejects(agent_loop("too long", answer("a", log), {}, max_chars=2), "context budget", "context")
    _model_calls(log, 0, "with an 8-character input and max_chars=2", "context_model_called")
    await _rejects(agent_loop("q", answer("too long", _Log()), {}, max_chars=2), "output budget", "output")

    class Stop(Exception):
        pass

    for reason in (RuntimeError("stop"), Stop(f"stopped by the user ({_names.done})")):
        controller, log = AbortController(), _Log()
        controller.abort(reason)
        error = await _rejects(
            agent_loop("q", answer("ok", log), {}, signal=controller.signal), re.escape(str(reason)), "pre_aborted"
        )
        if error is not reason:
            raise BehaviourFailed(
                "the very exception given to abort() to be raised (error is signal.reason)",
                f"{_describe(error)}, a different object with the same message",
                "abort_identity",
            )
        _model_calls(log, 0, "with a signal aborted before the run", "pre_aborted_model_called")
    await _control(agent_loop, "a run that fits max_chars=200", max_chars=200, signal=AbortController().signal)


# -- the other rules of the contract ------------------------------------------------


async def history_shape(agent_loop: AgentLoop) -> None:
    """The history is the user message, each calls message with its results, then the answer."""
    n = _names
    model = _tools_model([n.call(1)])
    result = await _returns(agent_loop("question", model, _lookup()), "the run to succeed")
    expected = [
        {"role": "user", "content": "question"},
        {"role": "assistant", "calls": [n.call(1)]},
        _tool_message(n.id(1), compact_json({"id": n.value(1)})),
        {"role": "assistant", "content": n.done},
    ]
    history = list(getattr(result, "history", None) or [])
    if history != expected:
        raise BehaviourFailed(f"result.history == {expected}", f"it was {history}", "history")
    # three turns, the first a batch of two
    model = _tools_model([n.call(2), n.call(3)], [n.call(4)])
    result = await _returns(agent_loop("question", model, _lookup()), "a run of three turns to succeed")
    expected = [
        {"role": "user", "content": "question"},
        {"role": "assistant", "calls": [n.call(2), n.call(3)]},
        _tool_message(n.id(2), compact_json({"id": n.value(2)})),
        _tool_message(n.id(3), compact_json({"id": n.value(3)})),
        {"role": "assistant", "calls": [n.call(4)]},
        _tool_message(n.id(4), compact_json({"id": n.value(4)})),
        {"role": "assistant", "content": n.done},
    ]
    history = list(getattr(result, "history", None) or [])
    if history != expected:
        raise BehaviourFailed(
            f"after a batch of two calls and then one more call, result.history == {expected}",
            f"it was {history}",
            "history",
        )


async def results_in_call_order(agent_loop: AgentLoop) -> None:
    """Each result follows its own call, in call order, within a batch."""
    n = _names
    latency = {n.value(1): 0.04, n.value(2): 0.0, n.value(3): 0.02, n.value(4): 0.0, n.value(5): 0.03}

    async def run(value: Any, signal: Any = None) -> Any:
        await asyncio.sleep(latency[value["id"]])  # the first call of the batch is the slowest
        return value

    tools = {n.tool: Tool(validate=parse_lookup_args, run=run)}
    batches = [n.call(1), n.call(2), n.call(3)], [n.call(4), n.call(5)]
    result = await _returns(agent_loop("q", _tools_model(*batches), tools), "the run to succeed")
    tool_messages = [m for m in getattr(result, "history", []) if isinstance(m, dict) and m.get("role") == "tool"]
    pairs = [(m.get("call_id"), m.get("content")) for m in tool_messages]
    expected = [(n.id(i), compact_json({"id": n.value(i)})) for i in (1, 2, 3, 4, 5)]
    if pairs != expected:
        raise BehaviourFailed(
            f"tool results (call_id, content) {expected}, for a batch of 3 calls of which the first is the slowest, "
            "then a batch of 2",
            f"they were {pairs}",
            "call_order",
        )


async def compact_json_results(agent_loop: AgentLoop) -> None:
    """A tool's result goes back as compact JSON, like JavaScript's JSON.stringify."""
    results = (
        ({"list": [1, 2.5, None, True], "city": "Kraków", "temperature": 18.0}, False),
        ({"nested": {"quote": 'say "hi"\n', "empty": [], "zero": -0.0, "big": 1e21}, "ok": False}, True),
    )
    for value, plain in results:
        seen: list[Any] = []

        async def run_async(args: Any, signal: Any = None, *, value: Any = value) -> Any:
            return value

        def run_plain(args: Any, signal: Any = None, *, value: Any = value) -> Any:
            return value

        async def model(messages: Any, signal: Any = None, *, seen: list[Any] = seen) -> dict[str, Any]:
            if not seen:
                seen.append(None)
                return {"kind": "tools", "calls": [{"id": _names.id(1), "name": "weather", "args": {}}]}
            seen.append(messages[-1].get("content"))
            return {"kind": "final", "text": "done"}

        tools = {"weather": Tool(validate=lambda args: None, run=run_plain if plain else run_async)}
        await _returns(agent_loop("q", model, tools), "the run to return 'done'")
        expected = compact_json(value)
        if seen[1:] != [expected]:
            got = seen[1] if len(seen) > 1 else "nothing"
            raise BehaviourFailed(f"the result content {expected}", f"it was {got}", "json_format")


async def batch_checked_whole(agent_loop: AgentLoop) -> None:
    """A batch with one bad call runs none of its calls, not even the good ones before it."""
    n = _names
    good = n.call(1)
    for bad, phrase, clue in (
        ({"id": n.id(2), "name": "deleteEverything", "args": {}}, "unknown tool", "half_batch_name"),
        ({"id": n.id(2), "name": n.tool, "args": {"id": 7}}, "args", "half_batch_args"),
        ({"id": n.id(1), "name": n.tool, "args": {"id": n.value(2)}}, "duplicate call id", "half_batch_id"),
    ):
        ran: list[Any] = []
        await _rejects(agent_loop("q", _tools_model([good, bad]), _lookup(ran)), phrase, clue, ran)
        _nothing_ran(ran, clue)
    # in a later turn too, and with the bad call last of three
    log = _Log()
    model = _tools_model([n.call(1)], [n.call(2), n.call(3), {"id": n.id(4), "name": "nope", "args": {}}])
    await _rejects(agent_loop("q", model, _sync_lookup(log)), "unknown tool", "half_batch_name")
    if len(log.ran) != 1:
        raise BehaviourFailed(
            "the call of turn 1 to run, and nothing of turn 2's batch, whose third call names no tool",
            f"{len(log.ran)} tool runs happened",
            "ran:half_batch_name",
        )


async def budget_before_running(agent_loop: AgentLoop) -> None:
    """A batch larger than the tool calls left is refused before any of it runs."""
    ran: list[Any] = []
    n = _names
    batch = [n.call(i, value=0) for i in (1, 2, 3)]
    await _rejects(agent_loop("q", _tools_model(batch), _lookup(ran), max_calls=2), "tool budget", "batch_budget", ran)
    _nothing_ran(ran, "batch_budget")
    # later in a run: 3 of max_calls=4 spent, then a batch of 2
    ran = []
    model = _tools_model([n.call(1), n.call(2)], [n.call(3)], [n.call(4), n.call(5)])
    await _rejects(agent_loop("q", model, _lookup(ran), max_calls=4), "tool budget", "batch_budget")
    if len(ran) != 3:
        raise BehaviourFailed(
            "with max_calls=4, the 3 calls of turns 1 and 2 to run and turn 3's batch of 2 to be refused whole",
            f"{len(ran)} tool runs happened",
            "ran:batch_budget",
        )


async def limits_reached_exactly(agent_loop: AgentLoop) -> None:
    """Reaching a limit exactly is allowed: only the step past it fails."""
    n = _names
    await _returns(
        agent_loop("q", _tools_model([n.call(1)]), _lookup(), max_turns=2, max_calls=1),
        "a run of exactly max_turns=2 turns and max_calls=1 call to succeed",
        "exact_turns_calls",
    )
    model = _tools_model([n.call(1), n.call(2)], [n.call(3)], [n.call(4), n.call(5)])
    await _returns(
        agent_loop("q", model, _lookup(), max_turns=4, max_calls=5),
        "a run of exactly max_turns=4 turns and max_calls=5 calls (batches of 2, 1 and 2) to succeed",
        "exact_turns_calls",
    )
    size = 4
    await _returns(
        agent_loop("abcdefghijklmnopqrstuvwxyz"[:size], _tools_model(final="k"), {}, max_chars=size),
        f"an input of exactly max_chars={size} characters to fit (the answer is 1 character)",
        "exact_context",
    )
    for text in ("done", "x" * 40):
        await _returns(
            agent_loop("q", _tools_model(final=text), {}, max_chars=len(text)),
            f"a {len(text)}-character answer to fit max_chars={len(text)}",
            "exact_output",
        )
    # ... and never one step more: exactly max_turns model calls, exactly max_calls tool runs
    turns: list[int] = []

    async def keeps_calling(messages: Any, signal: Any = None) -> dict[str, Any]:
        turns.append(len(turns) + 1)
        return {"kind": "tools", "calls": [n.call(len(turns), value=0)]}

    for max_turns in (2, 3):
        turns.clear()
        await _rejects(agent_loop("q", keeps_calling, _lookup(), max_turns=max_turns), "turn budget", "past_turns")
        if len(turns) != max_turns:
            raise BehaviourFailed(
                f"the model to be called exactly max_turns={max_turns} times, then the turn budget",
                f"it was called {len(turns)} times",
                "past_turns",
            )
    for max_calls in (2, 3):
        turns.clear()
        ran: list[Any] = []
        await _rejects(agent_loop("q", keeps_calling, _lookup(ran), max_calls=max_calls), "tool budget", "past_calls")
        if len(ran) != max_calls:
            raise BehaviourFailed(
                f"exactly max_calls={max_calls} tool runs, then the tool budget",
                f"{len(ran)} tool runs happened",
                "past_calls",
            )


async def context_counts_calls(agent_loop: AgentLoop) -> None:
    """The context is every message's content plus each calls message as compact JSON."""
    n = _names
    call = [n.call(1)]
    result = compact_json({"id": n.value(1)})
    size = len("q") + len(compact_json(call)) + len(result)
    await _returns(
        agent_loop("q", _tools_model(call), _lookup(), max_chars=size),
        f"the run to fit max_chars={size} (1 + {size - 1 - len(result)} for the calls as compact JSON "
        f"+ {len(result)} for the result)",
        "overcount",
    )
    # Which messages are counted? In each scenario below, the history goes over max_chars even if one kind of
    # message is left out, but not if that kind is left out too: the calls (long args, a short result), the tool
    # results (short args, a long result), the earlier turns (four turns; max_chars fits what the last one adds).

    async def run(value: Any, signal: Any = None) -> Any:
        return value["text"] * value["times"]

    def text_args(args: Any) -> None:
        if not isinstance(args.get("text"), str) or not isinstance(args.get("times"), int):
            raise ValueError("expected text and times")

    tools = {"repeat": Tool(validate=text_args, run=run)}

    def batch(i: int, text: str, times: int) -> list[dict[str, Any]]:
        return [{"id": n.id(i), "name": "repeat", "args": {"text": text, "times": times}}]

    scenarios = (  # label, the batches, which part the limit leaves out, what the student reads
        ("calls", [batch(1, "x" * 120, 0)], "results", "the calls message (its args are 120 characters long)"),
        ("results", [batch(1, "y", 150)], "calls", "the tool result (150 characters)"),
        ("turns", [batch(i, "z", 40) for i in range(1, 5)], "calls", "the messages of the earlier turns"),
    )
    missed = []
    for label, batches, left_out, _ in scenarios:
        sizes = {"input": 1, "calls": 0, "results": 0}
        for calls in batches:
            sizes["calls"] += len(compact_json(calls))
            sizes["results"] += len(compact_json(calls[0]["args"]["text"] * calls[0]["args"]["times"]))
        limit = sum(sizes.values()) - sizes[left_out] - 1
        if label == "turns":
            limit = sizes["input"] + sizes["results"] - 1  # over by one without any calls; a turn adds 42
        try:
            await _rejects(agent_loop("q", _tools_model(*batches), tools, max_chars=limit), "context budget", "count")
        except BehaviourFailed as failure:
            if not failure.clue.startswith("no_error"):
                raise
            missed.append(label)
    if missed:
        what = {label: text for label, _, _, text in scenarios}
        clue = "turns" if "turns" in missed and len(missed) > 1 else "+".join(missed)
        raise BehaviourFailed(
            "the context to count every message: the input, each calls message as compact JSON, each tool result, "
            "in every turn",
            "a history over max_chars was accepted although it was made long by "
            + " / ".join(what[label] for label in missed),
            f"undercount:{clue}",
        )
    await _rejects(agent_loop("q", _tools_model(call), _lookup(), max_chars=size - 1), "context budget", "count")


async def inherited_names_refused(agent_loop: AgentLoop) -> None:
    """Only exact keys of `tools` are tools: a defaultdict's default is not."""
    ran: list[Any] = []

    def conjured() -> Tool:
        async def run(value: Any, signal: Any = None) -> Any:
            ran.append(value)
            return "conjured"

        return Tool(validate=lambda args: None, run=run)

    class Conjuring(dict):  # type: ignore[type-arg]
        def __missing__(self, key: str) -> Tool:
            return conjured()

    for tools in (defaultdict(conjured), Conjuring()):
        ran.clear()
        model = _tools_model([{"id": "1", "name": "anything", "args": {}}])
        await _rejects(agent_loop("q", model, tools), "unknown tool", "defaultdict", ran)
        _nothing_ran(ran, "defaultdict")
    await _control(agent_loop, "a run with a plain dict of tools")


@dataclass(frozen=True)
class _Parsed:
    """What a validate that parses its args returns: not the args themselves."""

    id: str
    upper: bool


async def args_copied_at_boundary(agent_loop: AgentLoop) -> None:
    """What was validated is what runs and what the history records, whatever the model does later."""
    n = _names
    proposed = {"id": n.value(1)}
    ran: list[Any] = []

    def validate(args: Any) -> None:
        parse_lookup_args(args)
        proposed["id"] = "CHANGED"  # the model changes its dict after the check

    async def run(value: Any, signal: Any = None) -> Any:
        ran.append(copy.deepcopy(value))
        return {"ok": True}

    model = _tools_model([{"id": n.id(1), "name": n.tool, "args": proposed}])
    result = await _returns(agent_loop("q", model, {n.tool: Tool(validate=validate, run=run)}), "the run to succeed")
    if ran != [{"id": n.value(1)}]:
        raise BehaviourFailed(
            f"run to get the args as validated, {{'id': {n.value(1)!r}}}", f"it got {ran}", "args_not_copied"
        )
    recorded = [m["calls"][0]["args"] for m in getattr(result, "history", []) if "calls" in m]
    if recorded != [{"id": n.value(1)}]:
        raise BehaviourFailed(
            f"the history to record {{'id': {n.value(1)!r}}}", f"it recorded {recorded}", "history_not_copied"
        )

    # deep: the model changes a list inside its args while the (slow) tool runs
    nested = {"id": n.value(2), "tags": ["new"], "filter": {"year": [2020, 2021]}}
    original = copy.deepcopy(nested)
    ran.clear()

    def nested_ok(args: Any) -> None:
        if set(args) != {"id", "tags", "filter"}:
            raise ValueError("expected id, tags, filter")

    async def slow_run(value: Any, signal: Any = None) -> Any:
        nested["tags"].append("EVIL")  # the model changes what it proposed, after the check, as the tool runs
        nested["filter"]["year"][0] = 1900
        await asyncio.sleep(0.01)
        ran.append(copy.deepcopy(value))
        return {"ok": True}

    async def deep_model(messages: Any) -> Any:
        return {"kind": "tools", "calls": [{"id": n.id(2), "name": "deep", "args": nested}]}

    tools = {"deep": Tool(validate=nested_ok, run=slow_run)}
    result = await _returns(agent_loop("q", _tools_model(deep_model), tools), "the run with nested args to succeed")
    recorded = [m["calls"][0]["args"] for m in getattr(result, "history", []) if "calls" in m]
    if ran != [original] or recorded != [original]:
        happened = f"run got {ran} and the history recorded {recorded}"
        raise BehaviourFailed(
            f"run and the history to get {original}, although the model changed the nested list and dict "
            "of its args while the tool ran",
            happened,
            "shallow_copy",
        )

    # what validate returns is what runs; the history records the args as proposed
    got: list[Any] = []

    def parse(args: Any) -> _Parsed:
        parse_lookup_args(args)
        return _Parsed(args["id"].lower(), True)

    async def run_parsed(value: Any, signal: Any = None) -> Any:
        got.append(value)
        return {"ok": True}

    model = _tools_model([n.call(3)])
    result = await _returns(
        agent_loop("q", model, {n.tool: Tool(validate=parse, run=run_parsed)}),
        "the run with a parsing validate to succeed",
    )
    want = _Parsed(n.value(3).lower(), True)
    if got != [want]:
        raise BehaviourFailed(f"run to get what validate returned, {want}", f"it got {got}", "validated_value_ignored")
    recorded = [m["calls"][0]["args"] for m in getattr(result, "history", []) if "calls" in m]
    if recorded != [{"id": n.value(3)}]:
        raise BehaviourFailed(
            f"the history to record the args as proposed, {{'id': {n.value(3)!r}}}, not what validate returned",
            f"it recorded {recorded}",
            "history_not_copied",
        )


async def model_sees_snapshot(agent_loop: AgentLoop) -> None:
    """Whatever the model does to the messages it is given, the loop's history is unchanged."""

    async def vandal(messages: Any, signal: Any = None) -> dict[str, Any]:
        for attempt in (
            lambda: messages[0].update(content="HACKED"),
            lambda: messages.append({"role": "user", "content": "injected"}),
            lambda: messages.clear(),
        ):
            with contextlib.suppress(Exception):  # a read-only view may refuse; that is fine
                attempt()
        return {"kind": "final", "text": "done"}

    result = await _returns(agent_loop("question", vandal, {}), "the run to succeed")
    history = list(getattr(result, "history", []))
    expected = [{"role": "user", "content": "question"}, {"role": "assistant", "content": "done"}]
    if history != expected:
        raise BehaviourFailed(f"result.history == {expected}", f"it was {history}", "shared_history")

    # deeper: in turn 2 the model changes the args inside the calls message and a tool result it was given
    n, log = _names, _Log()

    def deep_vandal(messages: Any) -> Any:
        for attempt in (
            lambda: messages[1]["calls"][0]["args"].update(id="HACKED"),
            lambda: messages[1]["calls"].append({"id": "x", "name": "x", "args": {}}),
            lambda: messages[2].update(content="HACKED"),
        ):
            with contextlib.suppress(Exception):
                attempt()
        return {"kind": "tools", "calls": [n.call(2)]}

    model = _tools_model([n.call(1)], deep_vandal, log=log)
    result = await _returns(agent_loop("question", model, _lookup()), "a run of three turns to succeed")
    clean = [
        {"role": "user", "content": "question"},
        {"role": "assistant", "calls": [n.call(1)]},
        _tool_message(n.id(1), compact_json({"id": n.value(1)})),
        {"role": "assistant", "calls": [n.call(2)]},
        _tool_message(n.id(2), compact_json({"id": n.value(2)})),
    ]
    given = log.seen[1][:3] if len(log.seen) > 1 else clean[:3]  # turn 2's messages, before the model changed them
    seen = log.seen[2][:3] if len(log.seen) > 2 else None
    history = list(getattr(result, "history", []))[:3]
    if seen != given or history != given:
        where = f"in turn 3 the model was given {seen}" if seen != given else f"result.history began {history}"
        raise BehaviourFailed(
            f"the args and results inside the messages to stay as they were, {given}, although the model changed "
            "them in turn 2",
            where,
            "shallow_snapshot",
        )


async def deadline_blocking_model(agent_loop: AgentLoop) -> None:
    """The deadline holds against a plain model that blocks its thread."""
    for timeout_ms, sleep_s in ((15, 1.2), (150, 1.5)):

        def model(messages: Any, signal: Any = None, *, sleep_s: float = sleep_s) -> dict[str, Any]:
            time.sleep(sleep_s)
            return {"kind": "final", "text": "too late"}

        started = time.perf_counter()
        await _rejects(agent_loop("q", model, {}, timeout_ms=timeout_ms), "deadline", "blocking_model")
        elapsed = time.perf_counter() - started
        if elapsed > timeout_ms / 1000 + 0.6:
            raise BehaviourFailed(
                f"the deadline error within 0.6 s of timeout_ms={timeout_ms}, from a model that blocks for {sleep_s} s",
                f"it took {elapsed:.2f} s",
                "blocked_loop",
            )

    def slowish(messages: Any, signal: Any = None) -> dict[str, Any]:
        time.sleep(0.05)
        return {"kind": "final", "text": _names.done}

    result = await _returns(
        agent_loop("q", slowish, {}, timeout_ms=2000), "a plain model that takes 50 ms to answer within 2 s", "control"
    )
    if getattr(result, "text", None) != _names.done:
        raise BehaviourFailed(f"result.text == {_names.done!r}", f"result was {result!r}", "control")


async def deadline_covers_tools(agent_loop: AgentLoop) -> None:
    """The deadline covers tools too, even one that never returns."""

    async def hang(value: Any, signal: Any = None) -> Any:
        return await _hang()

    model = _tools_model([{"id": _names.id(1), "name": "hang", "args": {}}])
    await _rejects(
        agent_loop("q", model, {"hang": Tool(validate=lambda args: None, run=hang)}, timeout_ms=15),
        "deadline",
        "hanging_tool",
    )

    # a plain tool that blocks its thread
    def block(value: Any, signal: Any = None) -> Any:
        time.sleep(1.2)
        return "too late"

    model = _tools_model([{"id": _names.id(1), "name": "block", "args": {}}])
    started = time.perf_counter()
    await _rejects(
        agent_loop("q", model, {"block": Tool(validate=lambda args: None, run=block)}, timeout_ms=50),
        "deadline",
        "blocking_tool",
    )
    if (elapsed := time.perf_counter() - started) > 0.05 + 0.6:
        raise BehaviourFailed(
            "the deadline error within 0.6 s of timeout_ms=50, from a tool that blocks for 1.2 s",
            f"it took {elapsed:.2f} s",
            "blocking_tool",
        )
    # many short steps, none of them near the deadline on its own: the deadline is for the whole run
    log = _Log()
    ids = iter(range(1, 1000))

    async def keeps_calling(messages: Any) -> Any:
        return {"kind": "tools", "calls": [_names.call(next(ids), value=0)]}

    model = _tools_model(*([keeps_calling] * 12), log=log)
    started = time.perf_counter()
    await _rejects(
        log.watch(agent_loop("q", model, _lookup(log=log, latency=0.08), timeout_ms=350, max_turns=12, max_calls=12)),
        "deadline",
        "per_step",
    )
    if (elapsed := time.perf_counter() - started) > 0.35 + 0.8:
        raise BehaviourFailed(
            "the deadline error within 0.8 s of timeout_ms=350, in a run of many 80 ms tool calls",
            f"it took {elapsed:.2f} s",
            "per_step",
        )
    await _quiet_after(log, "after the deadline", "ran_after_deadline")

    # a step that starts well inside the run gets only what is left of it, not a fresh timeout_ms of its own
    async def slow_turn(messages: Any) -> Any:
        await asyncio.sleep(0.6)
        return {"kind": "tools", "calls": [_names.call(1, value=1)]}

    started = time.perf_counter()
    await _rejects(
        agent_loop("q", _tools_model(slow_turn), _lookup(latency=5.0), timeout_ms=700), "deadline", "per_step"
    )
    if (elapsed := time.perf_counter() - started) > 0.7 + 0.5:
        raise BehaviourFailed(
            "the deadline error within 0.5 s of timeout_ms=700, for a 5 s tool called 0.6 s into the run",
            f"it took {elapsed:.2f} s: the tool seems to have been given a whole timeout_ms of its own",
            "per_step",
        )
    # a batch of slow tools that ignore the signal: once the deadline fires during the first, no other starts
    log = _Log()
    batch = [{"id": _names.id(i), "name": _names.tool, "args": {"id": _names.value(i)}} for i in (1, 2, 3)]
    tools = _lookup(log=log, latency=0.2)
    await _rejects(log.watch(agent_loop("q", _tools_model(batch, log=log), tools, timeout_ms=60)), "deadline", "batch")
    await _quiet_after(log, "a batch of three 0.2 s tools and timeout_ms=60", "ran_after_deadline")


async def signal_aborted_on_deadline(agent_loop: AgentLoop) -> None:
    """When the deadline fires, the signal the model was given is aborted."""
    signals: list[Any] = []
    before: list[Any] = []

    async def model(messages: Any, signal: Any = None) -> dict[str, Any]:
        signals.append(signal)
        before.append(getattr(signal, "aborted", None))
        return await _hang()

    await _rejects(agent_loop("q", model, {}, timeout_ms=200), "deadline", "signal_model")
    if not signals or signals[0] is None:
        raise BehaviourFailed("the model to be given a signal", "it was given None", "signal_not_aborted")
    if before[0] is not False:
        raise BehaviourFailed(
            "the model's signal not to be aborted while the run goes on (signal.aborted is False)",
            f"signal.aborted was {before[0]!r}",
            "signal_not_bool",
        )
    aborted = getattr(signals[0], "aborted", None)
    if aborted is not True:
        happened = "it was not" if not aborted else f"signal.aborted was {aborted!r}, not True"
        raise BehaviourFailed(
            "the model's signal to be aborted (signal.aborted is True)", happened, "signal_not_aborted"
        )
    # the tools' signal too
    log = _Log()

    async def hang_tool(value: Any, signal: Any = None) -> Any:
        log.tool_signals.append(signal)
        return await _hang()

    model = _tools_model([{"id": _names.id(1), "name": "hang", "args": {}}])
    await _rejects(
        agent_loop("q", model, {"hang": Tool(validate=lambda args: None, run=hang_tool)}, timeout_ms=200),
        "deadline",
        "tool_signal",
    )
    if not log.tool_signals or getattr(log.tool_signals[0], "aborted", None) is not True:
        raise BehaviourFailed(
            "the signal the tool was given to be aborted when the deadline fired", "it was not", "tool_signal"
        )
    # with a signal from outside: the run's own signal is aborted, the caller's is not touched
    outside, signals = AbortController(), []
    await _rejects(
        agent_loop("q", model_of(signals), {}, timeout_ms=200, signal=outside.signal), "deadline", "signal_model"
    )
    if outside.signal.aborted or not signals or getattr(signals[0], "aborted", None) is not True:
        raise BehaviourFailed(
            "when the caller passes a signal: the model gets the run's own signal, aborted at the deadline; "
            "the caller's signal stays as it was",
            f"the model's signal aborted: {getattr(signals[0], 'aborted', None) if signals else 'no call'}; "
            f"the caller's aborted: {outside.signal.aborted}",
            "outside_signal_passed",
        )


def model_of(signals: list[Any]) -> Callable[..., Awaitable[Any]]:
    """A model that records its signal and never answers."""

    async def model(messages: Any, signal: Any = None) -> Any:
        signals.append(signal)
        return await _hang()

    return model


async def abort_midway(agent_loop: AgentLoop) -> None:
    """An abort from outside stops a run in flight promptly, with the abort's reason."""
    controller = AbortController()
    reason = RuntimeError("user pressed stop")

    async def model(messages: Any, signal: Any = None) -> dict[str, Any]:
        asyncio.get_running_loop().call_later(0.01, controller.abort, reason)
        return await _hang()

    started = time.perf_counter()
    error = await _rejects(
        agent_loop("q", model, {}, timeout_ms=5000, signal=controller.signal), "user pressed stop", "abort_midway"
    )
    if (elapsed := time.perf_counter() - started) > 1.0:
        raise BehaviourFailed("the run to stop within 1 s of the abort", f"it took {elapsed:.2f} s", "abort_slow")
    if error is not reason:
        raise BehaviourFailed(
            "the very exception given to abort() to be raised (error is signal.reason)",
            f"{_describe(error)}, a different object",
            "abort_identity",
        )

    # later in a run, while a slow tool runs that ignores the signal; and while a plain model blocks its thread
    class Cancelled(Exception):
        pass

    n = _names
    for where, clue in (("tool", "abort_tool"), ("blocking model", "abort_model")):
        controller, log = AbortController(), _Log()
        reason = Cancelled(f"stopped in {where} ({n.done})")

        def block(messages: Any, signal: Any = None) -> Any:
            time.sleep(1.5)
            return {"kind": "final", "text": "too late"}

        async def slow(value: Any, signal: Any = None, *, log: _Log = log) -> Any:
            log.ran.append(value)
            log.tool_signals.append(signal)
            log.mark("tool run")
            await asyncio.sleep(1.5)
            return "too late"

        if where == "tool":
            tools = {"slow": Tool(validate=lambda a: None, run=slow)}
            model = _tools_model([{"id": n.id(i), "name": "slow", "args": {}} for i in (1, 2)], log=log)
        else:
            tools, model = {}, block
        asyncio.get_running_loop().call_later(0.1, controller.abort, reason)
        started = time.perf_counter()
        error = await _rejects(
            log.watch(agent_loop("q", model, tools, timeout_ms=5000, signal=controller.signal)),
            re.escape(str(reason)),
            clue,
        )
        if (elapsed := time.perf_counter() - started) > 0.1 + 0.7:
            raise BehaviourFailed(
                f"the run to stop within 0.7 s of an abort that came while a {where} ran",
                f"it took {elapsed:.2f} s",
                clue,
            )
        if error is not reason:
            raise BehaviourFailed(
                "the very exception given to abort() to be raised (error is signal.reason)",
                f"{_describe(error)}, a different object",
                "abort_identity",
            )
        if where == "tool":
            if not log.tool_signals or getattr(log.tool_signals[0], "aborted", None) is not True:
                raise BehaviourFailed(
                    "the signal given to the running tool to be aborted when the caller aborted",
                    "it was not",
                    "abort_not_passed_on",
                )
            await _quiet_after(log, "after the abort", "ran_after_abort")


async def tool_failures_reported(agent_loop: AgentLoop) -> None:
    """A tool that raises, or returns something that is not JSON, ends the run with a clear error."""

    async def broken(value: Any, signal: Any = None) -> Any:
        raise ValueError("disk on fire")

    def broken_plain(value: Any, signal: Any = None) -> Any:
        raise LookupError("no such shelf")

    async def returns_set(value: Any, signal: Any = None) -> Any:
        return {1, 2}

    def returns_object(value: Any, signal: Any = None) -> Any:
        return object()

    tool = _names.tool + "_x"
    for run, phrase, clue in (
        (broken, "disk on fire", "tool_raised"),
        (returns_set, "not JSON", "not_json"),
        (broken_plain, "no such shelf", "tool_raised"),
        (returns_object, "not JSON", "not_json"),
    ):
        model = _tools_model([{"id": _names.id(1), "name": tool, "args": {}}])
        error = await _rejects(agent_loop("q", model, {tool: Tool(validate=lambda args: None, run=run)}), phrase, clue)
        if isinstance(error, (TypeError, KeyError)):
            raise BehaviourFailed("a clear error naming the tool", f"a bare {type(error).__name__}", f"bare:{clue}")
        if tool not in str(error):
            raise BehaviourFailed(f"the error to name the tool, {tool!r}", _describe(error), "tool_not_named")
    await _control(agent_loop, "a run whose tool works")


async def malformed_decisions(agent_loop: AgentLoop) -> None:
    """A decision or call of the wrong shape is refused as malformed."""
    good = _names.call(1)
    for decision, clue in (
        ({"kind": "shout", "text": "hi"}, "malformed_kind"),
        ({"kind": "tools", "calls": []}, "malformed_no_calls"),
        ({"kind": "tools", "calls": [{"id": "c1", "name": "lookup"}]}, "malformed_call"),
        ({"kind": "final", "text": None}, "malformed_text"),
        ("just a string", "malformed_not_dict"),
        (None, "malformed_not_dict"),
        ({"kind": "final"}, "malformed_text"),
        ({"kind": "final", "text": 42}, "malformed_text"),
        ({"kind": "tools", "calls": "lookup"}, "malformed_no_calls"),
        ({"kind": "tools", "calls": [good, {"id": 7, "name": _names.tool, "args": {}}]}, "malformed_call"),
        ({"kind": "tools", "calls": [good, {"id": "", "name": _names.tool, "args": {}}]}, "malformed_call"),
        ({"kind": "tools", "calls": [good, {"id": "x", "name": None, "args": {}}]}, "malformed_call"),
        ({"kind": "tools", "calls": [good, {"id": "x", "name": _names.tool, "args": ["A"]}]}, "malformed_call"),
        ({"kind": "tools", "calls": [good, "lookup"]}, "malformed_call"),
    ):
        ran: list[Any] = []

        async def model(messages: Any, signal: Any = None, *, decision: Any = decision) -> Any:
            return decision

        await _rejects(agent_loop("q", model, _lookup(ran)), "malformed", clue, ran)
        _nothing_ran(ran, clue, f" (the batch {decision})")
    await _control(agent_loop, "a run of well-formed decisions")


async def repeats_forbidden(agent_loop: AgentLoop) -> None:
    """With forbid_repeats, the same tool with the same args is refused the second time."""
    n = _names
    same = [n.call(1, value=0)], [n.call(2, value=0)]
    ran: list[Any] = []
    await _returns(
        agent_loop("q", _tools_model(*same), _lookup(ran)),
        "without forbid_repeats, the same call twice to run",
        "repeats_default",
    )
    if len(ran) != 2:
        raise BehaviourFailed(
            "without forbid_repeats, the same call twice to run twice",
            f"{len(ran)} tool runs happened",
            "repeats_default",
        )
    if not _takes(agent_loop, "forbid_repeats"):
        return  # a loop written to the exercise's first contract, without the option, is asked only the above
    ran = []
    model = _tools_model(*same)
    await _rejects(
        agent_loop("q", model, _lookup(ran), forbid_repeats=True), "repeated tool call without progress", "repeats"
    )
    if len(ran) != 1:
        raise BehaviourFailed(
            "the first call to run and the repeat not to", f"run was called {len(ran)} times", "repeats"
        )
    # a repeat two turns later, and a repeat within one batch
    for batches, runs, scenario, clue in (
        (
            ([n.call(1, value=1)], [n.call(2, value=2)], [n.call(3, value=1)]),
            2,
            "A, then B, then A again",
            "repeats_gap",
        ),
        (([n.call(1, value=1), n.call(2, value=1)],), 0, "one batch asking for A twice", "repeats_batch"),
    ):
        ran = []
        await _rejects(
            agent_loop("q", _tools_model(*batches), _lookup(ran), forbid_repeats=True),
            "repeated tool call without progress",
            clue,
        )
        if len(ran) != runs:
            raise BehaviourFailed(
                f"{scenario}: {runs} tool runs, then the repeat refused", f"{len(ran)} tool runs happened", clue
            )
    # not repeats: other args, or the same args for another tool; and nothing is refused without forbid_repeats
    other = {"other": Tool(validate=parse_lookup_args, run=lambda value, signal=None: value)}
    model = _tools_model(
        [n.call(1, value=1)],
        [n.call(2, value=2)],
        [{"id": n.id(3), "name": "other", "args": {"id": n.value(1)}}],
        [{"id": n.id(4), "name": n.tool, "args": {"id": n.value(1).lower()}}],
    )
    await _returns(
        agent_loop("q", model, {**_lookup(), **other}, forbid_repeats=True),
        "with forbid_repeats=True, calls with other args or to another tool to run",
        "repeats_false_positive",
    )


def _behaviour(check: Callable[[AgentLoop], Awaitable[None]], step: str, reference: bool = False) -> Behaviour:
    title = (check.__doc__ or check.__name__).strip().splitlines()[0]
    return Behaviour(check.__name__, title, step, reference, check)


REFERENCE: tuple[Behaviour, ...] = (
    _behaviour(result_reaches_model, "basics", True),
    _behaviour(unknown_tool, "checks", True),
    _behaviour(invalid_args_never_run, "checks", True),
    _behaviour(tool_and_turn_budgets, "budgets", True),
    _behaviour(duplicate_call_id, "checks", True),
    _behaviour(deadline_ignoring_signal, "deadline", True),
    _behaviour(context_output_cancellation, "limits", True),
)

RULES: tuple[Behaviour, ...] = (
    _behaviour(history_shape, "basics"),
    _behaviour(results_in_call_order, "basics"),
    _behaviour(compact_json_results, "basics"),
    _behaviour(model_sees_snapshot, "basics"),
    _behaviour(malformed_decisions, "shapes"),
    _behaviour(inherited_names_refused, "checks"),
    _behaviour(batch_checked_whole, "checks"),
    _behaviour(args_copied_at_boundary, "checks"),
    _behaviour(tool_failures_reported, "checks"),
    _behaviour(repeats_forbidden, "checks"),
    _behaviour(budget_before_running, "budgets"),
    _behaviour(limits_reached_exactly, "budgets"),
    _behaviour(deadline_blocking_model, "deadline"),
    _behaviour(deadline_covers_tools, "deadline"),
    _behaviour(signal_aborted_on_deadline, "deadline"),
    _behaviour(abort_midway, "deadline"),
    _behaviour(context_counts_calls, "limits"),
)

ALL: tuple[Behaviour, ...] = REFERENCE + RULES

# The behaviours whose model or tool blocks in a plain function (time.sleep). With no threads (Pyodide) a plain
# callee runs on the event loop's own thread, so these hold only where time.sleep lets the loop run on meanwhile
# (Chromium, which suspends the page's WebAssembly), not under Node (tests/test_pyodide.py).
BLOCKING = frozenset({"deadline_blocking_model", "deadline_covers_tools", "abort_midway"})


def get(key: str) -> Behaviour:
    """The behaviour named `key`; a ConfigError lists the names if there is none."""
    for behaviour in ALL:
        if behaviour.key == key:
            return behaviour
    raise ConfigError(f"no behaviour {key!r}; the behaviours are: {', '.join(b.key for b in ALL)}")


def select(step: str | None = None, reference_only: bool = False) -> Sequence[Behaviour]:
    """The behaviours of one step (every workbook step if None), optionally only the seven."""
    if step is not None and step not in STEPS + EXTRA_STEPS:
        raise ConfigError(f"no step {step!r}; the steps are: {', '.join(STEPS + EXTRA_STEPS)}")
    wanted = STEPS if step is None else (step,)
    return [b for b in ALL if b.step in wanted and (b.reference or not reference_only)]


async def verify(key: str, agent_loop: AgentLoop, *, expect_failure: bool = False) -> None:
    """Run one behaviour against `agent_loop`: print a one-line verdict, or raise if it fails.

    This is the check cell of the notebooks: `await verify("unknown_tool", agent_loop)`. With
    `expect_failure=True` (a notebook's naive loop, which lacks the rule) the failure is the expected verdict:
    it is printed, with what the check expected and what happened; a loop that passes instead raises, since the
    notebook's claim that it lacks the rule would then be false.
    """
    behaviour = get(key)
    if not expect_failure:
        await behaviour(agent_loop)
        print(textwrap.fill(f"✓ {i18n._(behaviour.title)}", 100, subsequent_indent="  "))
        return
    try:
        await behaviour(agent_loop)
    except BehaviourFailed as failure:
        print(textwrap.fill(f"✗ {i18n._(behaviour.title)}", 100, subsequent_indent="  "))
        for line in textwrap.wrap(str(failure), 96, initial_indent="  ", subsequent_indent="    "):
            print(line)
        return
    raise BehaviourFailed(f"{getattr(agent_loop, '__name__', 'this loop')} to fail {key!r}", "it passed", "passed")


__all__ = [
    "ALL",
    "BLOCKING",
    "EXTRA_STEPS",
    "REFERENCE",
    "RULES",
    "STEPS",
    "Behaviour",
    "BehaviourFailed",
    "Names",
    "get",
    "names",
    "select",
    "vary",
    "verify",
    "watch_tasks",
]


# == step "recovery" (notebook 11): refusals returned to the model, within max_refusals ==========================
#
# Beyond the exercise's workbooks: a loop that takes `max_refusals` may give a refused batch back to the model
# instead of ending the run. These rules are asked for by name (`select("recovery")`, `check(impl, "recovery")`),
# never as part of "every step", so a loop written for the workbooks is not failed for an option it never had.
# Self-contained: its models and tools are its own.

_GOOD = {"id": "r1", "name": "lookup", "args": {"id": "A"}}
# Each mistake the model can fix, as the second call of a batch whose first call is good: (call, phrase, clue).
_SLIPS: tuple[tuple[dict[str, Any], str, str], ...] = (
    ({"id": "r2", "name": "deleteEverything", "args": {}}, "unknown tool", "unknown_tool"),
    ({"id": "r2", "name": "lookup", "args": {"id": 7}}, "args", "invalid_args"),
    ({"id": "r2", "name": "lookup"}, "malformed", "malformed_call"),
    ({"id": "r1", "name": "lookup", "args": {"id": "B"}}, "duplicate call id", "duplicate_id"),
)


def _recovery_tools(ran: list[Any]) -> dict[str, Tool]:
    """The lookup tool; every value `run` receives is appended to `ran`."""

    async def run(value: Any) -> Any:
        ran.append(value)
        return parse_lookup_args(value)

    return {"lookup": Tool(validate=parse_lookup_args, run=run)}


class _Slips:
    """A model that proposes `first` (a batch), then one good call with a fresh id, then answers "done".

    It keeps a plain copy of every history it was shown, so a behaviour can read what went back to it.
    """

    def __init__(self, first: list[dict[str, Any]], slips: int = 1) -> None:
        self.first, self.slips, self.seen = first, slips, []

    async def __call__(self, messages: Any, signal: Any = None) -> dict[str, Any]:
        self.seen.append([dict(message) for message in messages])
        turn = len(self.seen)
        if turn <= self.slips:
            return {"kind": "tools", "calls": _fresh(self.first, turn)}
        if turn == self.slips + 1:
            return {"kind": "tools", "calls": [{"id": "ok", "name": "lookup", "args": {"id": "A"}}]}
        return {"kind": "final", "text": "done"}


def _fresh(batch: list[dict[str, Any]], turn: int) -> list[dict[str, Any]]:
    """The batch for `turn`: each id made new for the turn (an id repeated within the batch stays repeated)."""
    if turn == 1:
        return [dict(call) for call in batch]
    return [dict(call, id=f"{call['id']}.{turn}") if isinstance(call.get("id"), str) else dict(call) for call in batch]


def _answers(history: Sequence[Any]) -> list[tuple[list[Any], list[tuple[Any, str]]]]:
    """Each calls message of a history with the tool messages that follow it: ([ids], [(call_id, content)])."""
    out: list[tuple[list[Any], list[tuple[Any, str]]]] = []
    for message in history:
        if not isinstance(message, dict):
            continue
        if "calls" in message and isinstance(message["calls"], list):
            out.append(([c.get("id") if isinstance(c, dict) else None for c in message["calls"]], []))
        elif message.get("role") == "tool" and out:
            out[-1][1].append((message.get("call_id"), str(message.get("content", ""))))
    return out


def _in_words(message: str, content: str) -> bool:
    """True if `content` carries `message`, as plain text or inside a JSON string."""
    import json  # here, not at the top: this block keeps to itself

    return message in content or json.dumps(message, ensure_ascii=False)[1:-1] in content


async def _error_without_recovery(agent_loop: AgentLoop, batch: list[dict[str, Any]], phrase: str, clue: str) -> str:
    """The error the loop raises for `batch` with max_refusals=0: the words a returned refusal must carry."""
    ran: list[Any] = []
    try:
        error = await _rejects(agent_loop("q", _Slips(batch), _recovery_tools(ran), max_refusals=0), phrase, clue, ran)
    except BehaviourFailed as failed:  # without the error, there are no words to compare: say which rule broke
        raise BehaviourFailed(f"first, with max_refusals=0, {failed.expected}", failed.happened, "zero_first") from None
    return str(error)


async def zero_refusals_is_todays_contract(agent_loop: AgentLoop) -> None:
    """With max_refusals=0, every refusal still ends the run with its error, and nothing of the batch runs."""
    for bad, phrase, clue in _SLIPS:
        ran: list[Any] = []
        model = _Slips([_GOOD, bad])
        await _rejects(agent_loop("q", model, _recovery_tools(ran), max_refusals=0), phrase, clue)
        if ran:
            raise BehaviourFailed("that no tool of the refused batch ran", f"run got {ran[0]!r}", f"ran:{clue}")
        if len(model.seen) != 1:
            raise BehaviourFailed(
                f"with max_refusals=0 and {clue.replace('_', ' ')}, the model to be called once",
                f"it was called {len(model.seen)} times",
                f"zero_asked_again:{clue}",
            )


async def refusal_answers_every_call(agent_loop: AgentLoop) -> None:
    """A returned refusal answers every call of the batch once: the refused one in its error's words."""
    for bad, phrase, clue in _SLIPS:
        words = await _error_without_recovery(agent_loop, [_GOOD, bad], phrase, clue)
        model = _Slips([_GOOD, bad])
        result = await _returns(
            agent_loop("q", model, _recovery_tools([]), max_refusals=1),
            f"with max_refusals=1, {clue.replace('_', ' ')} to go back to the model and the run to answer 'done'",
            f"not_returned:{clue}",
        )
        if len(model.seen) < 2:
            raise BehaviourFailed("the model to be asked again after the refusal", "it was not", f"not_asked:{clue}")
        batches = _answers(model.seen[1])
        if not batches:
            raise BehaviourFailed(
                "the refused batch in the history the model sees next", "there was no calls message", f"no_batch:{clue}"
            )
        ids, answers = batches[-1]
        if len(ids) != 2 or len(answers) != 2 or len({call_id for call_id, _ in answers}) != 2:
            raise BehaviourFailed(
                f"one tool message per call of the refused batch ({clue.replace('_', ' ')}): 2, each to its own id",
                f"the batch {ids} got {answers}",
                f"one_per_call:{clue}",
            )
        refused = answers[1][1]
        if not _in_words(words, refused):
            raise BehaviourFailed(
                f"the refused call's message to carry the error's own words, {words!r}",
                f"it was {refused!r}",
                f"words:{clue}",
            )
        if answers[0][1] == '{"id":"A"}' or not re.search(r"not (been )?run|refused", answers[0][1], re.IGNORECASE):
            raise BehaviourFailed(
                "the good call's message to say it was not run because another call was refused",
                f"it was {answers[0][1]!r}",
                f"batch_mate:{clue}",
            )
        if getattr(getattr(result, "usage", None), "refusals", None) != 1:
            usage = getattr(result, "usage", None)
            raise BehaviourFailed("result.usage.refusals == 1", f"usage was {usage!r}", "usage_refusals")


async def returned_batch_never_runs(agent_loop: AgentLoop) -> None:
    """Nothing of a returned batch runs, not even its good calls, and a repeat under forbid_repeats is refused too."""
    for bad, _, clue in _SLIPS:
        ran: list[Any] = []
        await _returns(
            agent_loop("q", _Slips([_GOOD, bad]), _recovery_tools(ran), max_refusals=1),
            f"with max_refusals=1, {clue.replace('_', ' ')} to go back to the model and the run to answer 'done'",
            f"not_returned:{clue}",
        )
        if ran != [{"id": "A"}]:
            raise BehaviourFailed(
                "only the corrected call to run, once: [{'id': 'A'}]", f"run got {ran}", f"ran:{clue}"
            )
    ran = []
    repeat = [{"id": "p1", "name": "lookup", "args": {"id": "B"}}]
    again = [{"id": "p2", "name": "lookup", "args": {"id": "A"}}, {"id": "p3", "name": "lookup", "args": {"id": "B"}}]
    model = _tools_in_turns(repeat, again, [{"id": "p4", "name": "lookup", "args": {"id": "C"}}])
    await _returns(
        agent_loop("q", model, _recovery_tools(ran), forbid_repeats=True, max_refusals=1),
        "with forbid_repeats and max_refusals=1, the repeat to go back to the model and the run to answer 'done'",
        "not_returned:repeat",
    )
    if ran != [{"id": "B"}, {"id": "C"}]:
        raise BehaviourFailed(
            "B to run, then nothing of the batch with the repeat, then C: [{'id': 'B'}, {'id': 'C'}]",
            f"run got {ran}",
            "ran:repeat",
        )


def _tools_in_turns(*batches: list[dict[str, Any]]) -> Callable[..., Awaitable[Any]]:
    """A model that proposes `batches` in turn, then answers "done"."""
    turns = iter(batches)

    async def model(messages: Any, signal: Any = None) -> dict[str, Any]:
        batch = next(turns, None)
        return {"kind": "final", "text": "done"} if batch is None else {"kind": "tools", "calls": batch}

    return model


async def refusals_tie_to_usable_ids(agent_loop: AgentLoop) -> None:
    """Every call in the history, refused or not, has its own string id and exactly one tool message."""
    for bad, clue in (
        ({"name": "lookup", "args": {"id": "B"}}, "missing_id"),
        ({"id": 7, "name": "lookup", "args": {"id": "B"}}, "number_id"),
        ({"id": "r1", "name": "lookup", "args": {"id": "B"}}, "duplicate_id"),
    ):
        model = _Slips([_GOOD, bad])
        result = await _returns(
            agent_loop("q", model, _recovery_tools([]), max_refusals=1),
            f"with max_refusals=1, a call with a {clue.replace('_', ' ')} to go back to the model",
            f"not_returned:{clue}",
        )
        history = list(getattr(result, "history", None) or [])
        ids = [call_id for batch_ids, _ in _answers(history) for call_id in batch_ids]
        answered = [call_id for _, answers in _answers(history) for call_id, _ in answers]
        if (
            not all(isinstance(i, str) and i for i in ids)
            or len(set(ids)) != len(ids)
            or sorted(answered) != sorted(ids)
        ):
            raise BehaviourFailed(
                "every call id in the history a distinct non-empty string, answered by exactly one tool message",
                f"the calls had the ids {ids} and the tool messages answered {answered}",
                f"ids:{clue}",
            )


async def refusal_budget_ends_the_run(agent_loop: AgentLoop) -> None:
    """The refusal after max_refusals ends the run with that refusal's own error."""
    for bad, phrase, clue in _SLIPS:
        for budget in (1, 2):
            model = _Slips([_GOOD, bad], slips=budget + 1)
            ran: list[Any] = []
            error = await _rejects(agent_loop("q", model, _recovery_tools(ran), max_refusals=budget), phrase, clue)
            if len(model.seen) != budget + 1 or ran:
                kind = "budget_count" if len(model.seen) != budget + 1 else "ran"
                raise BehaviourFailed(
                    f"with max_refusals={budget}, {budget} refusals returned, the next one raised: "
                    f"{budget + 1} model calls, no tool run",
                    f"{len(model.seen)} model calls, {len(ran)} tool runs",
                    f"{kind}:{clue}",
                )
            refusals = getattr(getattr(error, "usage", None), "refusals", budget)
            if refusals != budget:
                raise BehaviourFailed(f"error.usage.refusals == {budget}", f"it was {refusals!r}", "usage_refusals")


async def limits_are_not_refusals(agent_loop: AgentLoop) -> None:
    """With refusals allowed, the tool, turn and context budgets still end the run."""
    ran: list[Any] = []
    too_many = [{"id": f"t{n}", "name": "lookup", "args": {"id": "A"}} for n in (1, 2, 3)]
    model = _Slips(too_many)
    await _rejects(
        agent_loop("q", model, _recovery_tools(ran), max_calls=2, max_refusals=5), "tool budget", "max_calls", ran
    )
    if ran or len(model.seen) != 1:
        raise BehaviourFailed(
            "a batch over max_calls to end the run at once, nothing run",
            f"{len(model.seen)} model calls, {len(ran)} tool runs",
            "returned:max_calls",
        )
    slipping = _Slips([{"id": "u1", "name": "nope", "args": {}}], slips=10)
    await _rejects(agent_loop("q", slipping, {}, max_turns=2, max_refusals=5), "turn budget", "max_turns")
    slipping = _Slips([{"id": "u1", "name": "nope", "args": {}}], slips=10)
    await _rejects(agent_loop("q", slipping, {}, max_chars=60, max_refusals=5), "context budget", "max_chars")


RECOVERY: tuple[Behaviour, ...] = (
    _behaviour(zero_refusals_is_todays_contract, "recovery"),
    _behaviour(refusal_answers_every_call, "recovery"),
    _behaviour(returned_batch_never_runs, "recovery"),
    _behaviour(refusals_tie_to_usable_ids, "recovery"),
    _behaviour(refusal_budget_ends_the_run, "recovery"),
    _behaviour(limits_are_not_refusals, "recovery"),
)
EXTRA_STEPS += ("recovery",)
RULES += RECOVERY
ALL += RECOVERY
__all__ += ["RECOVERY"]
# == end of step "recovery" ========================================================================================


# =====================================================================================================================
# The "writes" step (workbook 7): approval, the write budget, the idempotency key, and a stopped write that settles.
# A self-contained block with helpers of its own (prefixed _w): it only extends EXTRA_STEPS, RULES, ALL and __all__.
# =====================================================================================================================


from agentlab.tools import Approval  # noqa: E402


class _RolledBack(Exception):
    """What a write tool raises when it was stopped and undid its work: `rolled_back` says so to the loop."""

    rolled_back = True


def _wid(name: str) -> str:
    """A call id of these scenarios: seeded like the others' (`vary`), so that canned answers fail."""
    return names().prefix + name


def _w_describe(value: Any) -> str:
    return (
        _describe(value) if isinstance(value, BaseException) else f"the run returned {getattr(value, 'text', value)!r}"
    )


async def _w_run(run: Awaitable[Any]) -> Any:
    """Await one run, bounded; return its result, or the exception it raised (never raise it here)."""
    try:
        return await asyncio.wait_for(run, RUN_BOUND_S)
    except TimeoutError:
        raise BehaviourFailed(
            f"the run to end within {RUN_BOUND_S:g} s", "it was still running, so the check gave up on it", "hung"
        ) from None
    except Exception as error:
        return error


def _w_model(*batches: list[dict[str, Any]], seen: list[Any] | None = None) -> Callable[..., Awaitable[Any]]:
    """A model that proposes `batches` in turn, then answers "done"; `seen` gets the last message of each turn."""
    turns = iter(batches)

    async def model(messages: Any, signal: Any = None) -> dict[str, Any]:
        if seen is not None:
            seen.append([dict(message) for message in messages])
        batch = next(turns, None)
        return {"kind": "final", "text": "done"} if batch is None else {"kind": "tools", "calls": batch}

    return model


def _w_reserve(key: str, book: str, quantity: int = 1) -> dict[str, Any]:
    return {"id": _wid(key), "name": "reserve", "args": {"book": book, "quantity": quantity}}


def _w_read(key: str, book: str) -> dict[str, Any]:
    return {"id": _wid(key), "name": "lookup", "args": {"id": book}}


def _w_parse_reservation(args: Any) -> tuple[str, int]:
    """The reserve tool's validate: it parses the args into a (book, quantity) pair, which is what run gets."""
    if not isinstance(args, dict) or sorted(args) != ["book", "quantity"]:
        raise ValueError('expected {"book": <id>, "quantity": <1 to 5>}')
    if not isinstance(args["quantity"], int) or not 0 < args["quantity"] <= 5:
        raise ValueError("quantity must be a whole number from 1 to 5")
    return str(args["book"]), int(args["quantity"])


def _w_shop(
    events: list[tuple[Any, ...]],
    *,
    slow_s: float = 0.0,
    settle_s: float | None = None,
    on_start: Callable[[], Any] | None = None,
) -> dict[str, Tool]:
    """A lookup (reads) and a reserve (writes) that log what they are given to `events`.

    reserve is async and takes `slow_s` to write; with `settle_s`, it instead holds its transaction open until the
    run is stopped (`on_start` is called once it holds it), then takes `settle_s` to roll back and raises
    _RolledBack. A sync twin, `reserve_now`, writes
    at once on whatever thread the loop runs it.
    """

    async def lookup(value: Any, signal: Any = None) -> Any:
        events.append(("read", value.get("id") if isinstance(value, dict) else value))
        return {"book": value.get("id") if isinstance(value, dict) else None, "on_hand": 3}

    async def reserve(value: Any, signal: Any = None, call: Any = None) -> Any:
        key = getattr(call, "id", call)
        events.append(("start", key, value))
        if settle_s is not None:
            if on_start is not None:
                on_start()
            for _ in range(300):  # hold until the run is stopped (at most 1.5 s); duck-typed: only `.aborted`
                if getattr(signal, "aborted", False):
                    break
                await asyncio.sleep(0.005)
            await asyncio.sleep(settle_s)  # undoing the work takes a moment
            events.append(("rolled_back", key))
            raise _RolledBack(f"stopped before the commit: reservation {key} rolled back")
        if slow_s:
            await asyncio.sleep(slow_s)
        events.append(("end", key))
        return {"reserved": value[0] if isinstance(value, tuple) else value, "key": key}

    def reserve_now(value: Any, signal: Any = None, call: Any = None) -> Any:
        key = getattr(call, "id", call)
        events.append(("start", key, value))
        events.append(("end", key))
        return {"reserved": value[0] if isinstance(value, tuple) else value, "key": key}

    return {
        "lookup": Tool(validate=parse_lookup_args, run=lookup),
        "reserve": Tool(validate=_w_parse_reservation, run=reserve, writes=True),
        "reserve_now": Tool(validate=_w_parse_reservation, run=reserve_now, writes=True),
    }


def _w_policy(events: list[tuple[Any, ...]], *answers: Any, sync: bool = False) -> Callable[..., Any]:
    """An approve policy that logs each call it is asked about and answers `answers` in turn (then True).

    It also tampers with the args it is shown: the write must still run with what validate returned.
    """
    left = list(answers)

    def decide(call: Any, signal: Any = None) -> Any:
        key, name, args = getattr(call, "id", call), getattr(call, "name", None), getattr(call, "args", None)
        events.append(("approve", key, name, json.dumps(args, sort_keys=True, default=repr)))
        if isinstance(args, dict):
            args["quantity"] = 99  # a policy is code too: what it does to its copy must not reach the write
        return left.pop(0) if left else True

    if sync:
        return decide

    async def decide_async(call: Any, signal: Any = None) -> Any:
        await asyncio.sleep(0)
        return decide(call, signal)

    return decide_async


def _w_no_write(events: list[tuple[Any, ...]], what: str, clue: str) -> None:
    ran = [event for event in events if event[0] in ("start", "read")]
    if ran:
        kind, key = ran[0][0], ran[0][1]
        raise BehaviourFailed(
            f"nothing of the refused batch to run ({what})",
            f"the {'write' if kind == 'start' else 'read'} {key!r} ran",
            f"ran:{clue}",
        )


def _w_error(outcome: Any, phrase: str, expected: str, clue: str) -> BaseException:
    if not isinstance(outcome, BaseException):
        raise BehaviourFailed(expected, _w_describe(outcome), f"no_error:{clue}")
    if not re.search(phrase, str(outcome)):
        raise BehaviourFailed(expected, _w_describe(outcome), f"wrong_error:{clue}") from outcome
    return outcome


def _w_returned(outcome: Any, expected: str, clue: str) -> Any:
    if isinstance(outcome, BaseException):
        raise BehaviourFailed(expected, _w_describe(outcome), f"raised:{clue}") from outcome
    return outcome


async def writes_need_approval(agent_loop: AgentLoop) -> None:
    """A write runs only with an approve policy; without one, its whole batch is refused before anything runs."""
    for batch, order in (
        ([_w_read("r_1", "A"), _w_reserve("w_1", "A", 2)], "a read, then a write"),
        ([_w_reserve("w_2", "B"), _w_read("r_2", "B")], "a write, then a read"),
    ):
        events: list[tuple[Any, ...]] = []
        seen: list[Any] = []
        outcome = await _w_run(agent_loop("reserve A", _w_model(batch, seen=seen), _w_shop(events)))
        _w_error(
            outcome,
            r"(?i)approv",
            f"an error saying approval is required, for a batch of {order} and no approve policy",
            "no_policy",
        )
        _w_no_write(events, f"{order}, no approve policy", "no_policy")
        if len(seen) != 1:
            raise BehaviourFailed(
                "the run to stop at the refused batch", f"the model was called {len(seen)} times", "no_policy"
            )
    events = []
    reads = ([_w_read("r_3", "A")], [_w_read("r_4", "C")])
    outcome = await _w_run(agent_loop("look A and C up", _w_model(*reads), _w_shop(events)))
    _w_returned(outcome, "a run of reads only to need no approve policy and return 'done'", "reads_need_none")


async def approval_before_each_write(agent_loop: AgentLoop) -> None:
    """Each write is approved just before it runs, in call order; its run gets the call to make its key."""
    for sync in (False, True):
        events: list[tuple[Any, ...]] = []
        batch = [_w_reserve("w_10", "A", 2), _w_read("r_1", "A"), {**_w_reserve("w_1", "C"), "name": "reserve_now"}]
        model = _w_model(batch, [_w_reserve("w_100", "E", 1)])
        policy = _w_policy(events, True, Approval(True), sync=sync)
        kind = "a plain" if sync else "an async"
        outcome = await _w_run(agent_loop("reserve", model, _w_shop(events, slow_s=0.02), approve=policy))
        _w_returned(outcome, f"the run, with {kind} policy that approves every write, to return 'done'", "raised")
        keys = [event[1] for event in events if event[0] == "start"]
        if set(keys) - {_wid("w_10"), _wid("w_1"), _wid("w_100")}:
            raise BehaviourFailed(
                "each write's run to get its ToolCall as its third argument, with the call's own id (a store makes "
                "the write's idempotency key from the call): run(value, signal, call)",
                f"the writes' runs were given, as their call, {keys}",
                "no_key",
            )
        order = [(event[0], event[1]) for event in events]
        expected = [
            ("approve", _wid("w_10")),
            ("start", _wid("w_10")),
            ("end", _wid("w_10")),
            ("read", "A"),
            ("approve", _wid("w_1")),
            ("start", _wid("w_1")),
            ("end", _wid("w_1")),
            ("approve", _wid("w_100")),
            ("start", _wid("w_100")),
            ("end", _wid("w_100")),
        ]
        if order != expected:
            if [e for e in order if e[0] == "approve"] != [e for e in expected if e[0] == "approve"]:
                clue = "approve_ids"
            elif order[:2] != expected[:2] or order.index(("approve", _wid("w_1"))) < order.index(
                ("end", _wid("w_10"))
            ):
                clue = "approve_order"
            else:
                clue = "write_order"
            raise BehaviourFailed(
                "for each write, in call order: the policy asked, then the write run to its end, before the next "
                f"call; {expected}",
                f"the policy and the tools saw {order}",
                clue,
            )
        asked = {event[1]: event for event in events if event[0] == "approve"}
        if asked[_wid("w_10")][2:] != ("reserve", '{"book": "A", "quantity": 2}'):
            raise BehaviourFailed(
                "the policy to be shown the call: its id, its tool name and the args the model proposed",
                f"it was shown the name {asked[_wid('w_10')][2]!r} and the args {asked[_wid('w_10')][3]}",
                "approve_call",
            )
        given = {event[1]: event[2] for event in events if event[0] == "start"}
        if given.get(_wid("w_10")) != ("A", 2) or given.get(_wid("w_1")) != ("C", 1):
            raise BehaviourFailed(
                "each write to run with what its validate returned, whatever the policy did to its copy of the args",
                f"the writes were given {given}",
                "policy_tampered",
            )


async def denial_is_the_result(agent_loop: AgentLoop) -> None:
    """A denied write does not run: the denial, with its reason, is that call's result, and the model goes on."""
    events: list[tuple[Any, ...]] = []
    seen: list[Any] = []
    model = _w_model([_w_reserve("w_7", "A", 3), _w_read("r_7", "A")], [_w_reserve("w_70", "B")], seen=seen)
    policy = _w_policy(events, Approval(False, "one per customer"), False)
    outcome = await _w_run(agent_loop("reserve", model, _w_shop(events), approve=policy))
    _w_returned(outcome, "the run to go on after a denial and return the model's 'done'", "denial_raised")
    writes = [event[1] for event in events if event[0] == "start"]
    if writes:
        raise BehaviourFailed("a denied write not to run", f"the write {writes[0]!r} ran", "denied_ran")
    if ("read", "A") not in [event[:2] for event in events]:
        raise BehaviourFailed(
            "the rest of the batch to run after a denial", "the read after it did not", "denial_raised"
        )
    for turn, key, reason in ((1, _wid("w_7"), "one per customer"), (2, _wid("w_70"), None)):
        messages = seen[turn] if len(seen) > turn else []
        answers = [m for m in messages if m.get("role") == "tool" and m.get("call_id") == key]
        content = answers[0].get("content") if answers else None
        try:
            result = json.loads(content) if isinstance(content, str) else None
        except ValueError:
            result = None
        wanted = f"the reason {reason!r}" if reason else "a reason"
        if not answers:
            raise BehaviourFailed(
                f"the model's next turn to hold a tool message for the denied call {key!r}",
                f"it held none (tool messages for: {[m.get('call_id') for m in messages if m.get('role') == 'tool']})",
                "denial_message",
            )
        if not (
            isinstance(result, dict)
            and result.get("denied") is True
            and isinstance(result.get("reason"), str)
            and result["reason"]
            and (reason is None or result["reason"] == reason)
        ):
            raise BehaviourFailed(
                f'its content to be JSON with "denied": true and {wanted}',
                f"it was {content!r}",
                "denial_content",
            )
    for answer in ("yes", None):
        events = []
        model = _w_model([_w_reserve("w_8", "A")])
        outcome = await _w_run(agent_loop("reserve", model, _w_shop(events), approve=_w_policy(events, answer)))
        _w_no_write(events, f"the policy answered {answer!r}, not True, False or an Approval", "odd_answer")
        _w_error(
            outcome,
            r"(?i)approv",
            f"an error about the approval when the policy answers {answer!r}",
            "odd_answer",
        )


async def write_budget_checked_first(agent_loop: AgentLoop) -> None:
    """max_writes counts approved writes over the run; a batch that would pass it is refused before anything runs."""
    over = (
        (
            "three writes at once, max_writes=2",
            [[_w_read("r_1", "A"), *(_w_reserve(_wid(f"w_{n}"), "A") for n in "123")]],
        ),
        (
            "one write, then a read and two writes, max_writes=2",
            [[_w_reserve("w_4", "C")], [_w_read("r_2", "D"), _w_reserve("w_5", "C"), _w_reserve("w_6", "D")]],
        ),
    )
    for what, batches in over:
        events: list[tuple[Any, ...]] = []
        policy = _w_policy(events)
        outcome = await _w_run(agent_loop("go", _w_model(*batches), _w_shop(events), approve=policy, max_writes=2))
        _w_error(outcome, r"(?i)write budget", f"an error saying the write budget is exhausted ({what})", "over")
        refused = {call["id"] for call in batches[-1]} | {
            call["args"]["id"] for call in batches[-1] if call["name"] == "lookup"
        }
        touched = [event[:2] for event in events if event[1] in refused]
        if touched:
            raise BehaviourFailed(
                f"nothing of the batch past the budget to run, nor to be put to the policy ({what})",
                f"the tools and the policy saw {touched}",
                "ran:over",
            )
    fits = (
        ("exactly max_writes=2, across two turns", 2, [[_w_reserve("w_1", "A")], [_w_reserve("w_2", "B")]], ()),
        (
            "one write denied, then one approved, max_writes=1",
            1,
            [[_w_reserve("w_3", "A")], [_w_reserve("w_4", "B")]],
            (False,),
        ),
        (
            "two reads and one write, max_writes=1",
            1,
            [[_w_read("r_1", "A"), _w_read("r_2", "B"), _w_reserve("w_5", "C")]],
            (),
        ),
    )
    for what, limit, batches, answers in fits:
        events = []
        policy = _w_policy(events, *answers)
        outcome = await _w_run(agent_loop("go", _w_model(*batches), _w_shop(events), approve=policy, max_writes=limit))
        clue = "denied_counted" if answers else "reads_counted" if "reads" in what else "exact"
        if answers and not re.search(r"(?i)write budget", str(outcome)):
            clue = "denial_raised"  # the run ended at the denial, not at the budget: not a matter of counting
        _w_returned(outcome, f"the run to fit its write budget and return 'done' ({what})", clue)


async def stopped_write_settles(agent_loop: AgentLoop) -> None:
    """A write stopped mid-way gets time to roll back before the run ends; no write starts once the run is stopped."""
    events: list[tuple[Any, ...]] = []
    started = time.perf_counter()
    model = _w_model([_w_reserve("w_9", "A")])
    # The deadline leaves the loop 300 ms to start the write (plenty on a loaded machine); the write then holds.
    outcome = await _w_run(
        agent_loop("go", model, _w_shop(events, settle_s=0.05), approve=_w_policy(events), timeout_ms=300)
    )
    settled = [event for event in events if event[0] == "rolled_back"]
    _w_error(
        outcome, r"(?i)deadline", "the run to end with the deadline's error while a write was in flight", "deadline"
    )
    if not settled:
        raise BehaviourFailed(
            "the run to wait for the write in flight to roll back (it takes 50 ms once stopped) before it ends",
            "the run ended before the write had settled",
            "no_grace",
        )
    if time.perf_counter() - started > 1.5:
        raise BehaviourFailed("the run to end soon after the write rolled back", "it took over 1.5 s", "slow_grace")
    events = []
    controller = AbortController()
    reason = RuntimeError("the customer hung up")

    def stop_soon() -> None:  # the abort comes 30 ms into the write, whatever the load before it
        asyncio.get_running_loop().call_later(0.03, controller.abort, reason)

    model = _w_model([_w_reserve("w_11", "B")])
    shop = _w_shop(events, settle_s=0.05, on_start=stop_soon)
    outcome = await _w_run(agent_loop("go", model, shop, approve=_w_policy(events), signal=controller.signal))
    if outcome is not reason:
        raise BehaviourFailed(
            "the run to raise the abort's own reason (the very exception given to abort)",
            _w_describe(outcome),
            "abort_reason",
        ) from (outcome if isinstance(outcome, BaseException) else None)
    if not [event for event in events if event[0] == "rolled_back"]:
        raise BehaviourFailed(
            "the run to wait for the write in flight to roll back before it ends (an abort this time)",
            "the run ended before the write had settled",
            "no_grace",
        )
    events = []

    async def slow_person(call: Any, signal: Any = None) -> bool:
        await asyncio.sleep(0.15)  # answers after the deadline, and ignores the signal
        return True

    model = _w_model([_w_reserve("w_12", "C")])
    outcome = await _w_run(agent_loop("go", model, _w_shop(events), approve=slow_person, timeout_ms=40))
    await asyncio.sleep(0.2)  # long enough for a write started after the answer to show
    _w_error(outcome, r"(?i)deadline", "the deadline's error while the policy was still deciding", "approval_deadline")
    if [event for event in events if event[0] == "start"]:
        raise BehaviourFailed(
            "no write to start after the deadline, even one approved after it",
            "the write ran once the late approval came",
            "late_write",
        )


WRITES: tuple[Behaviour, ...] = (
    _behaviour(writes_need_approval, "writes"),
    _behaviour(approval_before_each_write, "writes"),
    _behaviour(denial_is_the_result, "writes"),
    _behaviour(write_budget_checked_first, "writes"),
    _behaviour(stopped_write_settles, "writes"),
)
# Past the exercise, like "recovery": `select()` (and so `check(agent_loop)`) stays the exercise's steps; this one is
# checked by name, `check(agent_loop, step="writes")`.
EXTRA_STEPS += ("writes",)
RULES += WRITES
ALL += WRITES
__all__ += ["WRITES"]
# ============================================ end of the "writes" step ===============================================
