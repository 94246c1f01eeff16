"""A cancellation signal, modelled on the web's AbortController.

One side holds the controller and may call `abort(reason)`; the other side
gets the read-only `signal` and asks `signal.aborted`, awaits `signal.wait()`,
blocks on `signal.wait_sync()` (in a worker thread) or registers a callback.

A signal is a *request* to stop. Well-behaved models and tools honour it, but
the loop never relies on that: its deadline and its external abort hold even
for callees that ignore the signal entirely.

Everything here is thread-safe, because sync models and tools run in worker
threads and a Stop button may press from another thread.

A listener (a callback) that raises must not keep the abort from the others:
each one is called whatever the ones before it did, and what one raised is
logged (logger "agentlab"), never raised at the caller of `abort()`. A listener that blocks, blocks the
thread that aborts: keep them short.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from typing import Any

from agentlab import callees
from agentlab.errors import AbortError, ConfigError

# With no threads, how long `wait_sync` sleeps between two looks at the signal.
WAIT_SLICE_S = 0.005

Callback = Callable[[BaseException], Any]


class AbortSignal:
    """Read-only side: has the run been asked to stop, and why?"""

    # __weakref__: a store tells runs apart by their signal, and forgets a run with it (agentlab/writes/store.py).
    __slots__ = ("__weakref__", "_callbacks", "_event", "_lock", "_reason")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._event = threading.Event()
        self._reason: BaseException | None = None
        self._callbacks: list[Callback] = []

    @property
    def aborted(self) -> bool:
        return self._event.is_set()

    @property
    def reason(self) -> BaseException | None:
        """The exception given to `abort()`, or None while not aborted."""
        return self._reason

    def throw_if_aborted(self) -> None:
        """Raise the abort reason if the signal is aborted; otherwise do nothing."""
        if self._event.is_set():
            raise self._reason  # type: ignore[misc]

    def add_callback(self, callback: Callback, *, first: bool = False) -> Callable[[], None]:
        """Call `callback(reason)` once on abort (at once if already aborted).

        Returns a function that unregisters the callback. The callback runs in
        the thread that aborts; use `loop.call_soon_threadsafe` inside it to
        touch asyncio objects. `first=True` puts it before those registered
        already: the loop's own wake-up does, so that a slow listener cannot
        delay it.
        """
        with self._lock:
            if not self._event.is_set():
                self._callbacks.insert(0, callback) if first else self._callbacks.append(callback)
                return lambda: self._discard(callback)
        callback(self._reason)  # type: ignore[arg-type]
        return lambda: None

    def _discard(self, callback: Callback) -> None:
        with self._lock:
            if callback in self._callbacks:
                self._callbacks.remove(callback)

    async def wait(self) -> BaseException:
        """Wait (asynchronously) until aborted; return the reason."""
        if self._event.is_set():
            return self._reason  # type: ignore[return-value]
        loop = asyncio.get_running_loop()
        done: asyncio.Future[BaseException] = loop.create_future()

        def settle(reason: BaseException) -> None:
            if not done.done():
                done.set_result(reason)

        remove = self.add_callback(lambda reason: loop.call_soon_threadsafe(settle, reason))
        try:
            return await done
        finally:
            remove()

    def wait_sync(self, timeout: float | None = None) -> bool:
        """Block this thread until aborted or `timeout` seconds; True if aborted.

        Meant for sync tools and models, which run in worker threads. With no
        threads (a browser's Pyodide) it sleeps in short slices instead, since
        there `time.sleep` lets the event loop run meanwhile (and so abort it).
        """
        if callees.THREADS:
            return self._event.wait(timeout)
        until = None if timeout is None else time.monotonic() + timeout
        while not self._event.is_set():
            left = WAIT_SLICE_S if until is None else min(WAIT_SLICE_S, until - time.monotonic())
            if left <= 0:
                return False
            time.sleep(left)
        return True

    def __repr__(self) -> str:
        if not self.aborted:
            return "<AbortSignal: not aborted>"
        return f"<AbortSignal: aborted ({type(self._reason).__name__}: {self._reason})>"


class AbortController:
    """Writable side: `abort(reason)` aborts `signal`, once; later calls do nothing."""

    __slots__ = ("signal",)

    def __init__(self) -> None:
        self.signal = AbortSignal()

    def abort(self, reason: BaseException | str | None = None) -> None:
        """Abort the signal. No reason means `AbortError`; a string becomes one."""
        if reason is None:
            reason = AbortError("aborted: the run was stopped from outside")
        elif isinstance(reason, str):
            reason = AbortError(f"aborted: {reason}")
        elif not isinstance(reason, BaseException):
            raise ConfigError(f"abort reason must be an exception or a string, not {type(reason).__name__}")
        call_listeners = self.abort_later(reason)
        if call_listeners is not None:
            call_listeners()

    def abort_later(self, reason: BaseException) -> Callable[[], None] | None:
        """Abort the signal now; return a function that calls its listeners (None if it has none).

        For a caller that must not wait for them: the loop, whose thread keeps
        the deadline, calls them on another thread.
        """
        signal = self.signal
        with signal._lock:
            if signal._event.is_set():
                return None
            signal._reason = reason
            signal._event.set()
            callbacks, signal._callbacks = signal._callbacks, []
        if not callbacks:
            return None

        def call_listeners() -> None:
            for callback in callbacks:
                _call_listener(callback, reason)

        return call_listeners

    def __repr__(self) -> str:
        return f"<AbortController {self.signal!r}>"


def _call_listener(callback: Callback, reason: BaseException) -> None:
    """Call one abort listener; what it raises is logged, and never stops the abort reaching the others."""
    try:
        callback(reason)
    except Exception:
        import logging  # only on this rare path: `import agentlab` stays quick

        logging.getLogger("agentlab").exception("an abort listener raised; the abort went on to the others")


__all__ = ["AbortController", "AbortSignal"]
