"""`agent_loop` from code that is not async: scripts, the CLI, and Jupyter cells.

The loop itself is async (`agentlab.loop`). `agent_loop_sync` runs it on an
event loop of its own, and `run_on_new_loop` is that runner, shared with the
playground: like `asyncio.run`, except that it never waits longer than the
loop's grace for a task that refuses to be cancelled.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Mapping
from typing import Any

from agentlab.abort import AbortController, AbortSignal
from agentlab.errors import AbortError, ConfigError
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
) -> AgentResult:
    """`agent_loop` for code that is not async: scripts, and Jupyter cells too.

    With no event loop running in this thread, the run gets one of its own.
    Inside a running loop (a Jupyter cell), the run happens on a helper thread
    with its own loop, and this call waits for it. Either way it returns as
    promptly as `agent_loop`: an abandoned blocking model cannot hold it.
    """
    if signal is not None and not isinstance(signal, AbortSignal):
        raise ConfigError("signal must be an AbortSignal, such as AbortController().signal")
    stop = AbortController()  # aborted by the caller's signal, and by Ctrl-C while we wait
    forget_signal = signal.add_callback(stop.abort) if signal is not None else (lambda: None)
    options = dict(
        max_turns=max_turns,
        max_calls=max_calls,
        timeout_ms=timeout_ms,
        max_chars=max_chars,
        signal=stop.signal,
        forbid_repeats=forbid_repeats,
        approve=approve,
        max_writes=max_writes,
    )

    def start() -> Any:
        return agent_loop(input, model, tools, **options)

    try:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return run_on_new_loop(start)
        return run_on_helper_thread(start)
    except BaseException:
        stop.abort(AbortError("aborted: the run ended early"))
        raise
    finally:
        forget_signal()


def run_on_helper_thread(start: Callable[[], Any]) -> Any:
    """Run on a new thread with its own event loop, and wait for it here."""
    outcome: dict[str, Any] = {}

    def on_helper_thread() -> None:
        try:
            outcome["result"] = run_on_new_loop(start)
        except BaseException as error:
            outcome["error"] = error

    helper = threading.Thread(target=on_helper_thread, name="agentlab agent_loop_sync", daemon=True)
    helper.start()
    helper.join()
    if "error" in outcome:
        raise outcome["error"]
    return outcome["result"]


def run_on_new_loop(start: Callable[[], Any]) -> Any:
    """Like asyncio.run, but never waits longer than the grace for abandoned tasks."""
    loop = asyncio.new_event_loop()
    try:
        return loop.run_until_complete(start())
    finally:
        leftovers = [task for task in asyncio.all_tasks(loop) if not task.done()]
        for task in leftovers:
            task.cancel()
        if leftovers:
            loop.run_until_complete(asyncio.wait(leftovers, timeout=CANCEL_GRACE_MS / 1000))
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()


__all__ = ["agent_loop_sync", "run_on_helper_thread", "run_on_new_loop"]
