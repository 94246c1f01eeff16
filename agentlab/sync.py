"""`agent_loop` from code that is not async: scripts, the CLI, and Jupyter cells.

The loop itself is async (`agentlab.loop`). `agent_loop_sync` runs it on a
helper thread with an event loop of its own (`run_on_new_loop`, shared with
the playground: like `asyncio.run`, except that it never makes its caller wait
for a task that refuses to be cancelled), and waits for it on the caller's
thread, where it keeps the deadline, the abort and Ctrl-C (see
`run_on_helper_thread`). Its runs take turns on one event loop, kept between
them (`HomeLoop`): an SDK client keeps its connections on the loop it first
used, so a client serves run after run.
"""

from __future__ import annotations

import asyncio
import atexit
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from agentlab import callees
from agentlab.abort import AbortController, AbortSignal
from agentlab.errors import AbortError, ConfigError, DeadlineError
from agentlab.loop import CANCEL_GRACE_MS, AgentResult, agent_loop
from agentlab.tools import Tool


def agent_loop_sync(
    input: str,
    model: Callable[..., Any],
    tools: Mapping[str, Tool] | None = None,
    *,
    max_turns: int = 6,
    max_calls: int = 8,
    timeout_ms: float = 5000,
    max_chars: int = 50_000,
    signal: AbortSignal | None = None,
    forbid_repeats: bool = False,
    approve: Callable[..., Any] | None = None,
    max_writes: int = 4,
    write_grace_ms: float | None = None,
    max_tokens: int | None = None,
    max_refusals: int = 0,
) -> AgentResult:
    """`agent_loop` for code that is not async: scripts, and Jupyter cells too.

    The run happens on a helper thread with an event loop of its own, and this
    call waits for it. Waiting here, the caller keeps the promises even when
    the run's own loop cannot: Ctrl-C (in a script, in Jupyter, or in a
    coroutine run by `asyncio.run`) aborts the run at once, and if a callee
    blocks the run's event loop (an `async def` tool that calls `time.sleep`),
    the deadline and the abort still hold: the call raises without the
    run's history, and says so.

    One run after another, the runs share one event loop (`HOME`), so that a
    real model's SDK client, whose connections belong to the loop that opened
    them, can serve them all; a run started while another is going on gets an
    event loop of its own.
    """
    if not callees.THREADS:
        raise ConfigError(
            "agent_loop_sync cannot run here: it waits for the run on a helper thread, and Pyodide (JupyterLite, "
            "Python in a browser page) has no threads; in a notebook cell, use `await agent_loop(...)` instead"
        )
    if signal is not None and not isinstance(signal, AbortSignal):
        raise ConfigError("signal must be an AbortSignal, such as AbortController().signal")
    stop = AbortController()  # aborted by the caller's signal, and by Ctrl-C while we wait
    forget_signal = signal.add_callback(stop.abort, first=True) if signal is not None else (lambda: None)
    options = dict(
        max_turns=max_turns,
        max_calls=max_calls,
        timeout_ms=timeout_ms,
        max_chars=max_chars,
        signal=stop.signal,
        forbid_repeats=forbid_repeats,
        approve=approve,
        max_writes=max_writes,
        write_grace_ms=write_grace_ms,
        max_tokens=max_tokens,
        max_refusals=max_refusals,
    )

    def start() -> Any:
        return agent_loop(input, model, tools, **options)

    try:
        return run_on_helper_thread(start, stop=stop.signal, timeout_ms=timeout_ms, home=HOME)
    except BaseException:
        stop.abort(AbortError("aborted: the run ended early"))
        raise
    finally:
        forget_signal()


# How often the waiting caller looks at its clock, its signal and Ctrl-C, and how long the run's event loop
# has to answer a ping once the deadline or the abort has passed, before the caller decides it is blocked.
POLL_S = 0.01
PING_S = 0.1


def run_on_helper_thread(
    start: Callable[[], Any],
    *,
    stop: AbortSignal | None = None,
    timeout_ms: Any = None,
    home: HomeLoop | None = None,
) -> Any:
    """Run `start()` on a new thread with its own event loop (or `home`'s, when free), and wait for it here.

    While waiting: a cancellation of the caller's own task (how `asyncio.run`
    delivers Ctrl-C) or a KeyboardInterrupt ends the wait at once. With
    `timeout_ms` and `stop`, a run whose event loop no longer answers once its
    deadline or abort has passed is given up on here, with a `DeadlineError`
    or the abort's reason.
    """
    helper = _Helper(start, home)
    threading.Thread(target=helper.run, name="agentlab agent_loop_sync", daemon=True).start()
    started = time.monotonic()
    deadline = started + timeout_ms / 1000 if isinstance(timeout_ms, (int, float)) and timeout_ms < 1e12 else None
    task = _current_task()
    while not helper.done.wait(POLL_S):
        if task is not None and task.cancelling():  # asyncio.run's Ctrl-C, or whoever awaits us gave up
            raise asyncio.CancelledError()
        now = time.monotonic()
        stopped = stop is not None and stop.aborted
        if (stopped or (deadline is not None and now > deadline)) and not helper.answers_ping():
            if helper.done.is_set():
                break
            if stopped:
                raise stop.reason  # type: ignore[misc]
            raise DeadlineError(
                f"deadline exceeded: the run took longer than timeout_ms={timeout_ms}, and its event loop "
                f"stopped answering: a model or tool blocks it (time.sleep or a blocking call inside an "
                f"async def?); the run's history is not available. Make that callee a plain function "
                f"(it then runs on a worker thread) or await instead of blocking",
                value=timeout_ms,
            )
    return helper.outcome()


class _Helper:
    """The helper thread's side: its event loop, the run's outcome, and whether the loop answers."""

    def __init__(self, start: Callable[[], Any], home: HomeLoop | None = None) -> None:
        self.start = start
        self.home = home
        self.done = threading.Event()
        self.loop: asyncio.AbstractEventLoop | None = None
        self.result: Any = None
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            run_on_new_loop(self.main, self.on_loop, leftover_s=LEFTOVER_S, home=self.home)
        except BaseException as error:  # KeyboardInterrupt or SystemExit, which leave the event loop itself
            self.error = error
        finally:
            self.done.set()

    async def main(self) -> None:
        try:
            self.result = await self.start()
        except asyncio.CancelledError as error:  # the loop winding down after an escape: `run` decides
            self.error = error
            return
        except BaseException as error:  # the caller's to raise, whatever it is
            self.error = error
        if self.home is not None:
            self.home.settling(self.loop)
        self.done.set()  # the caller goes on now; this thread winds the loop down

    def on_loop(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop

    def answers_ping(self) -> bool:
        """True if the run's event loop runs a callback within PING_S (it is not blocked)."""
        answered = threading.Event()
        try:
            self.loop.call_soon_threadsafe(answered.set)  # type: ignore[union-attr]
        except (AttributeError, RuntimeError):  # not started yet, or closed: the outcome is on its way
            return True
        return answered.wait(PING_S) or self.done.is_set()

    def outcome(self) -> Any:
        if self.error is not None:
            raise self.error
        return self.result


def _current_task() -> asyncio.Task[Any] | None:
    try:
        return asyncio.current_task()
    except RuntimeError:  # no event loop runs in this thread
        return None


def run_on_new_loop(
    start: Callable[[], Any],
    on_loop: Callable[[asyncio.AbstractEventLoop], Any] | None = None,
    *,
    leftover_s: float = CANCEL_GRACE_MS / 1000,
    home: HomeLoop | None = None,
) -> Any:
    """Like asyncio.run, but waits at most `leftover_s` for the tasks the run abandoned.

    `on_loop(loop)` is called with the new loop before the run starts. By
    default the wait is the loop's grace: the caller waits for it. The helper
    thread of `agent_loop_sync`, whose caller has its outcome already, gives
    them `LEFTOVER_S` instead, so that a tool that swallows its cancellation
    can end before the loop closes rather than be destroyed pending ("Task was
    destroyed but it is pending").

    With `home`, the run takes its loop when it is free, and gives it back
    open if the run ended with nothing left running on it; otherwise the loop
    is closed, as asyncio.run does.
    """
    loop, kept = home.take() if home is not None else (asyncio.new_event_loop(), False)
    if on_loop is not None:
        on_loop(loop)
    clean = False
    try:
        outcome = loop.run_until_complete(start())
        clean = True
        return outcome
    finally:
        leftovers = [task for task in asyncio.all_tasks(loop) if not task.done()]
        for task in leftovers:
            task.cancel()
        if leftovers:
            loop.run_until_complete(asyncio.wait(leftovers, timeout=leftover_s))
        clean = clean and all(task.done() for task in leftovers)
        if not (kept and home is not None and home.give_back(loop, clean)):
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()


class HomeLoop:
    """One event loop that runs take turns on, kept open between them.

    An SDK client (openai's, anthropic's) keeps its connections on the event
    loop that opened them: with a new loop each run, its second run fails
    ("Event loop is closed"). A run takes this loop when no other run is on
    it (waiting up to `SETTLE_S` for one that has its outcome to wind down),
    and gives it back when it ends with nothing left running; a run beside
    another gets a loop of its own, closed at its end.
    """

    def __init__(self) -> None:
        self.turn = threading.Condition()
        self.loop: asyncio.AbstractEventLoop | None = None
        self.state = "free"  # "running" a run, "settling" one whose caller has its outcome, or "free"

    def take(self) -> tuple[asyncio.AbstractEventLoop, bool]:
        """The home loop and True, if it is free (soon enough); otherwise a new loop and False."""
        with self.turn:
            self.turn.wait_for(lambda: self.state != "settling", timeout=SETTLE_S)
            if self.state != "free":
                return asyncio.new_event_loop(), False
            if self.loop is None or self.loop.is_closed():
                self.loop = asyncio.new_event_loop()
            self.state = "running"
            return self.loop, True

    def settling(self, loop: asyncio.AbstractEventLoop | None) -> None:
        """The run on `loop` has its outcome: the next run may wait for the loop to wind down."""
        with self.turn:
            if loop is self.loop and self.state == "running":
                self.state = "settling"

    def give_back(self, loop: asyncio.AbstractEventLoop, clean: bool) -> bool:
        """Free the home loop; True if it stays open for the next run (it ended clean), False to close it."""
        with self.turn:
            self.state = "free"
            if not clean:
                self.loop = None
            self.turn.notify_all()
            return clean

    def close(self) -> None:
        """Close the home loop if no run has it (at exit)."""
        with self.turn:
            if self.loop is not None and self.state == "free" and not self.loop.is_closed():
                self.loop.close()
            self.loop = None


# How long a run waits for the home loop while the run before it winds down (no time at all, unless that run
# left tasks running; then the new run gets a loop of its own).
SETTLE_S = 1.0

# The event loop agent_loop_sync's runs share, one after another.
HOME = HomeLoop()
atexit.register(HOME.close)


def run_detached(start: Callable[[], Any], done: Callable[[Any], None], name: str) -> None:
    """Run `start()` to its end without making the caller wait; then call `done` with its result or what it raised.

    For the playground and the approval desk, whose runs must leave a notebook
    free between clicks. With threads, the run has a daemon thread with an
    event loop of its own (`run_on_new_loop`), so that a callee that blocks
    cannot freeze the kernel. With none (Pyodide) it is a task on the event
    loop already running (the kernel's), held here until it ends.
    """
    if callees.THREADS:

        def on_own_thread() -> None:
            try:
                outcome = run_on_new_loop(start)
            except BaseException as error:  # the run's verdict, whatever it is: `done` always hears of it
                outcome = error
            done(outcome)

        threading.Thread(target=on_own_thread, name=name, daemon=True).start()
        return
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:  # a widget's callback, called between cells: the kernel's loop is the current one
        loop = asyncio.get_event_loop()
    task = loop.create_task(start(), name=name)
    _DETACHED.add(task)

    def landed(task: asyncio.Task[Any]) -> None:
        _DETACHED.discard(task)
        error = asyncio.CancelledError() if task.cancelled() else task.exception()
        done(task.result() if error is None else error)

    task.add_done_callback(landed)


# The detached runs in flight, with no threads: held so that none is destroyed while pending.
_DETACHED: set[asyncio.Task[Any]] = set()

# How long the helper thread of `agent_loop_sync` keeps its loop running for tasks the run abandoned.
LEFTOVER_S = 30.0


__all__ = ["HOME", "HomeLoop", "agent_loop_sync", "run_detached", "run_on_helper_thread", "run_on_new_loop"]
