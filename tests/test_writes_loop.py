"""The loop's rules for tools that write: approval, a write budget, order, and stopping mid-write.

The store that makes writes idempotent and atomic is tested with a real database elsewhere;
these tests pin down what the loop itself guarantees, with in-memory tools.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time

import pytest

from agentlab import (
    AbortController,
    Approval,
    ApprovalError,
    DeadlineError,
    Tool,
    ToolCall,
    UnknownToolError,
    WriteBudgetError,
    agent_loop,
    parse_lookup_args,
)
from agentlab.lab.fakes import Scripted, call, calls, final


class RolledBack(RuntimeError):
    """How a tool reports that it rolled back: an exception with `rolled_back = True`."""

    rolled_back = True


def shop(
    log: list, *, delay_s: float = 0.0, honour_signal: bool = True, started: threading.Event | None = None
) -> dict[str, Tool]:
    """A read tool and a write tool that log what they did, in order (`started` is set when a write begins)."""

    async def read(value):
        log.append(("read", value["id"]))
        return {"id": value["id"], "stock": 3}

    def reserve(value, signal, context: ToolCall):
        if started is not None:
            started.set()
        deadline = time.monotonic() + delay_s
        while time.monotonic() < deadline:
            if honour_signal and signal.aborted:
                log.append(("rolled back", context.id))
                raise RolledBack("rolled back: the run was stopped before the commit")
            time.sleep(0.002)
        log.append(("reserve", value["id"], context.id))
        return {"reserved": value["id"]}

    return {
        "lookup": Tool(validate=parse_lookup_args, run=read),
        "reserve": Tool(parse_lookup_args, reserve, writes=True),
    }


READ = call("lookup", {"id": "A"}, "r1")
WRITE = call("reserve", {"id": "A"}, "w1")


async def test_a_write_without_an_approval_policy_is_refused_and_nothing_runs() -> None:
    log: list = []
    with pytest.raises(ApprovalError, match="approval required") as raised:
        await agent_loop("q", Scripted(calls(READ, WRITE)), shop(log))
    assert log == []
    assert raised.value.rejected == calls(READ, WRITE)


async def test_an_approved_write_runs_and_gets_its_call_as_idempotency_key() -> None:
    log: list = []
    seen: list = []

    def policy(proposed: ToolCall):
        seen.append(proposed)
        return True

    result = await agent_loop("q", Scripted(calls(READ, WRITE), final("ok")), shop(log), approve=policy)
    assert log == [("read", "A"), ("reserve", "A", "w1")]
    assert seen == [ToolCall("w1", "reserve", {"id": "A"})]
    assert result.usage.writes == 1 and result.usage.calls == 2


@pytest.mark.parametrize(
    ("answer", "reason"), [(False, "the write was not approved"), (Approval(False, "over the limit"), "over the limit")]
)
async def test_a_denied_write_runs_nothing_and_the_model_hears_why(answer, reason) -> None:
    log: list = []

    async def policy(proposed, signal):
        return answer

    model = Scripted(calls(WRITE), final("understood"))
    result = await agent_loop("q", model, shop(log), approve=policy)
    assert log == []
    assert model.seen[1] == {
        "role": "tool",
        "call_id": "w1",
        "content": json.dumps({"denied": True, "reason": reason}, separators=(",", ":")),
    }
    assert result.usage.writes == 0


@pytest.mark.parametrize(
    ("policy", "phrase"), [(lambda c: 1 / 0, "ZeroDivisionError"), (lambda c: "yes", "must answer")]
)
async def test_a_policy_that_raises_or_answers_nonsense_stops_the_run(policy, phrase) -> None:
    log: list = []
    with pytest.raises(ApprovalError, match=phrase):
        await agent_loop("q", Scripted(calls(WRITE)), shop(log), approve=policy)
    assert log == []


async def test_the_write_budget_is_checked_with_the_batch_before_anything_runs() -> None:
    log: list = []
    batch = calls(READ, *(call("reserve", {"id": "A"}, f"w{n}") for n in (1, 2, 3)))
    with pytest.raises(WriteBudgetError, match="write budget"):
        await agent_loop("q", Scripted(batch), shop(log), approve=lambda c: True, max_writes=2)
    assert log == []
    # across turns: the second batch would be the third write
    model = Scripted(
        calls(call("reserve", {"id": "A"}, "w1"), call("reserve", {"id": "B"}, "w2")), calls(WRITE | {"id": "w3"})
    )
    with pytest.raises(WriteBudgetError):
        await agent_loop("q", model, shop(log), approve=lambda c: True, max_writes=2)
    assert [entry[0] for entry in log] == ["reserve", "reserve"]


async def test_denied_writes_do_not_use_the_write_budget() -> None:
    model = Scripted(calls(call("reserve", {"id": "A"}, "w1")), calls(call("reserve", {"id": "A"}, "w2")), final("ok"))
    answers = iter([False, True])
    result = await agent_loop("q", model, shop([]), approve=lambda c: next(answers), max_writes=1)
    assert result.usage.writes == 1


async def test_writes_run_one_at_a_time_in_call_order_after_every_check() -> None:
    log: list = []
    batch = calls(call("reserve", {"id": "A"}, "w1"), READ, call("reserve", {"id": "B"}, "w2"))
    await agent_loop("q", Scripted(batch, final("ok")), shop(log), approve=lambda c: True)
    assert log == [("reserve", "A", "w1"), ("read", "A"), ("reserve", "B", "w2")]
    log.clear()
    with pytest.raises(UnknownToolError):
        await agent_loop("q", Scripted(calls(WRITE, call("nope", {}, "x"))), shop(log), approve=lambda c: True)
    assert log == []


async def test_waiting_for_approval_counts_against_the_deadline() -> None:
    log: list = []

    async def never_answers(proposed):
        await asyncio.get_running_loop().create_future()

    started = time.perf_counter()
    with pytest.raises(DeadlineError):
        await agent_loop("q", Scripted(calls(WRITE)), shop(log), approve=never_answers, timeout_ms=30)
    assert time.perf_counter() - started < 2.0 and log == []  # not forever


async def test_no_write_starts_after_the_deadline_even_if_approval_came_late() -> None:
    log: list = []

    def slow_person(proposed):
        time.sleep(0.06)
        return True

    with pytest.raises(DeadlineError):
        await agent_loop("q", Scripted(calls(WRITE)), shop(log), approve=slow_person, timeout_ms=20)
    await asyncio.sleep(0.08)  # the abandoned approval thread answers: still nothing may run
    assert log == []


async def test_a_write_stopped_by_the_deadline_rolls_back_and_the_history_says_so() -> None:
    log: list = []
    with pytest.raises(DeadlineError) as raised:
        # The write must have started before the deadline (a loaded machine takes its time to get there): it runs 5 s
        await agent_loop("q", Scripted(calls(WRITE)), shop(log, delay_s=5), approve=lambda c: True, timeout_ms=1000)
    assert log == [("rolled back", "w1")]
    last = raised.value.history[-1]
    assert last["call_id"] == "w1" and json.loads(last["content"])["rolled_back"] is True


async def test_a_write_that_commits_after_the_deadline_is_recorded_as_applied() -> None:
    log: list = []
    tools = shop(log, delay_s=1.0, honour_signal=False)  # starts well before the deadline, ends well after it
    with pytest.raises(DeadlineError) as raised:
        await agent_loop(
            "q",
            Scripted(calls(WRITE, call("reserve", {"id": "B"}, "w2"))),
            tools,
            approve=lambda c: True,
            timeout_ms=500,
            write_grace_ms=5000,
        )
    assert log == [("reserve", "A", "w1")]  # committed whole; the second write never started
    assert raised.value.history[-1] == {"role": "tool", "call_id": "w1", "content": '{"reserved":"A"}'}


async def test_a_write_that_outlives_the_grace_is_recorded_as_unknown() -> None:
    tools = shop([], delay_s=1.0, honour_signal=False)  # starts well before the deadline, outlives its grace
    with pytest.raises(DeadlineError, match="up to write_grace_ms=30 more") as raised:
        await agent_loop("q", Scripted(calls(WRITE)), tools, approve=lambda c: True, timeout_ms=500, write_grace_ms=30)
    assert json.loads(raised.value.history[-1]["content"])["outcome"] == "unknown"
    await asyncio.sleep(0.8)  # let the abandoned write finish before the test's loop closes


async def test_an_abort_mid_write_rolls_back_too() -> None:
    log: list = []
    controller = AbortController()
    started = threading.Event()

    async def abort_once_the_write_runs() -> None:  # not on a timer: a loaded machine may not have started it yet
        while not started.is_set():
            await asyncio.sleep(0.005)
        controller.abort(RuntimeError("stop"))

    aborter = asyncio.create_task(abort_once_the_write_runs())
    with pytest.raises(RuntimeError, match="stop"):
        await agent_loop(
            "q",
            Scripted(calls(WRITE)),
            shop(log, delay_s=5.0, started=started),
            approve=lambda c: True,
            signal=controller.signal,
        )
    await aborter
    assert log == [("rolled back", "w1")]
