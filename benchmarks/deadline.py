"""How far past `timeout_ms` does the deadline fire, and how fast does an abort land?

    python benchmarks/deadline.py [--runs 200] [--timeout-ms 20]

Four callees that ignore the signal: an async model that never answers, a
plain model that blocks its thread, and an async / blocking tool that hangs.
For each: the overrun (time from `timeout_ms` to the raised DeadlineError)
and, separately, the abort latency (time from `abort()` to the raised reason).

Alongside, at the same moments, the raw event loop: how late a bare
`asyncio.sleep(timeout_ms)` wakes, and how late a task resumes after a timer
callback sets its future. No loop on asyncio can beat these; on a busy
machine they, not the loop, set the floor.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

from bench import percentile

from agentlab import AbortController, DeadlineError, Tool, agent_loop
from agentlab.lab.fakes import Blocks, NeverAnswers, Scripted, call, calls

RAW = "raw asyncio (no agent loop)"


def _hang_tools(blocking: bool) -> dict[str, Tool]:
    def block(value):
        time.sleep(1)

    async def hang(value):
        await asyncio.get_running_loop().create_future()

    return {"hang": Tool(validate=lambda args: None, run=block if blocking else hang)}


CALLEES = {
    "async model, ignores the signal": lambda: (NeverAnswers(), {}),
    "sync model, blocks its thread": lambda: (Blocks(1), {}),
    "async tool, never returns": lambda: (Scripted(calls(call("hang", {}, "c1"))), _hang_tools(False)),
    "sync tool, blocks its thread": lambda: (Scripted(calls(call("hang", {}, "c1"))), _hang_tools(True)),
}


async def overrun_ms(make, timeout_ms: float) -> float:
    model, tools = make()
    started = time.perf_counter()
    try:
        await agent_loop("q", model, tools, timeout_ms=timeout_ms)
    except DeadlineError:
        return (time.perf_counter() - started) * 1000 - timeout_ms
    raise AssertionError("the deadline did not fire")


async def abort_latency_ms(make, after_ms: float) -> float:
    model, tools = make()
    controller = AbortController()
    fired: list[float] = []

    def abort() -> None:
        fired.append(time.perf_counter())
        controller.abort(RuntimeError("stop"))

    asyncio.get_running_loop().call_later(after_ms / 1000, abort)
    try:
        await agent_loop("q", model, tools, signal=controller.signal)
    except RuntimeError:
        return (time.perf_counter() - fired[0]) * 1000
    raise AssertionError("the abort did not land")


async def raw_sleep_lateness_ms(timeout_ms: float) -> float:
    """How late a bare `asyncio.sleep` wakes: the event loop's own timer lateness."""
    started = time.perf_counter()
    await asyncio.sleep(timeout_ms / 1000)
    return (time.perf_counter() - started) * 1000 - timeout_ms


async def raw_wakeup_ms(after_ms: float) -> float:
    """How long from a timer callback setting a future to the waiting task running again."""
    loop = asyncio.get_running_loop()
    woken: asyncio.Future[float] = loop.create_future()
    loop.call_later(after_ms / 1000, lambda: woken.set_result(time.perf_counter()))
    fired = await woken
    return (time.perf_counter() - fired) * 1000


async def measure_all(runs: int, timeout_ms: float) -> dict[str, dict[str, list[float]]]:
    """Samples in ms for every callee, and for the raw event loop measured between them."""
    cases: dict[str, dict[str, list[float]]] = {RAW: {"overrun": [], "abort": []}}
    for name, make in CALLEES.items():
        cases[name] = {"overrun": [], "abort": []}
        for _ in range(runs):
            cases[name]["overrun"].append(await overrun_ms(make, timeout_ms))
            cases[RAW]["overrun"].append(await raw_sleep_lateness_ms(timeout_ms))
            cases[name]["abort"].append(await abort_latency_ms(make, timeout_ms))
            cases[RAW]["abort"].append(await raw_wakeup_ms(timeout_ms))
    return cases


def summary(samples: list[float]) -> str:
    return f"median {statistics.median(samples):6.3f}  p99 {percentile(samples, 0.99):6.3f}  worst {max(samples):6.3f}"


async def main(runs: int, timeout_ms: float) -> None:
    print(f"{runs} runs each, timeout_ms={timeout_ms:g}; figures in ms")
    for name, samples in (await measure_all(runs, timeout_ms)).items():
        print(f"{name:<34} deadline overrun: {summary(samples['overrun'])}")
        print(f"{'':<34} abort latency:    {summary(samples['abort'])}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--timeout-ms", type=float, default=20)
    options = parser.parse_args()
    asyncio.run(main(options.runs, options.timeout_ms))
