"""Issue 14: what a hostile or unlucky run broke, one regression test per problem.

Each hang is a failure with a bound: a test measures the time and asserts a generous upper bound,
so a regression fails in seconds instead of hanging the suite.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import logging
import subprocess
import sys
import threading
import time
import tracemalloc

import pytest

from agentlab import (
    AbortController,
    AbortError,
    AbortSignal,
    Approval,
    ApprovalError,
    ConfigError,
    DeadlineError,
    ModelOutputError,
    Tool,
    ToolBudgetError,
    ToolCall,
    ToolError,
    agent_loop,
    agent_loop_sync,
)
from agentlab.callees import MAX_STUCK, stuck
from agentlab.errors import StuckCalleeError
from agentlab.lab.fakes import Scripted, call, calls, final


def never_answers():
    async def model(messages, signal):
        await asyncio.sleep(60)  # ignores the signal: only the loop's race can end the run

    return model


def tools_ok() -> dict[str, Tool]:
    return {"t": Tool(validate=lambda args: None, run=lambda value: "ok")}


# -- 1. one raising listener must not disable Stop --------------------------------------------------


async def test_a_raising_abort_listener_does_not_keep_the_abort_from_the_run(caplog) -> None:
    controller = AbortController()
    controller.signal.add_callback(lambda reason: 1 / 0)
    loop = asyncio.get_running_loop()
    loop.call_later(0.1, controller.abort, "stop")
    started = time.perf_counter()
    with caplog.at_level(logging.ERROR, logger="agentlab"), pytest.raises(AbortError, match="stop"):
        await agent_loop("q", never_answers(), {}, timeout_ms=10_000, signal=controller.signal)
    assert time.perf_counter() - started < 5.0  # the abort at 0.1 s, not the deadline at 10 s
    assert "ZeroDivisionError" in caplog.text  # reported, not swallowed


def test_abort_calls_every_listener_and_raises_nothing_at_its_caller(caplog) -> None:
    controller, seen = AbortController(), []
    controller.signal.add_callback(lambda reason: seen.append("first"))
    controller.signal.add_callback(lambda reason: 1 / 0)
    controller.signal.add_callback(lambda reason: seen.append("last"))
    with caplog.at_level(logging.ERROR, logger="agentlab"):
        controller.abort("stop")
    assert seen == ["first", "last"] and controller.signal.aborted


async def test_a_tool_listener_that_blocks_does_not_hold_the_deadline() -> None:
    async def run(value, signal):
        signal.add_callback(lambda reason: time.sleep(5.0))  # runs when the loop aborts the run's signal
        await asyncio.sleep(60)

    started = time.perf_counter()
    with pytest.raises(DeadlineError):
        await agent_loop("q", Scripted(calls(call("t", {}, "c1"))), {"t": Tool(lambda a: None, run)}, timeout_ms=50)
    assert time.perf_counter() - started < 3.0  # not the listener's 5 s


# -- 2. refusing a huge or hostile decision costs what the limits allow -----------------------------


async def test_a_batch_of_a_million_calls_is_refused_quickly_and_cheaply() -> None:
    batch = {"kind": "tools", "calls": [{"id": f"c{i}", "name": "t", "args": {"n": i}} for i in range(1_000_000)]}
    tracemalloc.start()
    started = time.perf_counter()
    try:
        with pytest.raises(ToolBudgetError, match="1000000 tool calls") as raised:
            await agent_loop("q", Scripted(batch), tools_ok(), max_calls=8, timeout_ms=5000)
        elapsed = time.perf_counter() - started
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert elapsed < 4.0  # was 6.7-14 s
    assert peak < 50 * 2**20  # was about 750 MiB
    assert len(raised.value.rejected["calls"]) <= 10


class SlowHashKey(str):
    armed = False  # sleeps (and counts) only once the test has built its dicts
    hashed = 0

    def __hash__(self) -> int:
        if SlowHashKey.armed:
            SlowHashKey.hashed += 1
            time.sleep(2)
        return str.__hash__(self)


class PlainDict(dict):
    pass


@pytest.mark.parametrize("container", [dict, PlainDict])
async def test_a_key_whose_hash_sleeps_does_not_stall_the_loop(container, monkeypatch) -> None:
    args = container({SlowHashKey("y"): 1})  # a dict subclass: a copy that rebuilt it would hash every key again
    decision = PlainDict(kind="tools", calls=[{"id": "c1", "name": "t", "args": args}])
    monkeypatch.setattr(SlowHashKey, "armed", True)
    monkeypatch.setattr(SlowHashKey, "hashed", 0)
    with pytest.raises(ModelOutputError, match="not a string"):
        await agent_loop("q", Scripted(decision), tools_ok(), timeout_ms=1500)
    assert SlowHashKey.hashed == 0  # read without being hashed: each hash would have stalled the loop 2 s


# -- 3. the write grace is a documented, configurable part of the contract --------------------------


def deaf_writer(seconds: float) -> dict[str, Tool]:
    def write(value, signal):
        time.sleep(seconds)  # ignores the signal
        return "written"

    return {"w": Tool(validate=lambda a: None, run=write, writes=True)}


@pytest.mark.parametrize("grace_ms", [0, 100])
async def test_write_grace_ms_bounds_how_long_a_deaf_write_delays_the_deadline(grace_ms) -> None:
    started = time.perf_counter()
    with pytest.raises(DeadlineError) as raised:
        await agent_loop(
            "q",
            Scripted(calls(call("w", {}, "w1"))),
            deaf_writer(6.0),
            approve=lambda c: True,
            timeout_ms=1000,  # long enough that the write has started on a loaded machine (50 ms was not)
            write_grace_ms=grace_ms,
        )
    assert time.perf_counter() - started < 1.0 + grace_ms / 1000 + 2.5  # not the write's 6 s
    assert f"given up to write_grace_ms={grace_ms} more" in str(raised.value)  # said where the trace shows it
    assert raised.value.limits.write_grace_ms == grace_ms


async def test_write_grace_ms_is_checked_like_any_limit() -> None:
    with pytest.raises(ConfigError, match="write_grace_ms"):
        await agent_loop("q", Scripted(final("x")), {}, write_grace_ms=-1)


# -- 4. the history records what the tool reported, not a guess ------------------------------------


async def test_a_write_that_commits_then_fails_after_a_stop_is_not_recorded_as_rolled_back() -> None:
    committed: list[str] = []

    async def write(value, signal, context: ToolCall):
        asyncio.get_running_loop().call_soon(controller.abort, "stop")  # stopped while it runs, whatever the load
        await signal.wait()
        committed.append(context.id)  # it committed...
        raise OSError("connection lost after the commit")  # ...then failed

    controller = AbortController()
    with pytest.raises(AbortError) as raised:
        await agent_loop(
            "q",
            Scripted(calls(call("w", {}, "w1"))),
            {"w": Tool(lambda a: None, write, writes=True)},
            approve=lambda c: True,
            signal=controller.signal,
        )
    record = json.loads(raised.value.history[-1]["content"])
    assert committed == ["w1"]
    assert "rolled_back" not in record and record["outcome"] == "unknown"


# -- 5. Approval is a real bool and a real string --------------------------------------------------


@pytest.mark.parametrize("allowed", ["no", [False], 1, None])
def test_an_approval_that_is_not_a_bool_is_refused(allowed) -> None:
    with pytest.raises(ConfigError, match="allowed must be True or False"):
        Approval(allowed)


@pytest.mark.parametrize("allowed", ["no", [False]])
async def test_a_policy_answering_a_truthy_non_bool_runs_no_write(allowed) -> None:
    ran: list = []
    tools = {"w": Tool(lambda a: None, lambda value: ran.append(1), writes=True)}
    with pytest.raises(ApprovalError):
        await agent_loop(
            "q", Scripted(calls(call("w", {}, "w1")), final("x")), tools, approve=lambda c: Approval(allowed)
        )
    forged = Approval(True)
    object.__setattr__(forged, "allowed", allowed)  # set by hand, past the check
    with pytest.raises(ApprovalError, match="allowed a bool"):
        await agent_loop("q", Scripted(calls(call("w", {}, "w1")), final("x")), tools, approve=lambda c: forged)
    assert ran == []


class BoolRaises(str):
    def __bool__(self) -> bool:
        raise RuntimeError("hostile bool")

    def __len__(self) -> int:
        raise RuntimeError("hostile len")


@pytest.mark.parametrize(
    "reason", [object, lambda: float("nan"), lambda: BoolRaises("")], ids=["object", "nan", "bool"]
)
async def test_a_hostile_deny_reason_is_an_agent_error_or_a_plain_denial(reason) -> None:
    tools = {"w": Tool(lambda a: None, lambda value: "written", writes=True)}
    decision = Scripted(calls(call("w", {}, "w1")), final("x"))
    try:
        result = await agent_loop("q", decision, tools, approve=lambda c: Approval(False, reason()))
    except ApprovalError:
        return
    assert json.loads(result.history[2]["content"])["denied"] is True


# -- 6. a timeout too big for a float ------------------------------------------------------------


@pytest.mark.parametrize("value", [10**400, -(10**400), float("inf")], ids=["huge", "-huge", "inf"])
async def test_a_timeout_too_big_for_a_float_is_a_config_error(value) -> None:
    with pytest.raises(ConfigError, match="timeout_ms"):
        await agent_loop("q", Scripted(final("x")), {}, timeout_ms=value)


class LyingInt(int):
    def __lt__(self, other: object) -> bool:
        return False

    def __int__(self) -> int:
        return 1000


async def test_a_limit_that_is_a_lying_int_subclass_is_read_as_plain_data() -> None:
    with pytest.raises(ConfigError, match="max_turns"):
        await agent_loop("q", Scripted(final("x")), {}, max_turns=LyingInt(-1))


# -- 9. values that cross the trust boundary are measured as plain data ----------------------------


class ShortStr(str):
    def __len__(self) -> int:
        return 1


async def test_an_input_whose_len_lies_is_measured_by_its_characters() -> None:
    seen: list = []

    async def model(messages):
        seen.append(sum(len(m["content"]) for m in messages))
        return final("x")

    with pytest.raises(Exception, match="context budget") as raised:
        await agent_loop(ShortStr("x" * 1000), model, {}, max_chars=10)
    assert seen == [] and type(raised.value.history[0]["content"]) is str


# -- 10. smaller ---------------------------------------------------------------------------------


class SaysAbortedWithoutReason(AbortSignal):
    @property
    def aborted(self) -> bool:
        return True


async def test_a_signal_that_says_aborted_without_a_reason_is_an_abort_error() -> None:
    with pytest.raises(AbortError, match="no reason"):
        await agent_loop("q", Scripted(final("x")), {}, signal=SaysAbortedWithoutReason())


async def test_a_decision_that_is_not_json_is_refused_without_running_its_repr() -> None:
    shown: list = []

    class SlowRepr:
        def __repr__(self) -> str:
            shown.append(1)
            time.sleep(2)
            return "slow"

    with pytest.raises(ModelOutputError, match="SlowRepr"):
        await agent_loop("q", Scripted({"kind": "final", "text": SlowRepr()}), {}, timeout_ms=1500)
    assert shown == []


async def test_a_tool_error_after_the_stop_is_reported_as_a_tool_error() -> None:
    async def run(value, signal):
        await signal.wait()
        raise ValueError("late")

    controller = AbortController()
    asyncio.get_running_loop().call_later(0.05, controller.abort, "stop")
    with pytest.raises((AbortError, ToolError)):
        await agent_loop(
            "q", Scripted(calls(call("t", {}, "c1"))), {"t": Tool(lambda a: None, run)}, signal=controller.signal
        )


# -- 7. Ctrl-C reaches agent_loop_sync: in a script, under asyncio.run, in a real Jupyter kernel -------

INTERRUPTED = """
import asyncio, os, signal, sys, threading, time
from agentlab import agent_loop_sync
from agentlab.lab.fakes import NeverAnswers

# Ctrl-C as a terminal sends it, whatever this process inherited: a shell starts a background job (`make test &`,
# nohup) with SIGINT ignored, and Python then leaves it ignored, so the SIGINT below would do nothing at all.
signal.signal(signal.SIGINT, signal.default_int_handler)

def run():
    agent_loop_sync("q", NeverAnswers(), {}, timeout_ms=20_000)

async def cell():  # a cell-like coroutine: it calls the sync API from inside a running event loop
    run()

threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT)).start()
started = time.monotonic()
try:
    asyncio.run(cell()) if sys.argv[1] == "asyncio.run" else run()
except KeyboardInterrupt:
    print("interrupted after", round(time.monotonic() - started, 1), flush=True)
"""


# The child of a background job (`make test &`, nohup) inherits SIGINT ignored: this starts it so, then execs it.
IGNORING_SIGINT = "import os, signal as s, sys; s.signal(s.SIGINT, s.SIG_IGN); os.execv(sys.argv[1], sys.argv[1:])"


@pytest.mark.parametrize("inherited", ["default", "ignored"])
@pytest.mark.parametrize("how", ["script", "asyncio.run"])
def test_ctrl_c_aborts_agent_loop_sync(how, inherited) -> None:
    command = [sys.executable, "-c", INTERRUPTED, how]
    if inherited == "ignored":
        command = [sys.executable, "-c", IGNORING_SIGINT, *command]
    finished = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    assert finished.stdout.startswith("interrupted after"), finished.stderr[-2000:]
    assert float(finished.stdout.split()[-1]) < 10.0  # the interrupt at 0.5 s, not the deadline at 20 s


@pytest.mark.slow
def test_interrupting_a_jupyter_kernel_aborts_agent_loop_sync() -> None:
    from jupyter_client.manager import start_new_kernel

    manager, client = start_new_kernel(startup_timeout=120)  # generous: a loaded machine starts kernels slowly
    try:
        code = (
            "import time\n"
            "from agentlab import agent_loop_sync\n"
            "from agentlab.lab.fakes import NeverAnswers\n"
            "started = time.monotonic()\n"
            "try:\n"
            "    agent_loop_sync('q', NeverAnswers(), {}, timeout_ms=20_000)\n"
            "finally:\n"
            "    print('ended after', round(time.monotonic() - started, 1))\n"
        )
        client.execute_interactive("import agentlab", timeout=60)
        message_id = client.execute(code)
        time.sleep(1.0)  # the cell is running
        manager.interrupt_kernel()
        reply = client.get_shell_msg(timeout=30)
        assert reply["parent_header"]["msg_id"] == message_id
        assert reply["content"]["status"] == "error" and reply["content"]["ename"] == "KeyboardInterrupt"
        printed = ""
        while "ended after" not in printed:
            message = client.get_iopub_msg(timeout=10)
            printed += message["content"].get("text", "") if message["msg_type"] == "stream" else ""
        assert float(printed.split("ended after")[1].split()[0]) < 10.0  # not the 20 s deadline
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)


# -- 8. agent_loop_sync keeps the deadline when an async callee blocks its event loop ----------------


@pytest.mark.parametrize("stop", ["deadline", "abort"])
def test_agent_loop_sync_keeps_the_deadline_and_the_abort_against_a_blocked_event_loop(stop) -> None:
    async def blocks_the_loop(value):
        time.sleep(5.0)  # the mistake: a blocking call inside async def
        return "late"

    controller = AbortController()
    if stop == "abort":
        threading.Timer(0.05, controller.abort, ("stop",)).start()
    started = time.perf_counter()
    with pytest.raises(DeadlineError if stop == "deadline" else AbortError):
        agent_loop_sync(
            "q",
            Scripted(calls(call("t", {}, "c1")), final("x")),
            {"t": Tool(lambda a: None, blocks_the_loop)},
            timeout_ms=50 if stop == "deadline" else 5000,
            signal=controller.signal,
        )
    assert time.perf_counter() - started < 3.0  # not the blocking call's 5 s (1.45 s over a 1.5 s one before)


# -- 10. threads that do not pile up; a task that swallows its cancellation ------------------------


def test_sync_callees_reuse_their_threads() -> None:
    threads: set[threading.Thread] = set()

    def run(value):
        threads.add(threading.current_thread())  # the objects, not their idents: an ident is reused
        return "ok"

    for _ in range(30):
        agent_loop_sync("q", Scripted(calls(call("t", {}, "c1")), final("x")), {"t": Tool(lambda a: None, run)})
    assert len(threads) <= 3


def test_stuck_sync_tools_are_bounded_and_reported() -> None:
    release = threading.Event()

    def never_returns(value):
        release.wait(30)  # "never", for this test: released at its end

    tools = {"t": Tool(lambda a: None, never_returns)}
    before = threading.active_count()
    refused = None
    try:
        for _ in range(MAX_STUCK + 40):  # spare runs: on a loaded machine a deadline may strike before the tool
            try:
                agent_loop_sync("q", Scripted(calls(call("t", {}, "c1"))), tools, timeout_ms=20)
            except ToolError as error:
                refused = error
                break
            except DeadlineError:
                continue
        assert refused is not None and isinstance(refused.__cause__, StuckCalleeError)
        assert "tool" in str(refused) and f"MAX_STUCK={MAX_STUCK}" in str(refused)
        assert len(stuck()) == MAX_STUCK
        assert threading.active_count() - before <= MAX_STUCK + 5  # not one more per run
    finally:
        release.set()
    deadline = time.monotonic() + 10
    while stuck() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert stuck() == []  # they returned: no longer stuck, and reusable


def test_an_async_tool_that_swallows_its_cancellation_ends_before_its_loop_closes(caplog) -> None:
    ended = threading.Event()

    async def stubborn(value):
        until = time.monotonic() + 0.6
        while time.monotonic() < until:
            with contextlib.suppress(asyncio.CancelledError):  # swallows every cancellation for 0.6 s
                await asyncio.sleep(0.01)
        ended.set()
        return "done anyway"

    with caplog.at_level(logging.ERROR, logger="asyncio"), pytest.raises(DeadlineError):
        agent_loop_sync(
            "q", Scripted(calls(call("t", {}, "c1"))), {"t": Tool(lambda a: None, stubborn)}, timeout_ms=300
        )
    assert ended.wait(5)
    time.sleep(0.05)
    gc.collect()
    assert "Task was destroyed but it is pending" not in caplog.text


async def test_a_caller_that_cancels_during_the_write_grace_leaves_no_unretrieved_error() -> None:
    logged: list = []
    asyncio.get_running_loop().set_exception_handler(lambda loop, context: logged.append(context))

    async def write(value, signal):
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.sleep(1.0)  # ignores the stop and its cancellation...
        raise OSError("failed after its commit")  # ...then fails

    tools = {"w": Tool(lambda a: None, write, writes=True)}
    run = asyncio.ensure_future(
        agent_loop(
            "q",
            Scripted(calls(call("w", {}, "w1"))),
            tools,
            approve=lambda c: True,
            timeout_ms=300,
            write_grace_ms=5000,
        )
    )
    await asyncio.sleep(0.6)  # the deadline has passed; the loop is in the write's grace
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    await asyncio.sleep(0.8)  # the write fails
    gc.collect()
    await asyncio.sleep(0)
    assert logged == []  # was: "Task exception was never retrieved"
