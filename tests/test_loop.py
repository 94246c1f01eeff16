"""The contract of `agent_loop`, rule by rule (the behaviours in agentlab.behaviours cover the rest)."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections import UserDict

import pytest

import agentlab
from agentlab import (
    AbortController,
    AbortError,
    AgentError,
    ConfigError,
    ContextBudgetError,
    DeadlineError,
    DuplicateCallIdError,
    ModelError,
    ModelOutputError,
    OutputBudgetError,
    RepeatedCallError,
    Tool,
    ToolArgsError,
    ToolBudgetError,
    ToolCall,
    ToolError,
    TurnBudgetError,
    UnknownToolError,
    agent_loop,
    agent_loop_sync,
    parse_lookup_args,
)
from agentlab.lab.examples import lookup_tools
from agentlab.lab.fakes import Blocks, KeepsCalling, NeverAnswers, Scripted, call, calls, final
from agentlab.loop import CANCEL_GRACE_MS, context_size

LOOKUP_A = call("lookup", {"id": "A"}, "c1")


def echo_tools(ran: list | None = None) -> dict[str, Tool]:
    async def run(value):
        if ran is not None:
            ran.append(value)
        return value

    return {"lookup": Tool(validate=parse_lookup_args, run=run)}


# -- results, history and usage ---------------------------------------------------


async def test_a_run_returns_text_history_and_usage() -> None:
    result = await agent_loop("question", Scripted(calls(LOOKUP_A), final("done")), lookup_tools())
    assert result.text == "done"
    assert [m["role"] for m in result.history] == ["user", "assistant", "tool", "assistant"]
    assert (result.usage.turns, result.usage.calls) == (2, 1)
    assert result.usage.chars == sum(context_size(m) for m in result.history)
    assert 0 <= result.usage.elapsed_ms < 5000
    assert result.limits.max_turns == 6 and result.limits.timeout_ms == 5000


def test_defaults_are_the_exercise_defaults() -> None:
    import inspect

    options = inspect.signature(agent_loop).parameters
    defaults = {name: options[name].default for name in ("max_turns", "max_calls", "timeout_ms", "max_chars")}
    assert defaults == {"max_turns": 6, "max_calls": 8, "timeout_ms": 5000, "max_chars": 50_000}
    assert options["signal"].default is None and options["forbid_repeats"].default is False


async def test_the_context_counts_content_and_calls_as_compact_json() -> None:
    result = await agent_loop("q", Scripted(calls(LOOKUP_A), final("ok")), echo_tools())
    calls_json = '[{"id":"c1","name":"lookup","args":{"id":"A"}}]'
    assert result.usage.chars == len("q") + len(calls_json) + len('{"id":"A"}') + len("ok")


# -- sync and async callees ---------------------------------------------------------


async def test_a_sync_model_and_sync_tool_run_off_the_event_loop_thread() -> None:
    threads = []

    def model(messages, signal):
        threads.append(threading.get_ident())
        return final("done") if len(messages) > 1 else calls(LOOKUP_A)

    def run(value, signal):
        threads.append(threading.get_ident())
        return {"ok": True}

    result = await agent_loop("q", model, {"lookup": Tool(validate=parse_lookup_args, run=run)})
    assert result.text == "done"
    assert len(threads) == 3 and threading.get_ident() not in threads


async def test_a_callable_that_returns_an_awaitable_is_awaited() -> None:
    async def answer():
        return final("awaited")

    result = await agent_loop("q", lambda messages, signal: answer(), {})
    assert result.text == "awaited"


async def test_callees_may_take_fewer_parameters_like_in_javascript() -> None:
    seen = []

    async def model():  # takes neither messages nor signal
        return final("fine") if seen else calls(LOOKUP_A)

    async def run(value, signal, context):
        seen.append((value, signal.aborted, context))
        return "ok"

    result = await agent_loop("q", model, {"lookup": Tool(validate=parse_lookup_args, run=run)})
    assert result.text == "fine"
    assert seen == [({"id": "A"}, False, ToolCall("c1", "lookup", {"id": "A"}))]


async def test_run_gets_what_validate_returned_or_else_the_args() -> None:
    got = []

    async def run(value):
        got.append(value)
        return None

    tools = {
        "parsed": Tool(validate=lambda args: ("parsed", args["n"]), run=run),
        "checked": Tool(validate=lambda args: None, run=run),
    }
    batch = calls(call("parsed", {"n": 1}, "a"), call("checked", {"n": 2}, "b"))
    result = await agent_loop("q", Scripted(batch, final("ok")), tools)
    assert got == [("parsed", 1), {"n": 2}]
    assert result.history[2]["content"] == "null"


# -- the model's snapshot -----------------------------------------------------------


async def test_the_model_gets_a_read_only_snapshot_of_fixed_length() -> None:
    snapshots = []

    async def model(messages, signal):
        snapshots.append(messages)
        with pytest.raises(AttributeError):
            messages.append({"role": "user", "content": "x"})
        with pytest.raises(TypeError):
            messages[0] = {}
        messages[0]["content"] = "changed"  # a copy: harmless
        return final("done") if len(messages) > 1 else calls(LOOKUP_A)

    result = await agent_loop("question", model, echo_tools())
    assert result.history[0]["content"] == "question"
    assert [len(s) for s in snapshots] == [1, 3]  # the first snapshot did not grow
    assert snapshots[1][-1] == {"role": "tool", "call_id": "c1", "content": '{"id":"A"}'}
    assert snapshots[1] == result.history[:3]
    assert snapshots[1][1:] == result.history[1:3]


async def test_args_the_model_mutates_later_change_nothing() -> None:
    proposed = {"id": "A"}
    ran = []

    def model(messages, signal):
        if len(messages) == 1:
            return calls({"id": "c1", "name": "lookup", "args": proposed})
        proposed["id"] = "Z"  # too late: the loop has its own copy
        return final("done")

    result = await agent_loop("q", model, echo_tools(ran))
    assert ran == [{"id": "A"}]
    assert result.history[1]["calls"][0]["args"] == {"id": "A"}


async def test_a_tool_that_mutates_its_args_does_not_change_the_history() -> None:
    async def run(value):
        value["id"] = "mutated"
        return "ok"

    tools = {"lookup": Tool(validate=lambda args: None, run=run)}
    result = await agent_loop("q", Scripted(calls(LOOKUP_A), final("done")), tools)
    assert result.history[1]["calls"][0]["args"] == {"id": "A"}


# -- checks before each model call, in order ---------------------------------------


async def test_before_a_model_call_the_signal_comes_first() -> None:
    controller = AbortController()
    controller.abort(RuntimeError("stop"))
    model = Scripted(final("never"))
    with pytest.raises(RuntimeError, match="stop") as raised:
        await agent_loop("long input", model, {}, signal=controller.signal, timeout_ms=0, max_turns=0, max_chars=0)
    assert raised.value is controller.signal.reason
    assert model.turns == 0


async def test_then_the_deadline_then_the_turn_budget_then_the_context() -> None:
    with pytest.raises(DeadlineError, match="deadline"):
        await agent_loop("long input", Scripted(final("x")), {}, timeout_ms=0, max_turns=0, max_chars=0)
    with pytest.raises(TurnBudgetError, match="turn budget"):
        await agent_loop("long input", Scripted(final("x")), {}, max_turns=0, max_chars=0)
    with pytest.raises(ContextBudgetError, match="context budget"):
        await agent_loop("long input", Scripted(final("x")), {}, max_chars=0)


async def test_a_tool_result_that_blows_the_context_stops_the_next_model_call() -> None:
    async def big(value):
        return "x" * 100

    model = Scripted(calls(call("big", {}, "c1")), final("never"))
    with pytest.raises(ContextBudgetError) as raised:
        await agent_loop("q", model, {"big": Tool(validate=lambda a: None, run=big)}, max_chars=100)
    assert model.turns == 1
    assert raised.value.history[-1]["call_id"] == "c1"


async def test_an_output_over_max_chars_fails_but_exactly_max_chars_is_fine() -> None:
    assert (await agent_loop("q", Scripted(final("abc")), {}, max_chars=3)).text == "abc"
    with pytest.raises(OutputBudgetError, match="output budget"):
        await agent_loop("q", Scripted(final("abcd")), {}, max_chars=3)


# -- the batch is checked whole, in order --------------------------------------------


@pytest.mark.parametrize(
    ("decision", "error"),
    [
        ({"kind": "tools", "calls": []}, ModelOutputError),
        (calls(call("nope", {}, "a"), call("nope", {}, "b")), ToolBudgetError),  # budget before names
        (calls({"id": 1, "name": "lookup", "args": {}}), ModelOutputError),
        (calls(LOOKUP_A, call("nope", {"id": 7}, "c1")), DuplicateCallIdError),  # ids before names
        (calls(call("nope", {"id": 7}, "c1")), UnknownToolError),  # names before args
        (calls(LOOKUP_A, call("lookup", {"id": 7}, "c2")), ToolArgsError),
    ],
)
async def test_batch_checks_come_in_order_and_nothing_runs(decision, error) -> None:
    ran: list = []
    with pytest.raises(error) as raised:
        await agent_loop("q", Scripted(decision), echo_tools(ran), max_calls=1 if error is ToolBudgetError else 8)
    assert ran == []
    assert raised.value.rejected == decision


@pytest.mark.parametrize(
    ("args", "says"),
    [
        ('{"id": "A",', "text that is not JSON (Expecting property name enclosed in double quotes: line 1 column 12"),
        ('{"id": "A"}', "a JSON object sent as text (decode it into a dict)"),
        ("[1, 2]", "JSON text of a list, not of an object"),
        (["A"], "the args must be a dict, got ['A'] (list); nothing"),
        ("x" * 200_000, "(str); nothing of this batch ran"),  # too big to parse only to say why
    ],
)
async def test_args_sent_as_text_say_why_they_are_refused(args, says) -> None:
    """A model's commonest mistake, broken JSON text, is named with the parser's position: it can go back to it."""
    with pytest.raises(ModelOutputError) as raised:
        await agent_loop("q", Scripted(calls({"id": "c1", "name": "lookup", "args": args})), echo_tools())
    assert "malformed call #1: the args must be a dict" in str(raised.value) and says in str(raised.value)


async def test_repeats_are_checked_before_validate_when_forbidden() -> None:
    ran: list = []
    model = Scripted(calls(LOOKUP_A), calls(call("lookup", {"id": "A"}, "c2")))
    with pytest.raises(RepeatedCallError, match="repeated tool call without progress"):
        await agent_loop("q", model, echo_tools(ran), forbid_repeats=True)
    assert ran == [{"id": "A"}]
    # the same args in another key order are the same call
    model = Scripted(calls(call("t", {"a": 1, "b": 2}, "1")), calls(call("t", {"b": 2, "a": 1}, "2")))
    with pytest.raises(RepeatedCallError):
        await agent_loop("q", model, {"t": Tool(validate=lambda a: None, run=lambda v: 1)}, forbid_repeats=True)


async def test_repeats_are_allowed_by_default() -> None:
    model = Scripted(calls(LOOKUP_A), calls(call("lookup", {"id": "A"}, "c2")), final("ok"))
    assert (await agent_loop("q", model, echo_tools())).text == "ok"


@pytest.mark.parametrize("name", ["toString", "__class__", "__init__", "keys", "get", "items", "__getitem__"])
async def test_only_exact_keys_are_tools(name) -> None:
    with pytest.raises(UnknownToolError, match="unknown tool"):
        await agent_loop("q", Scripted(calls(call(name, {}, "1"))), echo_tools())


async def test_mapping_types_that_conjure_values_are_snapshotted_to_their_real_keys() -> None:
    class Conjuring(UserDict):
        def __missing__(self, key):
            return Tool(validate=lambda a: None, run=lambda v: "conjured")

    with pytest.raises(UnknownToolError):
        await agent_loop("q", Scripted(calls(call("ghost", {}, "1"))), Conjuring())


@pytest.mark.parametrize(
    "decision",
    [
        None,
        "final",
        ["kind", "final"],
        {"kind": "final"},
        {"kind": "final", "text": 3},
        {"kind": "final", "text": "x", "extra": 1},
        {"kind": "tools", "calls": "lookup"},
        {"kind": "tools", "calls": [None]},
        {"kind": "tools", "calls": [{"id": "", "name": "lookup", "args": {}}]},
        {"kind": "tools", "calls": [{"id": "1", "name": 5, "args": {}}]},
        {"kind": "tools", "calls": [{"id": "1", "name": "lookup", "args": []}]},
        {"kind": "tools", "calls": [{"id": "1", "name": "lookup", "args": {"x": {1, 2}}}]},
        {"kind": "tools", "calls": [{"id": "1", "name": "lookup", "args": {"x": float("nan")}}]},
        {"kind": "tools", "calls": [{"id": "1", "name": "lookup", "args": {1: "x"}}]},
    ],
)
async def test_malformed_decisions_are_refused(decision) -> None:
    with pytest.raises(ModelOutputError, match="malformed"):
        await agent_loop("q", Scripted(decision), echo_tools())


# -- failures of models and tools ------------------------------------------------------


async def test_a_tool_that_raises_ends_the_run_with_tool_error_and_the_cause() -> None:
    def run(value):
        raise KeyError("missing")

    with pytest.raises(ToolError) as raised:
        await agent_loop("q", Scripted(calls(LOOKUP_A)), {"lookup": Tool(validate=parse_lookup_args, run=run)})
    assert isinstance(raised.value.__cause__, KeyError)
    assert "lookup raised KeyError" in str(raised.value)
    assert raised.value.history[-1]["role"] == "assistant"  # the calls were recorded before running


@pytest.mark.parametrize("result", [{1, 2}, float("nan"), object(), {"ok": b"bytes"}, {3: "int key"}])
async def test_a_tool_returning_non_json_ends_with_tool_error(result) -> None:
    tools = {"lookup": Tool(validate=parse_lookup_args, run=lambda v: result)}
    with pytest.raises(ToolError, match="not JSON"):
        await agent_loop("q", Scripted(calls(LOOKUP_A)), tools)


async def test_a_model_that_raises_ends_with_model_error_and_the_cause() -> None:
    async def model(messages, signal):
        return messages[99]  # IndexError

    with pytest.raises(ModelError) as raised:
        await agent_loop("q", model, {})
    assert isinstance(raised.value.__cause__, IndexError)


async def test_an_agent_error_raised_by_the_model_keeps_its_class_and_gets_the_history() -> None:
    async def model(messages, signal):
        raise ModelOutputError("malformed: my adapter could not parse the reply")

    with pytest.raises(ModelOutputError) as raised:
        await agent_loop("q", model, {})
    assert raised.value.history == [{"role": "user", "content": "q"}]


async def test_a_spontaneous_cancelled_error_from_the_model_is_a_model_error() -> None:
    async def model(messages, signal):
        raise asyncio.CancelledError()

    with pytest.raises(ModelError):
        await agent_loop("q", model, {})


def test_system_exit_from_a_tool_passes_through() -> None:
    def run(value):
        raise SystemExit(3)

    with pytest.raises(SystemExit):
        agent_loop_sync("q", Scripted(calls(LOOKUP_A)), {"lookup": Tool(validate=parse_lookup_args, run=run)})


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"input": 5}, "input must be a string"),
        ({"model": "gpt"}, "model must be a function"),
        ({"tools": [1]}, "tools must be a dict"),
        ({"tools": {"t": {"validate": print, "run": print}}}, "must be Tool"),
        ({"tools": {1: Tool(validate=print, run=print)}}, "tool names must be strings"),
        ({"max_turns": -1}, "max_turns"),
        ({"max_calls": 1.5}, "max_calls"),
        ({"max_chars": True}, "max_chars"),
        ({"timeout_ms": float("inf")}, "timeout_ms"),
        ({"signal": object()}, "AbortSignal"),
    ],
)
async def test_unusable_arguments_raise_config_error(arguments, message) -> None:
    base = {"input": "q", "model": Scripted(final("x")), "tools": {}}
    base.update(arguments)
    with pytest.raises(ConfigError, match=message):
        await agent_loop(base.pop("input"), base.pop("model"), base.pop("tools"), **base)


def test_a_tool_needs_two_plain_functions() -> None:
    with pytest.raises(ConfigError):
        Tool(validate=None, run=print)

    async def async_validate(args):
        return None

    with pytest.raises(ConfigError, match="plain function"):
        Tool(validate=async_validate, run=print)


# -- errors carry what happened -------------------------------------------------------------


def test_every_error_is_an_agent_error_exported_from_the_package() -> None:
    names = [n for n in agentlab.__all__ if n.endswith("Error")]
    assert len(names) == 20
    for name in names:
        assert issubclass(getattr(agentlab, name), AgentError)


async def test_an_error_carries_a_copy_of_the_history_and_the_usage() -> None:
    with pytest.raises(TurnBudgetError) as raised:
        await agent_loop("q", KeepsCalling(), echo_tools(), max_turns=2)
    error = raised.value
    assert [m["role"] for m in error.history] == ["user", "assistant", "tool", "assistant", "tool"]
    assert (error.usage.turns, error.usage.calls) == (2, 2)
    assert error.value == 2 and error.limit == "max_turns"
    assert error.limits.max_turns == 2


# -- the deadline -------------------------------------------------------------------------


async def test_the_deadline_fires_promptly_against_a_model_that_ignores_the_signal() -> None:
    model = NeverAnswers()
    started = time.perf_counter()
    with pytest.raises(DeadlineError, match="deadline"):
        await agent_loop("q", model, {}, timeout_ms=30)
    elapsed = (time.perf_counter() - started) * 1000
    assert 29 <= elapsed < 30 + 1500  # generous: a loaded CI machine
    assert model.cancelled  # the abandoned task was cancelled and its finally ran


async def test_the_deadline_holds_against_a_blocking_sync_model(no_leaked_threads) -> None:
    started = time.perf_counter()
    with pytest.raises(DeadlineError):
        await agent_loop("q", Blocks(1.0), {}, timeout_ms=30)
    assert (time.perf_counter() - started) < 0.9  # not the model's 1 s (generous: a loaded CI machine)


async def test_the_deadline_covers_a_blocking_sync_tool() -> None:
    def run(value):
        time.sleep(1.0)
        return "late"

    started = time.perf_counter()
    with pytest.raises(DeadlineError) as raised:
        await agent_loop(
            "q", Scripted(calls(LOOKUP_A)), {"lookup": Tool(validate=parse_lookup_args, run=run)}, timeout_ms=30
        )
    assert (time.perf_counter() - started) < 0.9  # not the tool's 1 s
    assert raised.value.usage.calls == 1


async def test_on_the_deadline_the_signal_is_aborted_with_the_deadline_error() -> None:
    signals = []

    async def model(messages, signal):
        signals.append(signal)
        await asyncio.sleep(10)

    with pytest.raises(DeadlineError) as raised:
        await agent_loop("q", model, {}, timeout_ms=200)  # time enough to reach the model on a loaded machine
    assert signals[0].aborted and signals[0].reason is raised.value


async def test_a_callee_that_swallows_cancellation_is_abandoned_after_the_grace() -> None:
    stop = asyncio.Event()

    async def stubborn(messages, signal):
        while not stop.is_set():
            with contextlib.suppress(asyncio.CancelledError):  # refuses to be cancelled
                await asyncio.sleep(0.005)
        return final("never seen")

    started = time.perf_counter()
    with pytest.raises(DeadlineError):
        await agent_loop("q", stubborn, {}, timeout_ms=20)
    assert (time.perf_counter() - started) * 1000 < 20 + CANCEL_GRACE_MS + 1500
    stop.set()
    await asyncio.sleep(0.02)


# -- aborting from outside ------------------------------------------------------------------


async def test_an_abort_in_flight_raises_its_own_reason_promptly() -> None:
    controller = AbortController()
    reason = RuntimeError("stop")
    asyncio.get_running_loop().call_later(0.02, controller.abort, reason)
    started = time.perf_counter()
    with pytest.raises(RuntimeError) as raised:
        await agent_loop("q", NeverAnswers(), {}, signal=controller.signal)
    assert raised.value is reason
    assert (time.perf_counter() - started) < 2.0  # NeverAnswers never does: only the abort ends it


async def test_an_abort_from_another_thread_stops_a_blocking_model() -> None:
    controller = AbortController()
    threading.Timer(0.02, controller.abort).start()
    with pytest.raises(AbortError, match="aborted") as raised:
        await agent_loop("q", Blocks(1.0), {}, signal=controller.signal)
    assert raised.value.history == [{"role": "user", "content": "q"}]


async def test_cancelling_the_caller_cancels_the_run_and_aborts_its_signal() -> None:
    signals = []

    async def model(messages, signal):
        signals.append(signal)
        await asyncio.sleep(10)

    task = asyncio.ensure_future(agent_loop("q", model, {}))
    await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert signals[0].aborted


# -- agent_loop_sync ---------------------------------------------------------------------------


def test_agent_loop_sync_works_from_plain_code() -> None:
    assert agent_loop_sync("q", Scripted(calls(LOOKUP_A), final("done")), echo_tools()).text == "done"


async def test_agent_loop_sync_works_inside_a_running_event_loop() -> None:
    result = agent_loop_sync("q", Scripted(final("from a cell")), {})  # as in a Jupyter cell
    assert result.text == "from a cell"


def test_agent_loop_sync_returns_on_time_with_a_blocking_model() -> None:
    started = time.perf_counter()
    with pytest.raises(DeadlineError):
        agent_loop_sync("q", Blocks(3), {}, timeout_ms=30)
    assert time.perf_counter() - started < 2.0  # not the model's 3 s


def test_agent_loop_sync_passes_the_callers_abort_through() -> None:
    controller = AbortController()
    threading.Timer(0.02, controller.abort, ("stopped by a test",)).start()
    with pytest.raises(AbortError, match="stopped by a test"):
        agent_loop_sync("q", NeverAnswers(), {}, signal=controller.signal)


def test_an_abandoned_blocking_model_does_not_hold_interpreter_exit() -> None:
    import subprocess
    import sys

    script = (
        "from agentlab import agent_loop_sync, DeadlineError\n"
        "from agentlab.lab.fakes import Blocks\n"
        "try:\n"
        "    agent_loop_sync('q', Blocks(60), {}, timeout_ms=20)\n"
        "except DeadlineError:\n"
        "    print('deadline')\n"
    )
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=30)
    assert done.stdout.strip() == "deadline", done.stderr
    assert time.perf_counter() - started < 10
