"""A long campaign of adversarial runs: does the loop hold on every one of them?

    python benchmarks/soak.py [--examples 100000] [--jobs 2] [--seed 6]

Each example is a random `Scenario` from `agentlab.testing.adversaries` (a hostile
model, hostile tools, random limits, maybe an abort or a cancellation), played
on a fresh event loop and checked against every invariant of issue 6. Prints
the examples run, the outcomes by type, the invariant violations (must be 0,
the first few are shown with their scenario), the deadline overrun (how long
after timeout_ms a DeadlineError was raised) and the abort latency (how long
after abort() the run ended), as p50/p99/max in ms, plus the file descriptors
and threads of each worker before and after. Next to each time, the part that
came after a plain asyncio timer for the same moment ran: on a busy host every
timer is late, and that part is what the loop itself adds.

The same scenarios in a few hundred deterministic examples run in `make test`
(tests/test_properties.py); this is the long random version.
"""

from __future__ import annotations

import argparse
import collections
import multiprocessing
import os
import sys
import threading
import time
from typing import Any

from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st

from agentlab.testing.adversaries import MARGIN_MS, STALL_S, STALLS, run_scenario, scenarios

SHOWN_VIOLATIONS = 5
# Shorter than the test suite's (0-30 ms, and 200 ms now and then), so that 100,000 examples fit in an hour.
SOAK_TIMEOUTS = st.one_of(*[st.integers(0, 20)] * 9, st.just(100))


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd")) if os.path.isdir("/proc/self/fd") else -1


def campaign(examples: int, seed_value: int, worker: int) -> dict[str, Any]:
    """Run `examples` scenarios in this process; return the tallies."""
    outcomes: collections.Counter[str] = collections.Counter()
    overruns: list[float] = []
    aborts: list[float] = []
    beyond_timer: list[float] = []
    timer_lateness: list[float] = []
    aborts_beyond: list[float] = []
    violations: list[str] = []
    violating = 0
    fds_before, threads_before = open_fds(), threading.active_count()
    started = time.perf_counter()

    @seed(seed_value)
    @settings(
        max_examples=examples,
        deadline=None,
        database=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(scenarios(timeouts=SOAK_TIMEOUTS))
    def one(scenario: Any) -> None:
        nonlocal violating
        report = run_scenario(scenario)
        outcomes[report.outcome] += 1
        if report.overrun_ms is not None:
            overruns.append(report.overrun_ms)
            beyond_timer.append(report.loop_overrun_ms or 0.0)
        if report.timer_lateness_ms is not None:
            timer_lateness.append(report.timer_lateness_ms)
        if report.abort_latency_ms is not None:
            aborts.append(report.abort_latency_ms)
            aborts_beyond.append(report.loop_abort_latency_ms or 0.0)
        if report.violations:
            violating += 1
            shown = f"{report.violations}\n    in {scenario!r}"
            print(f"  worker {worker} violation: {shown}", file=sys.stderr, flush=True)
            if len(violations) < SHOWN_VIOLATIONS:
                violations.append(shown)
        done = sum(outcomes.values())
        if done % 5000 == 0:
            rate = done / (time.perf_counter() - started)
            print(
                f"  worker {worker}: {done} examples, {violating} violating, {rate:.0f}/s; "
                f"overrun {percentiles(overruns)}; abort {percentiles(aborts)}; {dict(outcomes.most_common())}",
                file=sys.stderr,
                flush=True,
            )

    one()
    return {
        "outcomes": outcomes,
        "overruns": overruns,
        "aborts": aborts,
        "beyond_timer": beyond_timer,
        "timer_lateness": timer_lateness,
        "aborts_beyond": aborts_beyond,
        "violating": violating,
        "violations": violations,
        "fds": (fds_before, open_fds()),
        "threads": (threads_before, threading.active_count()),
        "seconds": time.perf_counter() - started,
        "stalls": (STALLS.count, STALLS.total_s, STALLS.longest_s),
    }


def _work(args: tuple[int, int, int]) -> dict[str, Any]:
    return campaign(*args)


def percentiles(samples: list[float]) -> str:
    if not samples:
        return "(none)"
    ordered = sorted(samples)

    def at(p: float) -> float:
        return ordered[min(len(ordered) - 1, round(p * (len(ordered) - 1)))]

    return f"p50 {at(0.5):7.2f}  p99 {at(0.99):7.2f}  max {ordered[-1]:7.2f}  (n={len(ordered)})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--examples", type=int, default=100_000)
    parser.add_argument("--jobs", type=int, default=1, help="worker processes, each with its own seed")
    parser.add_argument("--seed", type=int, default=6)
    options = parser.parse_args()
    share = [options.examples // options.jobs + (i < options.examples % options.jobs) for i in range(options.jobs)]
    started = time.perf_counter()
    work = [(n, options.seed + i, i) for i, n in enumerate(share)]
    if options.jobs == 1:
        results = [_work(work[0])]
    else:
        with multiprocessing.get_context("spawn").Pool(options.jobs) as pool:
            results = pool.map(_work, work)
    outcomes: collections.Counter[str] = collections.Counter()
    for result in results:
        outcomes.update(result["outcomes"])
    total = sum(outcomes.values())
    violating = sum(r["violating"] for r in results)
    print(
        f"soak: {total} examples in {time.perf_counter() - started:.0f} s "
        f"({options.jobs} worker(s), seed {options.seed})"
    )
    print("outcomes by type:")
    for name, count in outcomes.most_common():
        print(f"  {name:<28} {count:>7}  {100 * count / total:5.1f}%")
    print(f"invariant violations: {violating} (margin for time: {MARGIN_MS} ms past the deadline or the abort)")
    for result in results:
        for shown in result["violations"]:
            print(f"  - {shown}")

    def gathered(key: str) -> str:
        return percentiles([x for r in results for x in r[key]])

    print("times in ms (a plain timer: an asyncio call_later set for the same moment, in the same run):")
    print(f"  deadline overrun                   {gathered('overruns')}")
    print(f"    of which after the plain timer   {gathered('beyond_timer')}")
    print(f"  plain timer lateness at deadline   {gathered('timer_lateness')}")
    print(f"  abort latency                      {gathered('aborts')}")
    print(f"    of which after the loop woke     {gathered('aborts_beyond')}")
    for i, result in enumerate(results):
        count, total, longest = result["stalls"]
        print(
            f"worker {i}: the whole process stalled (> {STALL_S * 1000:.0f} ms without running) {count} times, "
            f"{total:.1f} s in all, longest {longest * 1000:.0f} ms (taken off run times before they are checked)"
        )
        print(
            f"worker {i}: open fds {result['fds'][0]} -> {result['fds'][1]}, threads {result['threads'][0]} -> "
            f"{result['threads'][1]}, {result['seconds']:.0f} s"
        )
    sys.exit(1 if violating else 0)


if __name__ == "__main__":
    main()
