"""How the loop calls code it does not own: models, tools and approval policies.

Two conveniences and one safety rule:

* A callee may be `async def` or a plain function, and a plain function may
  return an awaitable (which is then awaited).
* Like JavaScript, a callee may take fewer parameters than the loop offers:
  `async def model(messages)` is as good as `async def model(messages, signal)`.
* A plain function runs in a worker thread, never on the event loop's thread,
  so a blocking one (`time.sleep`, a slow HTTP client) cannot freeze the loop
  and its deadline.

In the browser (Pyodide, as in JupyterLite) there are no threads (`THREADS` is
False): a plain function then runs inline, on the event loop's thread. The
deadline still holds against `async def` callees, and against `time.sleep` in
Chromium (Pyodide suspends the page's WebAssembly there, so the event loop runs
on), but not against CPU-bound code, which holds the loop until it returns:
the run then ends with a DeadlineError that says by how much it overran.

The thread policy:

* Worker threads are reused. One that has finished its callee waits up to
  `IDLE_S` for the next one (named "idle agentlab worker" meanwhile), then
  ends: a thousand turns cost a few threads, not a thousand.
* A callee the run gave up on (deadline, abort) keeps its thread until it
  returns: Python cannot stop a thread. Such a thread is stuck; `stuck()`
  lists them. At most `MAX_STUCK` at once: past that, a plain model or tool is
  refused with `StuckCalleeError` (which names the stuck ones) instead of
  piling up one more thread per run. The threads are daemons, so a stuck one
  cannot keep the interpreter from exiting.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import queue
import sys
import threading
from collections.abc import Callable
from typing import Any

from agentlab.errors import StuckCalleeError

# Whether plain callees get worker threads. Pyodide has none: there they run inline (see above).
THREADS = sys.platform != "emscripten"
# How long a worker thread with nothing to do waits for a next callee before it ends.
IDLE_S = 1.0
# How many threads may be stuck at once in callees their runs gave up on, before new ones are refused.
MAX_STUCK = 64


def positional_capacity(function: Callable[..., Any]) -> int | None:
    """How many positional arguments `function` accepts (None: any number)."""
    try:
        parameters = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):  # some builtins have no signature
        return None
    count = 0
    for parameter in parameters:
        if parameter.kind is parameter.VAR_POSITIONAL:
            return None
        if parameter.kind in (parameter.POSITIONAL_ONLY, parameter.POSITIONAL_OR_KEYWORD):
            count += 1
    return count


def is_async_callable(function: Callable[..., Any]) -> bool:
    """True for `async def` functions and objects with an `async def __call__`."""
    if inspect.iscoroutinefunction(function):
        return True
    return callable(function) and inspect.iscoroutinefunction(function.__call__)


class Callee:
    """A user-supplied function, prepared once so that each call is cheap."""

    __slots__ = ("function", "is_async", "label", "takes")

    def __init__(self, function: Callable[..., Any], offered: int, label: str) -> None:
        capacity = positional_capacity(function)
        self.function = function
        self.takes = offered if capacity is None else min(capacity, offered)
        self.is_async = is_async_callable(function)
        self.label = label

    async def __call__(self, *args: Any) -> Any:
        args = args[: self.takes]
        if self.is_async:
            return await self.function(*args)
        outcome = in_worker_thread(self.function, args, self.label)
        try:
            result = await outcome
        except asyncio.CancelledError:  # it may have answered just as we were cancelled: nobody will await that
            if outcome.done() and not outcome.cancelled() and outcome.exception() is None:
                _close(outcome.result())
            raise
        if inspect.isawaitable(result):
            result = await result
        return result


def _close(value: Any) -> None:
    """Close a coroutine nobody will await, so that Python does not warn it was never awaited."""
    if inspect.iscoroutine(value):
        value.close()


def in_worker_thread(function: Callable[..., Any], args: tuple[Any, ...], label: str) -> asyncio.Future[Any]:
    """Run `function(*args)` on a worker thread; return a future of its outcome.

    If the awaiting side gives up (the future is cancelled), the thread is
    abandoned: it finishes on its own, its result is dropped, and until then
    it counts as stuck (see the thread policy above).
    Without threads (Pyodide) it runs here and now, and the future is done.
    """
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Any] = loop.create_future()
    if not THREADS:
        task = asyncio.current_task()
        _INLINE.add(task)
        try:
            ok, value = _outcome(function, args, label)
        finally:
            _INLINE.discard(task)
        if ok:
            future.set_result(value)
        else:
            future.set_exception(value)
        return future
    job = _Job(function, args, label, loop, future)
    future.add_done_callback(job.abandon_if_cancelled)
    _POOL.submit(job)
    return future


def running_inline() -> set[asyncio.Task[Any] | None]:
    """With no threads: the tasks in the middle of a plain callee now (held there, as a thread would be), and,
    while there is one, the `asyncio.sleep` tasks that a browser's suspended `time.sleep` waits on."""
    if not _INLINE:
        return set()
    sleeps = {task for task in asyncio.all_tasks() if getattr(task.get_coro(), "cr_code", None) is _SLEEP}
    return {*_INLINE, *sleeps}


_SLEEP = asyncio.sleep.__code__


# With no threads: the tasks whose step is running a plain callee inline. Where `time.sleep` lets the event loop
# run meanwhile (a browser), such a task may be cancelled and seem to ignore it until the callee returns.
_INLINE: set[asyncio.Task[Any] | None] = set()


def stuck() -> list[str]:
    """The callees that runs gave up on and that still hold their worker thread, by label."""
    with _POOL.lock:
        return [job.label for job in _POOL.stuck]


def _outcome(function: Callable[..., Any], args: tuple[Any, ...], label: str) -> tuple[bool, Any]:
    """Call `function(*args)`: (True, its value) or (False, what it raised), for a future to carry."""
    try:
        return True, function(*args)
    except StopIteration as error:  # a future cannot carry it; like a coroutine's, it becomes a RuntimeError
        value = RuntimeError(f"the {label} raised StopIteration")
        value.__cause__ = error
        return False, value
    except (KeyboardInterrupt, SystemExit) as error:
        if not THREADS:  # inline, on the loop's own thread: Ctrl-C and exit go on up, as anywhere else
            raise
        return False, error  # on a worker thread: handed to the awaiting side, like any error
    except BaseException as error:  # handed to the awaiting side, whatever it is
        return False, error


class _Job:
    """One call of a plain function on a worker thread, and how its outcome gets back to the event loop."""

    __slots__ = ("args", "finished", "function", "future", "label", "loop")

    def __init__(
        self,
        function: Callable[..., Any],
        args: tuple[Any, ...],
        label: str,
        loop: asyncio.AbstractEventLoop,
        future: asyncio.Future[Any],
    ) -> None:
        self.function, self.args, self.label, self.loop, self.future = function, args, label, loop, future
        self.finished = False

    def run(self) -> None:
        ok, value = _outcome(self.function, self.args, self.label)
        self.function = self.args = None  # type: ignore[assignment]  # nothing kept alive by an idle thread
        _POOL.finish(self)
        if self.future.done():  # given up on already: close it here, not in a callback a closing loop may drop
            _close(value)
            return
        try:
            self.loop.call_soon_threadsafe(self.deliver, ok, value)
        except RuntimeError:  # the event loop is closed: the run was abandoned
            _close(value)

    def deliver(self, ok: bool, value: Any) -> None:
        if self.future.done():
            _close(value)  # nobody will await it
        elif ok:
            self.future.set_result(value)
        else:
            self.future.set_exception(value)

    def abandon_if_cancelled(self, future: asyncio.Future[Any]) -> None:
        if future.cancelled():
            _POOL.abandon(self)


class _Pool:
    """Worker threads that are reused, and the count of stuck ones (see the thread policy above)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.idle: list[tuple[queue.SimpleQueue[_Job], threading.Thread]] = []  # each idle worker's inbox
        self.stuck: list[_Job] = []

    def submit(self, job: _Job) -> None:
        with self.lock:
            inbox, worker = self.idle.pop() if self.idle else (None, None)
            if worker is not None:
                worker.name = f"agentlab {job.label}"  # busy from now on, for whoever looks for busy workers
            if inbox is None and len(self.stuck) >= MAX_STUCK:
                held = ", ".join(sorted({stuck.label for stuck in self.stuck}))
                raise StuckCalleeError(
                    f"{len(self.stuck)} worker threads are stuck in a plain (sync) {held} that earlier runs gave "
                    f"up on and that never returned (MAX_STUCK={MAX_STUCK}); make it return when its signal is "
                    f"aborted (signal.wait_sync(timeout) instead of time.sleep), or use an async def one"
                )
        if inbox is None:
            inbox = queue.SimpleQueue()
            threading.Thread(target=self.work, args=(inbox,), name=f"agentlab {job.label}", daemon=True).start()
        inbox.put(job)

    def work(self, inbox: queue.SimpleQueue[_Job]) -> None:
        me = threading.current_thread()
        while True:
            try:
                job = inbox.get(timeout=IDLE_S)
            except queue.Empty:
                with self.lock:
                    if (inbox, me) in self.idle:  # nobody is handing it a job: end
                        self.idle.remove((inbox, me))
                        return
                continue  # a job is on its way
            job.run()
            with self.lock:
                me.name = "idle agentlab worker"
                self.idle.append((inbox, me))

    def abandon(self, job: _Job) -> None:
        with self.lock:
            if not job.finished:
                self.stuck.append(job)

    def finish(self, job: _Job) -> None:
        with self.lock:
            job.finished = True
            if job in self.stuck:
                self.stuck.remove(job)


_POOL = _Pool()


# -- errors the loop never swallows, and tasks it gives up on ------------------------------------------------------


def passes_through(error: BaseException) -> bool:
    """Errors the loop must never swallow: Ctrl-C, exit, and a real cancellation of this task."""
    if isinstance(error, (KeyboardInterrupt, SystemExit)):
        return True
    if isinstance(error, asyncio.CancelledError):
        task = asyncio.current_task()
        return task is not None and task.cancelling() > 0
    return False


# Tasks the loop gave up on that have not ended yet (a tool may swallow its cancellation). Held here so that
# the garbage collector cannot destroy one while it is pending ("Task was destroyed but it is pending").
_ABANDONED: set[asyncio.Task[Any]] = set()


def abandon(task: asyncio.Task[Any]) -> None:
    """Cancel a task the run no longer waits for, and keep it alive until it ends."""
    task.cancel()
    if not task.done():
        _ABANDONED.add(task)
    task.add_done_callback(_retrieve)


def _retrieve(task: asyncio.Task[Any]) -> None:
    """Mark an abandoned task's own error as seen, so asyncio does not log it as never retrieved."""
    _ABANDONED.discard(task)
    if not task.cancelled():
        task.exception()


# How late a deadline may be noticed before the error blames a plain callee that held the loop (no threads).
HELD_S = 0.02


def held_the_loop(late_s: float) -> str:
    """What a deadline error says to change when, with no threads, a plain callee ran on past it ("" if not)."""
    if THREADS or late_s < HELD_S:
        return ""
    return (
        f"a plain (sync) function held the event loop {late_s * 1000:,.0f} ms past the deadline (with no threads, "
        f"as in a browser, it runs on the loop's own thread): make it async def, or make it return sooner"
    )


def in_background(function: Callable[[], Any], name: str, loop: asyncio.AbstractEventLoop) -> None:
    """Call `function()` without waiting for it: on a daemon thread, or, with no threads (Pyodide), soon on `loop`."""
    if THREADS:
        threading.Thread(target=function, name=name, daemon=True).start()
    else:
        loop.call_soon(function)


def call_soon_threadsafe(loop: asyncio.AbstractEventLoop, callback: Callable[..., Any], *args: Any) -> None:
    """Schedule `callback(*args)` on `loop` from any thread; nothing if the loop is already closed."""
    with contextlib.suppress(RuntimeError):  # the loop is closed: the run is long over
        loop.call_soon_threadsafe(callback, *args)


__all__ = [
    "IDLE_S",
    "MAX_STUCK",
    "THREADS",
    "Callee",
    "abandon",
    "call_soon_threadsafe",
    "held_the_loop",
    "in_background",
    "in_worker_thread",
    "is_async_callable",
    "passes_through",
    "positional_capacity",
    "running_inline",
    "stuck",
]
