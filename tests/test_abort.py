"""AbortController and AbortSignal: once, with a reason, thread-safe, awaitable."""

from __future__ import annotations

import asyncio
import threading

import pytest

from agentlab import AbortController, AbortError, ConfigError


def test_a_fresh_signal_is_not_aborted() -> None:
    signal = AbortController().signal
    assert not signal.aborted and signal.reason is None
    signal.throw_if_aborted()


def test_abort_without_a_reason_uses_an_abort_error() -> None:
    controller = AbortController()
    controller.abort()
    assert controller.signal.aborted
    assert isinstance(controller.signal.reason, AbortError)
    with pytest.raises(AbortError):
        controller.signal.throw_if_aborted()


def test_a_string_reason_becomes_an_abort_error_and_an_exception_is_kept_as_is() -> None:
    controller = AbortController()
    controller.abort("user left")
    assert str(controller.signal.reason) == "aborted: user left"
    reason = RuntimeError("stop")
    other = AbortController()
    other.abort(reason)
    assert other.signal.reason is reason
    with pytest.raises(ConfigError):
        AbortController().abort(42)  # type: ignore[arg-type]


def test_only_the_first_abort_counts_and_callbacks_run_once() -> None:
    controller = AbortController()
    seen = []
    controller.signal.add_callback(seen.append)
    first = RuntimeError("first")
    controller.abort(first)
    controller.abort(RuntimeError("second"))
    assert seen == [first] and controller.signal.reason is first


def test_a_callback_added_after_the_abort_runs_at_once_and_one_removed_never_runs() -> None:
    controller = AbortController()
    seen = []
    forget = controller.signal.add_callback(lambda reason: seen.append("removed"))
    forget()
    controller.abort()
    controller.signal.add_callback(lambda reason: seen.append("late"))
    assert seen == ["late"]


async def test_wait_returns_the_reason_when_aborted_from_another_thread() -> None:
    controller = AbortController()
    reason = RuntimeError("from a thread")
    threading.Timer(0.01, controller.abort, (reason,)).start()
    assert await asyncio.wait_for(controller.signal.wait(), 2) is reason


def test_wait_sync_blocks_until_aborted_or_the_timeout() -> None:
    controller = AbortController()
    assert controller.signal.wait_sync(0.01) is False
    threading.Timer(0.01, controller.abort).start()
    assert controller.signal.wait_sync(2) is True


def test_repr_says_whether_and_why() -> None:
    controller = AbortController()
    assert "not aborted" in repr(controller.signal)
    controller.abort("done")
    assert "AbortError" in repr(controller)
