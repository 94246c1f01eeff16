"""How the loop calls code it does not own: models, tools and approval policies.

Two conveniences and one safety rule:

* A callee may be `async def` or a plain function, and a plain function may
  return an awaitable (which is then awaited).
* Like JavaScript, a callee may take fewer parameters than the loop offers:
  `async def model(messages)` is as good as `async def model(messages, signal)`.
* A plain function runs in a worker thread, never on the event loop's thread,
  so a blocking one (`time.sleep`, a slow HTTP client) cannot freeze the loop
  and its deadline. The thread is a daemon: a callee that never returns may be
  abandoned by the run and cannot keep the interpreter from exiting.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import Callable
from typing import Any


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
    """Run `function(*args)` in a new daemon thread; return a future of its outcome.

    If the awaiting side gives up (the future is cancelled), the thread is
    abandoned: it finishes on its own and its result is dropped.
    """
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Any] = loop.create_future()

    def deliver(ok: bool, value: Any) -> None:
        if future.done():
            _close(value)  # nobody will await it
            return
        if ok:
            future.set_result(value)
        else:
            future.set_exception(value)

    def work() -> None:
        try:
            value, ok = function(*args), True
        except StopIteration as error:  # a future cannot carry it; like a coroutine's, it becomes a RuntimeError
            value, ok = RuntimeError(f"the {label} raised StopIteration"), False
            value.__cause__ = error
        except BaseException as error:  # handed to the awaiting side, whatever it is
            value, ok = error, False
        try:
            loop.call_soon_threadsafe(deliver, ok, value)
        except RuntimeError:  # the event loop is closed: the run was abandoned
            _close(value)

    threading.Thread(target=work, name=f"agentlab {label}", daemon=True).start()
    return future


__all__ = ["Callee", "in_worker_thread", "is_async_callable", "positional_capacity"]
