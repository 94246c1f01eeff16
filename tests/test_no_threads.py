"""agentlab with no threads, as in a browser's Pyodide, simulated in CPython: `callees.THREADS` off, and any
thread the package would start refused the way Pyodide refuses it.

tests/test_pyodide.py runs the loop in real Pyodide under Node; these cover what Node cannot show: the
playground and the approval desk as tasks on the caller's loop, and check() with no threads.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from pathlib import Path

import pytest

from agentlab import ConfigError, DeadlineError, Tool, agent_loop, agent_loop_sync, callees
from agentlab.behaviours import BLOCKING
from agentlab.classroom.check import check
from agentlab.lab.fakes import Scripted, call, calls, final
from agentlab.lab.scenarios import SCENARIOS
from agentlab.lab.widgets import STOPPED, playground, render_view
from agentlab.writes.approval import ApprovalDesk
from agentlab.writes.store import Store


@pytest.fixture
def no_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(self: threading.Thread) -> None:
        raise RuntimeError("can't start new thread")  # Pyodide's own words

    monkeypatch.setattr(callees, "THREADS", False)
    monkeypatch.setattr(threading.Thread, "start", refuse)


def lookup(args):  # plain functions: with no threads they run inline
    return {"id": args["id"], "on_shelf": True}


def approve(call):
    return True


@pytest.mark.usefixtures("no_threads")
async def test_plain_model_tool_and_policy_run_inline() -> None:
    store = Store()
    tools = {**store.tools(), "lookup": Tool(validate=lambda args: None, run=lookup)}
    scripted = Scripted(
        calls(call("lookup", {"id": "A"}, id="c1")),
        calls(call("reserve", {"book": "A", "customer": "ada", "quantity": 1}, id="c2")),
        final("reserved"),
    )

    def plain_model(messages):
        return scripted.script[len([m for m in messages if "calls" in m])]

    result = await agent_loop("Reserve A for Ada.", plain_model, tools, approve=approve)
    assert (result.text, result.usage.calls, result.usage.writes) == ("reserved", 2, 1)
    assert store.problems() == []


@pytest.mark.usefixtures("no_threads")
async def test_a_cpu_bound_plain_model_ends_in_a_deadline_error_that_says_by_how_much() -> None:
    def busy(messages):
        until = time.monotonic() + 0.3
        while time.monotonic() < until:
            pass
        return {"kind": "final", "text": "too late"}

    with pytest.raises(DeadlineError, match=r"held the event loop [\d,]+ ms past the deadline") as caught:
        await agent_loop("hi", busy, {}, timeout_ms=50)
    assert "make it async def" in str(caught.value)


async def test_with_threads_the_deadline_error_blames_no_callee() -> None:
    def slow(messages):
        time.sleep(0.3)
        return {"kind": "final", "text": "too late"}

    with pytest.raises(DeadlineError) as caught:
        await agent_loop("hi", slow, {}, timeout_ms=50)
    assert "held the event loop" not in str(caught.value) and "raise timeout_ms" in str(caught.value)


@pytest.mark.usefixtures("no_threads")
async def test_an_answer_that_comes_after_the_deadline_is_not_taken() -> None:
    def late(messages):
        time.sleep(0.2)  # inline: the loop cannot fire its timer meanwhile
        return {"kind": "final", "text": "late"}

    with pytest.raises(DeadlineError):
        await agent_loop("hi", late, {}, timeout_ms=50)


@pytest.mark.usefixtures("no_threads")
async def test_abort_listeners_run_on_the_loop_and_the_error_is_the_deadline() -> None:
    heard = []

    async def listening(messages, signal):
        signal.add_callback(heard.append)
        await asyncio.sleep(10)

    with pytest.raises(DeadlineError):
        await agent_loop("hi", listening, {}, timeout_ms=50)
    await asyncio.sleep(0)
    assert [type(reason) for reason in heard] == [DeadlineError]


@pytest.mark.usefixtures("no_threads")
def test_agent_loop_sync_is_a_config_error_that_says_to_await() -> None:
    with pytest.raises(ConfigError, match=r"Pyodide .* no threads; in a notebook cell, use `await agent_loop"):
        agent_loop_sync("hi", lambda messages: {"kind": "final", "text": "x"})


# -- the playground, as a task on the caller's loop ------------------------------------------------------------------

# real_model needs a socket, which a browser does not give; whole_or_nothing's card service waits in a plain function
# (signal.wait_sync), which CPython's time.sleep cannot suspend as Chromium's does (the lite browser test runs it).
SCENARIO_KEYS = [key for key in SCENARIOS if key not in ("real_model", "whole_or_nothing")]


@pytest.mark.parametrize("key", SCENARIO_KEYS)
async def test_a_playground_with_no_threads_shows_what_it_shows_with_threads(key: str, masked) -> None:
    threaded = playground(key)
    expected = masked(render_view(threaded.scenario, threaded.settings(), threaded.outcome))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(callees, "THREADS", False)
        patch.setattr(threading.Thread, "start", lambda self: (_ for _ in ()).throw(RuntimeError("no threads")))
        here = playground(key)  # returns at once: the first run is a task on this loop
        await asyncio.wait_for(here.settled(), 20)
        assert masked(render_view(here.scenario, here.settings(), here.outcome)) == expected
        assert here.status == threaded.status


@pytest.mark.usefixtures("no_threads")
async def test_a_slider_reruns_and_stop_stops_with_no_threads() -> None:
    pg = playground("budgets")
    await asyncio.wait_for(pg.settled(), 10)
    pg.controls["max_calls"].value = 1
    await asyncio.wait_for(pg.settled(), 10)
    assert pg.status.startswith("✗ ToolBudgetError") and "max_calls=1" in pg.view.value
    pg = playground("deadline", timeout_ms=5000, model_delay_ms=0)
    await asyncio.wait_for(pg.settled(), 10)
    pg.controls["model_delay_ms"].value = 4000  # an async model that waits: the loop stays free
    await asyncio.sleep(0.3)
    assert not pg.stop.disabled
    started = time.perf_counter()
    pg.stop.click()
    await asyncio.wait_for(pg.settled(), 2)
    assert time.perf_counter() - started < 1.5
    assert pg.status == f"✗ AbortError: {STOPPED}"


# -- the approval desk ---------------------------------------------------------------------------------------------


@pytest.mark.usefixtures("no_threads")
async def test_the_desk_runs_as_a_task_and_returns_at_once() -> None:
    store = Store()
    desk = ApprovalDesk(store, script=[True])
    model = Scripted(calls(call("reserve", {"book": "A", "customer": "ada", "quantity": 1}, id="c1")), final("done"))
    done = desk.start("Reserve A.", model, store.tools())
    assert not done.done()  # a cell cannot wait here: the desk fills in as the run goes
    outcome = await asyncio.wait_for(asyncio.wrap_future(done), 10)
    assert outcome.text == "done" and len(desk.cards) == 1 and store.problems() == []


# -- the checker -----------------------------------------------------------------------------------------------


@pytest.mark.usefixtures("no_threads")
def test_check_with_no_threads_runs_each_behaviour_on_this_thread() -> None:
    report = check(agent_loop, step="basics")
    assert report.passed, str(report)
    report = check(agent_loop, step="deadline")
    failed = {row.key for row in report.rows if not row.passed}
    assert failed <= BLOCKING  # a plain model that sleeps holds the loop when it runs inline


@pytest.mark.usefixtures("no_threads")
def test_check_with_no_threads_still_fails_a_wrong_loop_and_bounds_a_hang() -> None:
    async def forgets_results(input, model, tools, **options):
        history = [{"role": "user", "content": input}]
        while True:
            decision = await model(list(history), None)
            if decision["kind"] == "final":
                return type("R", (), {"text": decision["text"], "history": history})()
            history.append({"role": "assistant", "calls": decision["calls"]})

    async def hangs(input, model, tools, **options):
        await asyncio.Event().wait()

    report = check(forgets_results, step="basics")
    assert not report.passed and "result_reaches_model" in {row.key for row in report.failures}
    started = time.monotonic()
    report = check(hangs, step="basics", bound_s=0.5)
    assert not report.passed and time.monotonic() - started < 30


@pytest.mark.usefixtures("no_threads")
async def test_check_in_a_running_loop_with_no_way_to_wait_says_why() -> None:
    with pytest.raises(ConfigError, match="run_sync needs JSPI"):
        check(agent_loop, step="basics")


# -- what the lessons say -------------------------------------------------------------------------------------------


def test_every_lesson_that_promises_a_worker_thread_says_what_the_browser_does() -> None:
    promising = []
    for path in sorted((Path(__file__).parent.parent / "notebooks").glob("*.ipynb")):
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        prose = " ".join("".join(cell["source"]) for cell in cells if cell["cell_type"] == "markdown")
        prose = " ".join(prose.split())
        if "worker thread" in prose:
            promising.append(path.stem)
            assert "In the browser" in prose or "in the browser edition" in prose, path.name
    assert {"05b_asyncio_primer", "06_deadline", "07b_the_whole_loop", "09a_approval"} <= set(promising)
