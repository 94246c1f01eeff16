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
# Steps beyond the workbooks (each appends itself at the end of this file): asked for by name, never part of
# "every step", so that a loop written for the workbooks is not failed for an option it was never asked for.
EXTRA_STEPS: tuple[str, ...] = ()

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
    """The behaviours of one step (every workbook step if None), optionally only the seven."""
    if step is not None and step not in STEPS + EXTRA_STEPS:
        raise ConfigError(f"no step {step!r}; the steps are: {', '.join(STEPS + EXTRA_STEPS)}")
    wanted = STEPS if step is None else (step,)
    return [b for b in ALL if b.step in wanted and (b.reference or not reference_only)]


async def verify(key: str, agent_loop: AgentLoop) -> None:
    """Run one behaviour against `agent_loop`: print a one-line verdict, or raise if it fails.

    This is the check cell of the notebooks: `await verify("unknown_tool", agent_loop)`.
    """
    behaviour = get(key)
    await behaviour(agent_loop)
    print(f"✓ {behaviour.title}")


__all__ = [
    "ALL",
    "EXTRA_STEPS",
    "REFERENCE",
    "RULES",
    "STEPS",
    "Behaviour",
    "BehaviourFailed",
    "get",
    "select",
    "verify",
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
