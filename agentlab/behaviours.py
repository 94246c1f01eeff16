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
import json
import re
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from agentlab.abort import AbortController
from agentlab.errors import ConfigError
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


STEPS = ("basics", "checks", "budgets", "deadline", "limits")

# -- small tools and models the behaviours share --------------------------------


def _lookup(ran: list[Any] | None = None) -> dict[str, Tool]:
    """The reference's lookup tool; every value `run` receives is appended to `ran`."""

    async def run(value: Any) -> Any:
        if ran is not None:
            ran.append(value)
        return parse_lookup_args(value)

    return {"lookup": Tool(validate=parse_lookup_args, run=run)}


def _tools_model(*batches: list[dict[str, Any]]) -> Callable[..., Awaitable[Any]]:
    """An async model that proposes `batches` in turn, then answers "done"."""
    turns = iter(batches)

    async def model(messages: Any, signal: Any = None) -> dict[str, Any]:
        batch = next(turns, None)
        return {"kind": "final", "text": "done"} if batch is None else {"kind": "tools", "calls": batch}

    return model


def _describe(error: BaseException) -> str:
    return f"it raised {type(error).__name__}: {error}" if str(error) else f"it raised {type(error).__name__}"


async def _bounded(run: Awaitable[Any], bound_s: float = RUN_BOUND_S) -> Any:
    try:
        return await asyncio.wait_for(run, bound_s)
    except TimeoutError:
        raise BehaviourFailed(
            f"the run to end within {bound_s:g} s", "it was still running, so the check gave up on it", "hung"
        ) from None


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
        return error
    text = getattr(result, "text", result)
    happened = f"the run returned {text!r}" + _ran_note(ran)
    raise BehaviourFailed(f"an error matching /{phrase}/", happened, _kind("no_error", ran) + clue)


def _kind(kind: str, ran: list[Any] | None) -> str:
    return "ran:" if ran else f"{kind}:"


def _ran_note(ran: list[Any] | None) -> str:
    return f", and run was called with {ran[0]!r}" if ran else ""


def _nothing_ran(ran: list[Any], clue: str) -> None:
    if ran:
        raise BehaviourFailed(
            "that no tool of the rejected batch ran", f"run was called with {ran[0]!r}", f"ran:{clue}"
        )


# -- the seven reference behaviours (seed 000) ------------------------------------


async def result_reaches_model(agent_loop: AgentLoop) -> None:
    """A tool result with the right call id reaches the model."""
    seen: list[Any] = []

    async def model(messages: Any, signal: Any = None) -> dict[str, Any]:
        if not seen:
            seen.append(None)
            return {"kind": "tools", "calls": [{"id": "c1", "name": "lookup", "args": {"id": "A"}}]}
        seen.append(dict(messages[-1]))
        return {"kind": "final", "text": "done"}

    result = await _returns(agent_loop("question", model, _lookup()), "the run to return 'done'")
    expected = {"role": "tool", "call_id": "c1", "content": '{"id":"A"}'}
    if len(seen) < 2:
        raise BehaviourFailed("the model to be asked again after the tool ran", "it was asked once", "no_second_turn")
    if seen[1] != expected:
        raise BehaviourFailed(f"the model's last message to be {expected}", f"it was {seen[1]}", "wrong_tool_message")
    if getattr(result, "text", None) != "done":
        raise BehaviourFailed("result.text == 'done'", f"result was {result!r}", "wrong_result")


async def unknown_tool(agent_loop: AgentLoop) -> None:
    """A bad name, including an inherited one, doesn't run a tool."""
    for name in ("deleteEverything", "toString", "__class__", "keys"):
        await _rejects(agent_loop("q", _tools_model([{"id": "1", "name": name, "args": {}}]), {}), "unknown tool", name)


async def invalid_args_never_run(agent_loop: AgentLoop) -> None:
    """An invalid schema doesn't call run."""
    ran: list[Any] = []
    model = _tools_model([{"id": "1", "name": "lookup", "args": {"id": 7}}])
    await _rejects(agent_loop("q", model, _lookup(ran)), "args", "invalid_args", ran)
    _nothing_ran(ran, "invalid_args")


async def tool_and_turn_budgets(agent_loop: AgentLoop) -> None:
    """The tool-call limit and the turn limit."""
    ids = iter(range(1, 1_000_000))

    async def model(messages: Any, signal: Any = None) -> dict[str, Any]:
        return {"kind": "tools", "calls": [{"id": f"c{next(ids)}", "name": "lookup", "args": {"id": "A"}}]}

    ran: list[Any] = []
    await _rejects(agent_loop("q", model, _lookup(ran), max_calls=0), "tool budget", "max_calls", ran)
    _nothing_ran(ran, "max_calls")
    await _rejects(agent_loop("q", model, _lookup(), max_turns=1), "turn budget", "max_turns")


async def duplicate_call_id(agent_loop: AgentLoop) -> None:
    """A repeated call id is rejected."""

    async def model(messages: Any, signal: Any = None) -> dict[str, Any]:
        return {"kind": "tools", "calls": [{"id": "same", "name": "lookup", "args": {"id": "A"}}]}

    await _rejects(agent_loop("q", model, _lookup()), "duplicate call id", "across_turns")


async def deadline_ignoring_signal(agent_loop: AgentLoop) -> None:
    """The deadline works even with a model that ignores the signal."""

    async def model(messages: Any, signal: Any = None) -> dict[str, Any]:
        return await asyncio.get_running_loop().create_future()  # never resolves

    await _rejects(agent_loop("q", model, {}, timeout_ms=15), "deadline", "async_model")


async def context_output_cancellation(agent_loop: AgentLoop) -> None:
    """Context, output and cancellation have hard limits."""

    def answer(text: str) -> Callable[..., Awaitable[dict[str, Any]]]:
        async def model(messages: Any, signal: Any = None) -> dict[str, Any]:
            return {"kind": "final", "text": text}

        return model

    await _rejects(agent_loop("too long", answer("a"), {}, max_chars=2), "context budget", "context")
    await _rejects(agent_loop("q", answer("too long"), {}, max_chars=2), "output budget", "output")
    controller = AbortController()
    controller.abort(RuntimeError("stop"))
    await _rejects(agent_loop("q", answer("ok"), {}, signal=controller.signal), "stop", "pre_aborted")


# -- the other rules of the contract ------------------------------------------------


async def history_shape(agent_loop: AgentLoop) -> None:
    """The history is the user message, each calls message with its results, then the answer."""
    model = _tools_model([{"id": "c1", "name": "lookup", "args": {"id": "A"}}])
    result = await _returns(agent_loop("question", model, _lookup()), "the run to return 'done'")
    expected = [
        {"role": "user", "content": "question"},
        {"role": "assistant", "calls": [{"id": "c1", "name": "lookup", "args": {"id": "A"}}]},
        {"role": "tool", "call_id": "c1", "content": '{"id":"A"}'},
        {"role": "assistant", "content": "done"},
    ]
    history = list(getattr(result, "history", None) or [])
    if history != expected:
        raise BehaviourFailed(f"result.history == {expected}", f"it was {history}", "history")


async def results_in_call_order(agent_loop: AgentLoop) -> None:
    """Each result follows its own call, in call order, within a batch."""
    batch = [{"id": f"c{n}", "name": "lookup", "args": {"id": letter}} for n, letter in ((1, "A"), (2, "B"), (3, "C"))]
    result = await _returns(agent_loop("q", _tools_model(batch), _lookup()), "the run to return 'done'")
    tool_messages = [m for m in getattr(result, "history", []) if m.get("role") == "tool"]
    pairs = [(m.get("call_id"), m.get("content")) for m in tool_messages]
    expected = [("c1", '{"id":"A"}'), ("c2", '{"id":"B"}'), ("c3", '{"id":"C"}')]
    if pairs != expected:
        raise BehaviourFailed(f"tool results (call_id, content) {expected}", f"they were {pairs}", "call_order")


async def compact_json_results(agent_loop: AgentLoop) -> None:
    """A tool's result goes back as compact JSON, like JavaScript's JSON.stringify."""

    async def run(value: Any) -> Any:
        return {"list": [1, 2.5, None, True], "city": "Kraków", "temperature": 18.0}

    seen: list[Any] = []

    async def model(messages: Any, signal: Any = None) -> dict[str, Any]:
        if not seen:
            seen.append(None)
            return {"kind": "tools", "calls": [{"id": "c1", "name": "weather", "args": {}}]}
        seen.append(messages[-1].get("content"))
        return {"kind": "final", "text": "done"}

    tools = {"weather": Tool(validate=lambda args: None, run=run)}
    await _returns(agent_loop("q", model, tools), "the run to return 'done'")
    expected = '{"list":[1,2.5,null,true],"city":"Kraków","temperature":18}'
    if seen[1:] != [expected]:
        got = seen[1] if len(seen) > 1 else "nothing"
        raise BehaviourFailed(f"the result content {expected}", f"it was {got}", "json_format")


async def batch_checked_whole(agent_loop: AgentLoop) -> None:
    """A batch with one bad call runs none of its calls, not even the good ones before it."""
    good = {"id": "c1", "name": "lookup", "args": {"id": "A"}}
    for bad, phrase, clue in (
        ({"id": "c2", "name": "deleteEverything", "args": {}}, "unknown tool", "half_batch_name"),
        ({"id": "c2", "name": "lookup", "args": {"id": 7}}, "args", "half_batch_args"),
        ({"id": "c1", "name": "lookup", "args": {"id": "B"}}, "duplicate call id", "half_batch_id"),
    ):
        ran: list[Any] = []
        await _rejects(agent_loop("q", _tools_model([good, bad]), _lookup(ran)), phrase, clue, ran)
        _nothing_ran(ran, clue)


async def budget_before_running(agent_loop: AgentLoop) -> None:
    """A batch larger than the tool calls left is refused before any of it runs."""
    ran: list[Any] = []
    batch = [{"id": f"c{n}", "name": "lookup", "args": {"id": "A"}} for n in (1, 2, 3)]
    await _rejects(agent_loop("q", _tools_model(batch), _lookup(ran), max_calls=2), "tool budget", "batch_budget", ran)
    _nothing_ran(ran, "batch_budget")


async def limits_reached_exactly(agent_loop: AgentLoop) -> None:
    """Reaching a limit exactly is allowed: only the step past it fails."""
    call = [{"id": "c1", "name": "lookup", "args": {"id": "A"}}]
    await _returns(
        agent_loop("q", _tools_model(call), _lookup(), max_turns=2, max_calls=1),
        "a run of exactly max_turns=2 turns and max_calls=1 call to succeed",
        "exact_turns_calls",
    )
    answer = _tools_model()
    await _returns(
        agent_loop("abcd", answer, {}, max_chars=4), "a 4-character input to fit max_chars=4", "exact_context"
    )
    await _returns(
        agent_loop("q", _tools_model(), {}, max_chars=4), "a 4-character answer to fit max_chars=4", "exact_output"
    )
    # ... and never one step more: exactly max_turns model calls, exactly max_calls tool runs
    turns: list[int] = []

    async def keeps_calling(messages: Any, signal: Any = None) -> dict[str, Any]:
        turns.append(len(turns) + 1)
        return {"kind": "tools", "calls": [{"id": f"c{len(turns)}", "name": "lookup", "args": {"id": "A"}}]}

    await _rejects(agent_loop("q", keeps_calling, _lookup(), max_turns=2), "turn budget", "past_turns")
    if len(turns) != 2:
        raise BehaviourFailed(
            "the model to be called exactly max_turns=2 times, then the turn budget",
            f"it was called {len(turns)} times",
            "past_turns",
        )
    turns.clear()
    ran: list[Any] = []
    await _rejects(agent_loop("q", keeps_calling, _lookup(ran), max_calls=2), "tool budget", "past_calls")
    if len(ran) != 2:
        raise BehaviourFailed(
            "exactly max_calls=2 tool runs, then the tool budget", f"{len(ran)} tool runs happened", "past_calls"
        )


async def context_counts_calls(agent_loop: AgentLoop) -> None:
    """The context is every message's content plus each calls message as compact JSON."""
    call = [{"id": "c1", "name": "lookup", "args": {"id": "A"}}]
    size = len("q") + len(json.dumps(call, separators=(",", ":"))) + len('{"id":"A"}')
    await _returns(
        agent_loop("q", _tools_model(call), _lookup(), max_chars=size),
        f"the run to fit max_chars={size} (1 + {size - 11} for the calls as compact JSON + 10 for the result)",
        "overcount",
    )
    await _rejects(agent_loop("q", _tools_model(call), _lookup(), max_chars=size - 1), "context budget", "count")


async def inherited_names_refused(agent_loop: AgentLoop) -> None:
    """Only exact keys of `tools` are tools: a defaultdict's default is not."""
    ran: list[Any] = []

    def conjured() -> Tool:
        async def run(value: Any) -> Any:
            ran.append(value)
            return "conjured"

        return Tool(validate=lambda args: None, run=run)

    tools: defaultdict[str, Tool] = defaultdict(conjured)
    model = _tools_model([{"id": "1", "name": "anything", "args": {}}])
    await _rejects(agent_loop("q", model, tools), "unknown tool", "defaultdict", ran)
    _nothing_ran(ran, "defaultdict")


async def args_copied_at_boundary(agent_loop: AgentLoop) -> None:
    """What was validated is what runs and what the history records, whatever the model does later."""
    proposed = {"id": "A"}
    ran: list[Any] = []

    def validate(args: Any) -> None:
        parse_lookup_args(args)
        proposed["id"] = "CHANGED"  # the model changes its dict after the check

    async def run(value: Any) -> Any:
        ran.append(dict(value))
        return {"ok": True}

    model = _tools_model([{"id": "c1", "name": "lookup", "args": proposed}])
    result = await _returns(agent_loop("q", model, {"lookup": Tool(validate=validate, run=run)}), "the run to succeed")
    if ran != [{"id": "A"}]:
        raise BehaviourFailed("run to get the args as validated, {'id': 'A'}", f"it got {ran}", "args_not_copied")
    recorded = [m["calls"][0]["args"] for m in getattr(result, "history", []) if "calls" in m]
    if recorded != [{"id": "A"}]:
        raise BehaviourFailed("the history to record {'id': 'A'}", f"it recorded {recorded}", "history_not_copied")


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


async def deadline_blocking_model(agent_loop: AgentLoop) -> None:
    """The deadline holds against a plain model that blocks its thread."""

    def model(messages: Any, signal: Any = None) -> dict[str, Any]:
        time.sleep(0.5)
        return {"kind": "final", "text": "too late"}

    started = time.perf_counter()
    await _rejects(agent_loop("q", model, {}, timeout_ms=15), "deadline", "blocking_model")
    elapsed = time.perf_counter() - started
    if elapsed > 0.3:
        raise BehaviourFailed(
            "the deadline error within 0.3 s of timeout_ms=15", f"it took {elapsed:.2f} s", "blocked_loop"
        )


async def deadline_covers_tools(agent_loop: AgentLoop) -> None:
    """The deadline covers tools too, even one that never returns."""

    async def hang(value: Any) -> Any:
        return await asyncio.get_running_loop().create_future()

    model = _tools_model([{"id": "c1", "name": "hang", "args": {}}])
    await _rejects(
        agent_loop("q", model, {"hang": Tool(validate=lambda args: None, run=hang)}, timeout_ms=15),
        "deadline",
        "hanging_tool",
    )


async def signal_aborted_on_deadline(agent_loop: AgentLoop) -> None:
    """When the deadline fires, the signal the model was given is aborted."""
    signals: list[Any] = []

    async def model(messages: Any, signal: Any = None) -> dict[str, Any]:
        signals.append(signal)
        return await asyncio.get_running_loop().create_future()

    await _rejects(agent_loop("q", model, {}, timeout_ms=15), "deadline", "signal_model")
    if not signals or not getattr(signals[0], "aborted", False):
        raise BehaviourFailed("the model's signal to be aborted", "it was not", "signal_not_aborted")


async def abort_midway(agent_loop: AgentLoop) -> None:
    """An abort from outside stops a run in flight promptly, with the abort's reason."""
    controller = AbortController()

    async def model(messages: Any, signal: Any = None) -> dict[str, Any]:
        asyncio.get_running_loop().call_later(0.01, controller.abort, RuntimeError("user pressed stop"))
        return await asyncio.get_running_loop().create_future()

    started = time.perf_counter()
    await _rejects(
        agent_loop("q", model, {}, timeout_ms=5000, signal=controller.signal), "user pressed stop", "abort_midway"
    )
    if time.perf_counter() - started > 0.5:
        raise BehaviourFailed("the run to stop within 0.5 s of the abort", "it took longer", "abort_slow")


async def tool_failures_reported(agent_loop: AgentLoop) -> None:
    """A tool that raises, or returns something that is not JSON, ends the run with a clear error."""

    async def broken(value: Any) -> Any:
        raise ValueError("disk on fire")

    async def returns_set(value: Any) -> Any:
        return {1, 2}

    for run, phrase, clue in ((broken, "disk on fire", "tool_raised"), (returns_set, "not JSON", "not_json")):
        model = _tools_model([{"id": "c1", "name": "t", "args": {}}])
        error = await _rejects(agent_loop("q", model, {"t": Tool(validate=lambda args: None, run=run)}), phrase, clue)
        if isinstance(error, (TypeError, KeyError)):
            raise BehaviourFailed("a clear error naming the tool", f"a bare {type(error).__name__}", f"bare:{clue}")


async def malformed_decisions(agent_loop: AgentLoop) -> None:
    """A decision or call of the wrong shape is refused as malformed."""
    for decision, clue in (
        ({"kind": "shout", "text": "hi"}, "malformed_kind"),
        ({"kind": "tools", "calls": []}, "malformed_no_calls"),
        ({"kind": "tools", "calls": [{"id": "c1", "name": "lookup"}]}, "malformed_call"),
        ({"kind": "final", "text": None}, "malformed_text"),
        ("just a string", "malformed_not_dict"),
    ):

        async def model(messages: Any, signal: Any = None, decision: Any = decision) -> Any:
            return decision

        await _rejects(agent_loop("q", model, _lookup()), "malformed", clue)


async def repeats_forbidden(agent_loop: AgentLoop) -> None:
    """With forbid_repeats, the same tool with the same args is refused the second time."""
    ran: list[Any] = []
    same = [{"id": "c1", "name": "lookup", "args": {"id": "A"}}], [{"id": "c2", "name": "lookup", "args": {"id": "A"}}]
    model = _tools_model(*same)
    await _rejects(
        agent_loop("q", model, _lookup(ran), forbid_repeats=True), "repeated tool call without progress", "repeats"
    )
    if len(ran) != 1:
        raise BehaviourFailed(
            "the first call to run and the repeat not to", f"run was called {len(ran)} times", "repeats"
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
    _behaviour(malformed_decisions, "checks"),
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


def get(key: str) -> Behaviour:
    """The behaviour named `key`; a ConfigError lists the names if there is none."""
    for behaviour in ALL:
        if behaviour.key == key:
            return behaviour
    raise ConfigError(f"no behaviour {key!r}; the behaviours are: {', '.join(b.key for b in ALL)}")


def select(step: str | None = None, reference_only: bool = False) -> Sequence[Behaviour]:
    """The behaviours of one workbook step (the exercise's five steps if None), optionally only the seven."""
    if step is not None and step not in STEPS:
        raise ConfigError(f"no step {step!r}; the steps are: {', '.join(STEPS)}")
    wanted = EXERCISE_STEPS if step is None else (step,)
    return [b for b in ALL if b.step in wanted and (b.reference or not reference_only)]


async def verify(key: str, agent_loop: AgentLoop) -> None:
    """Run one behaviour against `agent_loop`: print a one-line verdict, or raise if it fails.

    This is the check cell of the notebooks: `await verify("unknown_tool", agent_loop)`.
    """
    behaviour = get(key)
    await behaviour(agent_loop)
    print(f"✓ {behaviour.title}")


__all__ = ["ALL", "REFERENCE", "RULES", "STEPS", "Behaviour", "BehaviourFailed", "get", "select", "verify"]


# =====================================================================================================================
# The "writes" step (workbook 6): approval, the write budget, the idempotency key, and a stopped write that settles.
# A self-contained block with helpers of its own (prefixed _w): it only extends STEPS, RULES, ALL and __all__.
# =====================================================================================================================

from agentlab.tools import Approval  # noqa: E402 (kept with the block it serves)


class _RolledBack(Exception):
    """What a write tool raises when it was stopped and undid its work: `rolled_back` says so to the loop."""

    rolled_back = True


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
    return {"id": key, "name": "reserve", "args": {"book": book, "quantity": quantity}}


def _w_read(key: str, book: str) -> dict[str, Any]:
    return {"id": key, "name": "lookup", "args": {"id": book}}


def _w_parse_reservation(args: Any) -> tuple[str, int]:
    """The reserve tool's validate: it parses the args into a (book, quantity) pair, which is what run gets."""
    if not isinstance(args, dict) or sorted(args) != ["book", "quantity"]:
        raise ValueError('expected {"book": <id>, "quantity": <1 to 5>}')
    if not isinstance(args["quantity"], int) or not 0 < args["quantity"] <= 5:
        raise ValueError("quantity must be a whole number from 1 to 5")
    return str(args["book"]), int(args["quantity"])


def _w_shop(events: list[tuple[Any, ...]], *, slow_s: float = 0.0, settle_s: float | None = None) -> dict[str, Tool]:
    """A lookup (reads) and a reserve (writes) that log what they are given to `events`.

    reserve is async and takes `slow_s` to write; with `settle_s`, it instead holds its transaction open until the
    run is stopped, then takes `settle_s` to roll back and raises _RolledBack. A sync twin, `reserve_now`, writes
    at once on whatever thread the loop runs it.
    """

    async def lookup(value: Any, signal: Any = None) -> Any:
        events.append(("read", value.get("id") if isinstance(value, dict) else value))
        return {"book": value.get("id") if isinstance(value, dict) else None, "on_hand": 3}

    async def reserve(value: Any, signal: Any = None, call: Any = None) -> Any:
        key = getattr(call, "id", call)
        events.append(("start", key, value))
        if settle_s is not None:
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
    """Each write is approved just before it runs, in call order; it runs with its own call, whose id is the key."""
    for sync in (False, True):
        events: list[tuple[Any, ...]] = []
        batch = [_w_reserve("w_10", "A", 2), _w_read("r_1", "A"), {**_w_reserve("w_1", "C"), "name": "reserve_now"}]
        model = _w_model(batch, [_w_reserve("w_100", "E", 1)])
        policy = _w_policy(events, True, Approval(True), sync=sync)
        kind = "a plain" if sync else "an async"
        outcome = await _w_run(agent_loop("reserve", model, _w_shop(events, slow_s=0.02), approve=policy))
        _w_returned(outcome, f"the run, with {kind} policy that approves every write, to return 'done'", "raised")
        keys = [event[1] for event in events if event[0] == "start"]
        if set(keys) - {"w_10", "w_1", "w_100"}:
            raise BehaviourFailed(
                "each write's run to get its ToolCall as its third argument, whose id is the call's own id (the "
                "write's idempotency key): run(value, signal, call)",
                f"the writes' runs were given, as their call, {keys}",
                "no_key",
            )
        order = [(event[0], event[1]) for event in events]
        expected = [
            ("approve", "w_10"),
            ("start", "w_10"),
            ("end", "w_10"),
            ("read", "A"),
            ("approve", "w_1"),
            ("start", "w_1"),
            ("end", "w_1"),
            ("approve", "w_100"),
            ("start", "w_100"),
            ("end", "w_100"),
        ]
        if order != expected:
            if [e for e in order if e[0] == "approve"] != [e for e in expected if e[0] == "approve"]:
                clue = "approve_ids"
            elif order[:2] != expected[:2] or order.index(("approve", "w_1")) < order.index(("end", "w_10")):
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
        if asked["w_10"][2:] != ("reserve", '{"book": "A", "quantity": 2}'):
            raise BehaviourFailed(
                "the policy to be shown the call: its id, its tool name and the args the model proposed",
                f"it was shown the name {asked['w_10'][2]!r} and the args {asked['w_10'][3]}",
                "approve_call",
            )
        given = {event[1]: event[2] for event in events if event[0] == "start"}
        if given.get("w_10") != ("A", 2) or given.get("w_1") != ("C", 1):
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
    for turn, key, reason in ((1, "w_7", "one per customer"), (2, "w_70", None)):
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
        ("three writes at once, max_writes=2", [[_w_read("r_1", "A"), *(_w_reserve(f"w_{n}", "A") for n in "123")]]),
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
    outcome = await _w_run(
        agent_loop("go", model, _w_shop(events, settle_s=0.05), approve=_w_policy(events), timeout_ms=40)
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

    async def stop_soon(call: Any, signal: Any = None) -> bool:
        asyncio.get_running_loop().call_later(0.03, controller.abort, reason)
        return True

    model = _w_model([_w_reserve("w_11", "B")])
    outcome = await _w_run(
        agent_loop("go", model, _w_shop(events, settle_s=0.05), approve=stop_soon, signal=controller.signal)
    )
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
# The exercise is the five steps above: `select()`, and so `check(agent_loop)` and the CLI without --step, grade
# those. Later steps extend it and are checked by name (`check(agent_loop, step="writes")`).
EXERCISE_STEPS = STEPS
STEPS = (*STEPS, "writes")
RULES = (*RULES, *WRITES)
ALL = (*ALL, *WRITES)
__all__ = [*__all__, "EXERCISE_STEPS", "WRITES"]
# ============================================ end of the "writes" step ===============================================
