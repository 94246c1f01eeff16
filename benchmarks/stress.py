"""1,000 agent loops at once in one event loop, each against its own random faults.

    python benchmarks/stress.py [--loops 1000] [--rounds 3] [--seed 6] [--async-only]

Each loop plays a random `Scenario` from `agentlab.testing.adversaries` (a hostile
model and tools, random limits, maybe an abort or a cancellation) with a
timeout of 100-1000 ms, leaving out the values that are only heavy (a 5,000
level list, 200 kB strings: see `adversaries.HEAVY`; the soak has those).
All of a round's loops run at the same time on one event loop. For each
round it prints the outcomes, the invariant violations (must be 0: every run
ends within its deadline or abort and leaves no task or thread behind), the
deadline overrun and abort latency (p50/p99/max, raw and past a plain timer
for the same moment), and the memory (allocated blocks, RSS after a full
collection), pending tasks, live threads and open file descriptors, before
the first round and after each one.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import gc
import os
import sys
import threading
import time
from typing import Any

from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st
from soak import percentiles  # benchmarks/ is the script's folder, so its first import path

from agentlab.testing.adversaries import Report, Scenario, install, is_light, leaked_threads, play, scenarios


def all_async(scenario: Scenario) -> bool:
    """No sync model or tool: nothing runs in a worker thread."""
    return not scenario.model_sync and not any(plan.sync for _, plan in scenario.tools)


def draw_scenarios(count: int, seed_value: int, only_async: bool = False) -> list[Scenario]:
    """`count` random scenarios, with timeouts long enough for several turns each."""
    drawn: list[Scenario] = []

    @seed(seed_value)
    @settings(
        max_examples=count,
        deadline=None,
        database=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(scenarios(timeouts=st.integers(100, 1000)).filter(is_light).filter(all_async if only_async else bool))
    def collect(scenario: Scenario) -> None:
        drawn.append(scenario)

    collect()
    return drawn


def resources() -> dict[str, int]:
    """What a leak would grow: memory, tasks, threads, file descriptors."""
    gc.collect()
    with open("/proc/self/statm") as statm:
        rss_pages = int(statm.read().split()[1])
    pending = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    return {
        "allocated blocks": sys.getallocatedblocks(),
        "RSS MiB": rss_pages * os.sysconf("SC_PAGE_SIZE") // 2**20,
        "pending tasks": len(pending),
        "threads": threading.active_count(),
        "open fds": len(os.listdir("/proc/self/fd")),
    }


async def one_round(drawn: list[Scenario]) -> list[Report]:
    return await asyncio.gather(*(play(scenario) for scenario in drawn))


async def main(loops: int, rounds: int, seed_value: int, only_async: bool) -> int:
    install(asyncio.get_running_loop())
    drawn = draw_scenarios(loops, seed_value, only_async)
    kind = "async models and tools only" if only_async else "sync and async models and tools"
    print(f"stress: {len(drawn)} agent loops at once in one event loop, {kind}, {rounds} rounds (seed {seed_value})")
    await one_round(drawn[:50])  # warm up: imports, caches, the first threads
    leaked_threads()
    baseline = resources()
    print(f"before:   {baseline}")
    failures = 0
    for number in range(1, rounds + 1):
        started = time.perf_counter()
        reports = await one_round(drawn)
        seconds = time.perf_counter() - started
        leaks = leaked_threads(grace_s=2.0)
        violations = [v for r in reports for v in r.violations] + leaks
        failures += len(violations)
        outcomes = collections.Counter(r.outcome for r in reports)
        print(f"round {number}: {len(reports)} runs in {seconds:.1f} s; invariant violations: {len(violations)}")
        for shown in violations[:5]:
            print(f"  - {shown}")
        print("  outcomes: " + ", ".join(f"{name} {count}" for name, count in outcomes.most_common()))
        overruns: list[Any] = [r for r in reports if r.overrun_ms is not None]
        aborted: list[Any] = [r for r in reports if r.abort_latency_ms is not None]
        print(f"  deadline overrun ms                 {percentiles([r.overrun_ms for r in overruns])}")
        print(f"    of which after the plain timer    {percentiles([r.loop_overrun_ms or 0 for r in overruns])}")
        print(f"  abort latency ms                    {percentiles([r.abort_latency_ms for r in aborted])}")
        print(f"    of which after the loop woke      {percentiles([r.loop_abort_latency_ms or 0 for r in aborted])}")
        del reports, overruns, aborted
        after = resources()
        growth = {key: after[key] - baseline[key] for key in after}
        print(f"  after:  {after}")
        print(f"  growth: {growth}")
    return 1 if failures else 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--loops", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seed", type=int, default=6)
    parser.add_argument("--async-only", action="store_true", help="no sync callee, so no worker thread")
    options = parser.parse_args()
    sys.exit(asyncio.run(main(options.loops, options.rounds, options.seed, options.async_only)))
