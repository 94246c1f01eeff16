"""Bugs the adversaries found (tests/test_properties.py, `make soak`), each kept as its shrunk example."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import time
import warnings

import pytest

from agentlab import (
    AbortController,
    AbortError,
    DeadlineError,
    ModelError,
    ModelOutputError,
    Tool,
    ToolArgsError,
    ToolError,
    agent_loop,
)
from agentlab.jsonc import NotJSONError, compact_json, copy_json
from agentlab.lab.fakes import Scripted, call, calls, final
from agentlab.testing.adversaries import BadRepr, BadStrError, HostileKey


def accept_all() -> dict[str, Tool]:
    return {"t": Tool(validate=lambda args: None, run=lambda value: "ok")}


# -- a hostile object's str or repr must not escape as a bare exception ----------------------------


async def test_a_model_raising_an_exception_whose_str_raises_is_a_model_error() -> None:
    async def model(messages, signal):
        raise BadStrError()

    with pytest.raises(ModelError, match="BadStrError: \\(a BadStrError that cannot be shown\\)"):
        await agent_loop("q", model, {})


async def test_a_validate_raising_an_exception_whose_str_raises_is_a_tool_args_error() -> None:
    def validate(args):
        raise BadStrError()

    with pytest.raises(ToolArgsError, match="invalid args"):
        await agent_loop("q", Scripted(calls(call("t", {}, "c1"))), {"t": Tool(validate=validate, run=print)})


async def test_a_tool_raising_an_exception_whose_str_raises_is_a_tool_error() -> None:
    def run(value):
        raise BadStrError()

    with pytest.raises(ToolError, match="raised BadStrError"):
        await agent_loop("q", Scripted(calls(call("t", {}, "c1"))), {"t": Tool(validate=lambda a: None, run=run)})


@pytest.mark.parametrize(
    "decision",
    [BadRepr(), {"kind": "final", "text": BadRepr()}, {"kind": "tools", "calls": [{HostileKey(): 1}]}],
)
async def test_a_decision_whose_repr_raises_is_malformed(decision) -> None:
    with pytest.raises(ModelOutputError, match="malformed") as raised:
        await agent_loop("q", Scripted(decision), accept_all())
    assert isinstance(raised.value.rejected, str)  # what could be shown of it


async def test_a_decision_nested_deeper_than_repr_can_go_is_malformed() -> None:
    deep: list = []
    for _ in range(5000):
        deep = [deep]
    with pytest.raises(ModelOutputError, match="nested more than"):
        await agent_loop("q", Scripted(deep), accept_all())


async def test_a_tool_result_with_a_hostile_key_is_a_tool_error() -> None:
    tools = {"t": Tool(validate=lambda a: None, run=lambda value: {HostileKey(): 1})}
    with pytest.raises(ToolError, match="not JSON"):
        await agent_loop("q", Scripted(calls(call("t", {}, "c1"))), tools)


# -- an int too long to write -------------------------------------------------------------------------


def test_an_int_with_thousands_of_digits_is_not_json() -> None:
    with pytest.raises(NotJSONError, match="thousands of digits"):
        copy_json({"n": 10**5000})
    with pytest.raises(NotJSONError, match=r"not JSON .* at \.n"):
        compact_json({"n": 10**5000})
    assert compact_json(10**4000) == "1" + "0" * 4000


async def test_args_with_a_huge_int_are_malformed_not_a_bare_value_error() -> None:
    with pytest.raises(ModelOutputError, match="thousands of digits"):
        await agent_loop("q", Scripted(calls(call("t", {"n": 10**5000}, "c1"))), accept_all())


async def test_a_tool_returning_a_huge_int_is_a_tool_error() -> None:
    tools = {"t": Tool(validate=lambda a: None, run=lambda value: 10**5000)}
    with pytest.raises(ToolError, match="not JSON"):
        await agent_loop("q", Scripted(calls(call("t", {}, "c1"))), tools)


# -- a sync model raising StopIteration ---------------------------------------------------------------


async def test_a_sync_model_raising_stop_iteration_is_a_model_error_at_once() -> None:
    def model(messages, signal):
        raise StopIteration

    started = time.perf_counter()
    with pytest.raises(ModelError, match="StopIteration"):  # it hung until the deadline before
        await agent_loop("q", model, {}, timeout_ms=2000)
    assert time.perf_counter() - started < 1


# -- an abandoned task ------------------------------------------------------------------------------


async def test_a_task_abandoned_after_the_grace_does_not_log_its_own_error() -> None:
    logged = []
    asyncio.get_running_loop().set_exception_handler(lambda loop, context: logged.append(context))

    async def stubborn(messages, signal):  # swallows cancellation past the grace, then answers
        until = time.perf_counter() + 0.05
        while time.perf_counter() < until:
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.sleep(0.002)
        return calls(call("t", {}, "c1"))

    with pytest.raises(DeadlineError):
        await agent_loop("q", stubborn, accept_all(), timeout_ms=5)
    await asyncio.sleep(0.1)  # the abandoned task ends now, with a DeadlineError of its own
    gc.collect()
    assert logged == []


# -- what an abandoned task does during the grace is not part of the verdict ----------------------------


async def test_a_deadline_error_never_carries_an_answer_given_after_the_deadline() -> None:
    async def stubborn(messages, signal):  # swallows the cancellation, then answers within the grace
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.sleep(1)
        return final("")

    with pytest.raises(DeadlineError) as raised:
        await agent_loop("q", stubborn, {}, timeout_ms=1)
    assert raised.value.history == [{"role": "user", "content": "q"}]
    assert raised.value.usage.chars == 1


async def test_an_abort_reason_keeps_the_history_it_was_raised_with_while_the_abandoned_task_runs_on() -> None:
    # The soak's shrunk example: a write that ignores the signal and its cancellation outlives the grace; the task
    # records its result, then meets the aborted signal again and must not rewrite the reason the run raised.
    loop = asyncio.get_running_loop()

    controller = AbortController()

    async def deaf_write(value, signal):
        loop.call_later(0.01, controller.abort, AbortError("aborted: stop"))  # once it runs: not on a timer from
        until = loop.time() + 0.05  # the start, which a loaded machine may reach before the write began
        while loop.time() < until:
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.sleep(0.002)
        return None

    tools = {"w": Tool(validate=lambda args: None, run=deaf_write, writes=True)}
    with pytest.raises(AbortError) as raised:
        await agent_loop(
            "q",
            Scripted(calls(call("w", {}, "c1"), call("w", {}, "c2"))),
            tools,
            approve=lambda proposed: True,
            signal=controller.signal,
            write_grace_ms=0,
        )
    raised_with = [dict(message) for message in raised.value.history]
    assert [m.get("call_id") for m in raised_with] == [None, None, "c1"]  # the write's outcome: unknown
    await asyncio.sleep(0.1)  # the abandoned task finishes the write and runs on
    assert raised.value.history == raised_with


# -- a sync model's awaitable answer that lands as the run is stopped ------------------------------------


async def test_an_awaitable_answer_landing_as_the_run_stops_is_closed_not_leaked() -> None:
    controller = AbortController()

    async def answer():
        return final("never awaited")

    def model(messages, signal):
        controller.abort()  # the run wakes for the abort just before the answer is delivered
        return answer()

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(AbortError):
            await agent_loop("q", model, {}, signal=controller.signal)
        gc.collect()
    assert [str(w.message) for w in caught] == []


# -- when the caller cancels the run ----------------------------------------------------------------------


async def test_after_the_caller_cancels_nothing_more_runs_and_nothing_is_logged() -> None:
    logged, ran = [], []
    asyncio.get_running_loop().set_exception_handler(lambda loop, context: logged.append(context))

    async def stubborn(messages, signal):  # ignores the cancellation, then asks for a tool
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.sleep(0.05)
        return calls(call("t", {}, "c1"))

    tools = {"t": Tool(validate=lambda args: None, run=lambda value: ran.append(value))}
    run = asyncio.ensure_future(agent_loop("q", stubborn, tools))
    await asyncio.sleep(0.01)
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    await asyncio.sleep(0.1)
    gc.collect()
    assert ran == [] and logged == []
