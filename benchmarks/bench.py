"""agentlab against a bare loop and the frameworks learners would use instead.

    make bench                                       # sets up benchmarks/.venv, then runs this
    benchmarks/.venv/bin/python benchmarks/bench.py [--rounds 5] [--budget 60]
    python benchmarks/bench.py --quick --systems agentlab,baseline   # the smoke run of `make test`

Every measurement runs in a fresh process (`worker.py`), the systems
interleaved over several rounds so that a busy moment of the machine hits
them all alike. It prints one table: µs per turn at 10 to 10,000 turns and
the ratio to the bare baseline, agentlab's deadline overrun and abort latency
next to the raw event loop's own lateness, import time, peak memory, and
10,000 loops at once. A framework is run at a size only if it is expected to
finish within `--budget` seconds (and is stopped if it does not).
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import os
import platform
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

from systems import SYSTEMS

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SIZES = (10, 100, 1_000, 10_000)
TARGETS_NOTE = (
    "targets (issue 8): ≤ 20 µs/turn at 100 turns; 10,000/100 ≤ 1.3; overrun and abort p99 ≤ 2 ms async, "
    "≤ 5 ms blocking; import ≤ 30 ms; peak RSS ≤ baseline + 3 MiB"
)

# The worker's environment: dummy keys, no telemetry, the repository importable.
WORKER_ENV = {
    "PYTHONPATH": str(ROOT),
    "OPENAI_API_KEY": "sk-dummy-the-benchmark-uses-no-network",
    "OPENAI_AGENTS_DISABLE_TRACING": "1",
    "OTEL_SDK_DISABLED": "true",
    "LOGFIRE_SEND_TO_LOGFIRE": "false",
    "DO_NOT_TRACK": "1",
}


@dataclass
class Figures:
    """Everything measured, gathered over the rounds."""

    per_turn: dict[str, dict[int, list[float]]] = field(default_factory=dict)
    skipped: dict[str, dict[int, str]] = field(default_factory=dict)
    rss_kib: dict[str, list[int]] = field(default_factory=dict)
    import_ms: dict[str, list[float]] = field(default_factory=dict)
    deadline: dict[str, dict[str, list[float]]] = field(default_factory=dict)
    concurrent: dict[str, dict | str] = field(default_factory=dict)
    network: list[str] = field(default_factory=list)


def worker(*args: object, timeout: float) -> dict | None:
    """Run one measurement in a fresh process; None if it ran out of time."""
    command = [sys.executable, str(HERE / "worker.py"), *map(str, args)]
    try:
        done = subprocess.run(
            command, env={**os.environ, **WORKER_ENV}, cwd=ROOT, capture_output=True, text=True, timeout=timeout
        )
    except subprocess.TimeoutExpired:
        return None
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command[1:])} failed:\n{done.stderr[-3000:]}")
    return ast.literal_eval(done.stdout.strip().splitlines()[-1].removeprefix("RESULT "))


def measure_turns(figures: Figures, names: list[str], options: argparse.Namespace) -> None:
    """The rounds: each system in turn, in a rotating order, at the sizes it runs in a round."""
    sizes = SIZES[:2] if options.quick else SIZES
    for round_number in range(options.rounds):
        shift = round_number % len(names)
        for name in names[shift:] + names[:shift]:
            in_round = sizes[:2] if SYSTEMS[name].framework else sizes
            found = worker(
                "turns", name, ",".join(map(str, in_round)), options.seconds, 200, timeout=options.budget * 10
            )
            assert found is not None, f"{name} did not finish a round"
            for size, samples in found["samples"].items():
                figures.per_turn.setdefault(name, {}).setdefault(size, []).extend(samples)
            figures.network += found["network_attempts"]
            memory = worker("memory", name, timeout=options.budget)
            figures.rss_kib.setdefault(name, []).append(memory["peak_rss_kib"])
            figures.network += memory["network_attempts"]
        print(f"  round {round_number + 1} of {options.rounds} done", file=sys.stderr)


def measure_long_runs(figures: Figures, names: list[str], options: argparse.Namespace) -> None:
    """A framework's 1,000- and 10,000-turn runs: once each, only if expected to fit the budget."""
    for name in names:
        if not SYSTEMS[name].framework or options.quick:
            continue
        for size in SIZES[2:]:
            expected_s = size * expected_us_per_turn(figures.per_turn[name], size) / 1e6
            if expected_s > options.budget:
                figures.skipped.setdefault(name, {})[size] = f"(~{expected_s:,.0f} s)"
                continue
            found = worker("turns", name, size, 0, 1, timeout=options.budget + 30)
            if found is None:
                figures.skipped.setdefault(name, {})[size] = f"(> {options.budget:g} s)"
                break
            figures.per_turn[name][size] = found["samples"][size]
            figures.network += found["network_attempts"]
            print(f"  {name}: {size:,} turns done", file=sys.stderr)


def expected_us_per_turn(per_turn: dict[int, list[float]], size: int) -> float:
    """Extrapolate µs per turn to `size` from the growth between the two largest sizes measured."""
    measured = sorted(per_turn)
    small, large = statistics.median(per_turn[measured[-2]]), statistics.median(per_turn[measured[-1]])
    growth = max(1.0, large / small) ** (1 if size <= measured[-1] * 10 else 2)
    return large * growth


def measure_imports(figures: Figures, names: list[str], repeats: int) -> None:
    """Wall time of `python -c "<import>"` minus that of `python -c pass`, interleaved.

    agentlab is installed editable, so nothing has compiled its bytecode yet (pip does that for an
    ordinary install, and this machine sets PYTHONDONTWRITEBYTECODE): compile it first, so that the
    import is measured as a learner's machine does it, not the compiler.
    """
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "agentlab")], check=True)
    statements = {"bare interpreter": "pass", **{name: SYSTEMS[name].imports for name in names}}
    for repeat in range(repeats):
        for name, statement in statements.items():
            if repeat >= max(3, repeats // 3) and SYSTEMS.get(name) and SYSTEMS[name].framework:
                continue  # a framework's import takes a second or two: fewer repeats
            started = time.perf_counter()
            subprocess.run([sys.executable, "-c", statement], env={**os.environ, **WORKER_ENV}, cwd=ROOT, check=True)
            figures.import_ms.setdefault(name, []).append((time.perf_counter() - started) * 1000)


def measure_concurrent(figures: Figures, names: list[str], options: argparse.Namespace) -> None:
    """`--loops` runs of 10 turns at once in one event loop, if expected to fit the budget."""
    for name in names:
        expected_s = options.loops * 10 * statistics.median(figures.per_turn[name][10]) / 1e6
        if SYSTEMS[name].framework and expected_s > options.budget:
            figures.concurrent[name] = f"skipped: ~{expected_s:,.0f} s expected"
            continue
        limit = options.budget if SYSTEMS[name].framework else 600
        found = worker("concurrent", name, options.loops, 10, timeout=limit)
        if found is None:
            figures.concurrent[name] = f"stopped: not done in {limit:g} s"
            continue
        figures.concurrent[name] = found
        figures.network += found["network_attempts"]


def versions() -> str:
    found = []
    for package in ("pydantic-ai-slim", "openai-agents"):
        with contextlib.suppress(metadata.PackageNotFoundError):
            found.append(f"{package} {metadata.version(package)}")
    return ", ".join([f"Python {platform.python_version()}", *found])


def median(samples: list[float]) -> float:
    return statistics.median(samples)


def percentile(samples: list[float], fraction: float) -> float:
    """The nearest-rank percentile: p99 of 200 samples is the 198th smallest."""
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def number(value: float) -> str:
    return f"{value:,.1f}" if value < 100 else f"{value:,.0f}"


def report(figures: Figures, names: list[str], options: argparse.Namespace, started: float) -> None:
    load = ", ".join(f"{value:.2f}" for value in os.getloadavg())
    print(f"\nagentlab benchmark · {versions()} · {os.cpu_count()} cores, load average {load}")
    print(f"{options.rounds} rounds, systems interleaved, each measurement in a fresh process", end="")
    print(f"; a framework's single run may take up to {options.budget:g} s")
    print("workload: a fake async model making one tool call per turn, a trivial async tool, no network\n")

    sizes = [size for size in SIZES if any(size in figures.per_turn[name] for name in names)]
    baseline = figures.per_turn.get("baseline")
    print("µs per turn (median)  " + "".join(f"{size:>12,}" for size in sizes) + "   10,000/100   × baseline @100")
    for name in names:
        cells = []
        for size in sizes:
            if size in figures.per_turn[name]:
                samples = figures.per_turn[name][size]
                cells.append(number(median(samples)) + ("¹" if len(samples) == 1 else " "))
            else:
                cells.append(figures.skipped.get(name, {}).get(size, "-"))
        mine = figures.per_turn[name]
        flat = f"{median(mine[10_000]) / median(mine[100]):.2f}" if 10_000 in mine else "-"
        ratio = number(median(mine[100]) / median(baseline[100])) if baseline else "-"
        line = f"{name:<21} " + "".join(f"{cell:>12}" for cell in cells)
        print(f"{line}   {flat:>10}   {ratio:>13}")
    fastest = ", ".join(f"{name} {number(min(figures.per_turn[name][100]))}" for name in names)
    print(f"fastest single run at 100 turns (what an idle machine gives): {fastest}")
    print(
        f"¹ one run (a framework's long runs are run once); (~N s): not run, expected to take N s, over the "
        f"{options.budget:g} s budget; (> N s): stopped at the budget"
    )

    if figures.deadline:
        print(f"\nagentlab deadline overrun and abort latency, ms ({options.deadline_runs} runs each, timeout_ms=20)")
        print(f"{'':<36}{'overrun p50':>12}{'p99':>8}{'max':>8}   {'abort p50':>10}{'p99':>8}{'max':>8}")
        for case, samples in figures.deadline.items():
            cells = [
                f"{statistic:.2f}"
                for kind in ("overrun", "abort")
                for statistic in (median(samples[kind]), percentile(samples[kind], 0.99), max(samples[kind]))
            ]
            print(f"{case:<36}{cells[0]:>12}{cells[1]:>8}{cells[2]:>8}   {cells[3]:>10}{cells[4]:>8}{cells[5]:>8}")
        print(
            "raw: a bare asyncio.sleep's lateness / a task's wake-up after a timer callback, measured between the runs;"
        )
        print("     no asyncio loop can fire its deadline earlier than the event loop wakes up")
        print("the frameworks and the baseline have no run deadline or abort signal: nothing to measure")

    bare = median(figures.import_ms["bare interpreter"])
    base_rss = median(figures.rss_kib["baseline"]) if "baseline" in figures.rss_kib else None
    print(f"\n{'startup and memory':<22}{'import, ms above bare':>23}{'peak RSS, 100 turns':>22}{'vs baseline':>14}")
    for name in names:
        imported = median(figures.import_ms[name]) - bare
        rss = median(figures.rss_kib[name])
        versus = f"{(rss - base_rss) / 1024:+.1f} MiB" if base_rss is not None else "-"
        print(f"{name:<22}{imported:>23,.0f}{rss / 1024:>18.1f} MiB{versus:>14}")
    print(f"bare interpreter start: {bare:.0f} ms; import = `python -c '<import>'` minus `python -c pass` (medians)")

    print(f"\n{options.loops:,} loops at once, 10 turns each, one event loop")
    for name in names:
        found = figures.concurrent[name]
        if isinstance(found, str):
            print(f"{name:<22} {found}")
        else:
            per_turn = found["seconds"] / (options.loops * 10) * 1e6
            rss = found["peak_rss_kib"] / 1024
            print(
                f"{name:<22} {found['seconds']:>7.2f} s total   {per_turn:>7.1f} µs per turn   peak RSS {rss:.0f} MiB"
            )

    print(f"\nnetwork attempts refused: {len(figures.network)}" + "".join(f"\n  {a}" for a in figures.network[:10]))
    print("\nwhat each system does per turn")
    for name in names:
        print(f"  {name}: {SYSTEMS[name].per_turn}")
    if "agentlab" in names and "baseline" in names:
        print()
        for line in verdicts(figures, options.loops):
            print(line)
    print(f"\n({time.perf_counter() - started:.0f} s)")


def verdicts(figures: Figures, loops: int) -> list[str]:
    """Each target of issue 8, met or not, with the figure."""
    mine, rss = figures.per_turn["agentlab"], figures.rss_kib
    lines = [TARGETS_NOTE]

    def verdict(ok: bool, text: str) -> None:
        lines.append(f"  {'met   ' if ok else 'MISSED'}  {text}")

    at_100 = median(mine[100])
    verdict(at_100 <= 20, f"{at_100:.1f} µs per turn at 100 turns (≤ 20)")
    if 10_000 in mine:
        flat = median(mine[10_000]) / at_100
        verdict(flat <= 1.3, f"µs per turn at 10,000 turns is {flat:.2f} × at 100 (≤ 1.3)")
    if figures.deadline:
        raw = next(case for case in figures.deadline if case.startswith("raw"))
        raw_p99 = percentile(figures.deadline[raw]["overrun"], 0.99)
        for kind, limit in (("async", 2), ("sync", 5)):
            cases = [case for case in figures.deadline if case.startswith(kind)]
            for measure in ("overrun", "abort"):
                worst = max(percentile(figures.deadline[case][measure], 0.99) for case in cases)
                note = f" (raw asyncio sleep p99 {raw_p99:.2f} ms)" if measure == "overrun" else ""
                verdict(worst <= limit, f"{measure} p99 {worst:.2f} ms, {kind} callees (≤ {limit}){note}")
    bare = median(figures.import_ms["bare interpreter"])
    imported, asyncio_json = median(figures.import_ms["agentlab"]) - bare, median(figures.import_ms["baseline"]) - bare
    verdict(
        imported <= 30,
        f"import agentlab {imported:.0f} ms above a bare interpreter (≤ 30), "
        f"of which {asyncio_json:.0f} ms is `import asyncio, json` (the baseline's own imports)",
    )
    extra = (median(rss["agentlab"]) - median(rss["baseline"])) / 1024
    verdict(extra <= 3, f"peak RSS {extra:+.1f} MiB against the baseline's process (≤ +3)")
    found = figures.concurrent.get("agentlab")
    verdict(isinstance(found, dict), f"{loops:,} concurrent loops completed in one event loop")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--systems", default=",".join(SYSTEMS), help="comma-separated, from: " + ", ".join(SYSTEMS))
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=1.0, help="time spent on each size in each round")
    parser.add_argument("--budget", type=float, default=90, help="longest single framework run, in seconds")
    parser.add_argument("--deadline-runs", type=int, default=150)
    parser.add_argument("--loops", type=int, default=10_000)
    parser.add_argument("--import-repeats", type=int, default=15)
    parser.add_argument("--quick", action="store_true", help="a few turns of everything: a smoke check")
    options = parser.parse_args()
    if options.quick:
        options.rounds, options.seconds, options.deadline_runs, options.loops, options.import_repeats = (
            1,
            0.05,
            3,
            50,
            2,
        )
    chosen = set(options.systems.split(","))
    if chosen - set(SYSTEMS):
        parser.error(f"unknown systems {sorted(chosen - set(SYSTEMS))}; choose from {', '.join(SYSTEMS)}")
    names = [name for name in SYSTEMS if name in chosen]

    started = time.perf_counter()
    figures = Figures()
    print("measuring µs per turn and peak memory ...", file=sys.stderr)
    measure_turns(figures, names, options)
    measure_long_runs(figures, names, options)
    print("measuring import times ...", file=sys.stderr)
    measure_imports(figures, names, options.import_repeats)
    print("measuring concurrent loops ...", file=sys.stderr)
    measure_concurrent(figures, names, options)
    if "agentlab" in names:
        print("measuring deadline overrun and abort latency ...", file=sys.stderr)
        found = worker("deadline", options.deadline_runs, 20, timeout=600)
        figures.deadline = found["cases"]
        figures.network += found["network_attempts"]
    report(figures, names, options, started)


if __name__ == "__main__":
    main()
