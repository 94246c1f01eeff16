"""Does a verdict ever flip? The right loops through every row, N times, beside a CPU hog.

    python benchmarks/checker_stability.py [--runs 20] [--hogs 1]
    python benchmarks/checker_stability.py --step writes   # workbook 7's rows: agentlab's loop and the answer

The right loops are tests/fixtures/loops/right/*.py, the workbook answer (teachers/source/workbooks/06_limits.ipynb) and
agentlab's own loop. Each run checks each of them against every row, as `agentlab.classroom.check` does, while `--hogs`
processes spin on the CPU. A right loop must pass every row every time: prints the flips (must be 0) and the rows
that flipped.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import multiprocessing
import time
from collections import Counter
from pathlib import Path
from typing import Any

from agentlab import agent_loop
from agentlab.classroom.check import check

ROOT = Path(__file__).resolve().parent.parent


def right_loops() -> dict[str, Any]:
    loops: dict[str, Any] = {"agentlab.loop": agent_loop}
    for path in sorted((ROOT / "tests" / "fixtures" / "loops" / "right").glob("*.py")):
        spec = importlib.util.spec_from_file_location(f"right_{path.stem}", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        loops[path.stem] = module.agent_loop
    loops["workbook 06 answer"] = workbook_answer("06_limits.ipynb")
    return loops


def workbook_answer(name: str) -> Any:
    """The agent_loop of a solved workbook: its cells tagged agent-loop, run in order."""
    cells = json.loads((ROOT / "teachers" / "source" / "workbooks" / name).read_text(encoding="utf-8"))["cells"]
    source = "\n\n".join("".join(c["source"]) for c in cells if "agent-loop" in c["metadata"].get("tags", []))
    namespace: dict[str, Any] = {"__name__": "workbook_answer"}
    exec(compile(source, name, "exec"), namespace)
    return namespace["agent_loop"]


def hog() -> None:
    while True:
        pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--hogs", type=int, default=1, help="processes spinning on the CPU meanwhile")
    parser.add_argument("--step", choices=["writes"], help="workbook 7's rows instead of the exercise's")
    options = parser.parse_args()
    if options.step == "writes":  # the right loops of the fixtures do not write
        loops = {"agentlab.loop": agent_loop, "workbook 07 answer": workbook_answer("07_writes.ipynb")}
    else:
        loops = right_loops()
    hogs = [multiprocessing.Process(target=hog, daemon=True) for _ in range(options.hogs)]
    for process in hogs:
        process.start()
    flips: Counter[str] = Counter()
    started = time.perf_counter()
    try:
        for _ in range(options.runs):
            for name, loop in loops.items():
                for row in check(loop, options.step).failures:
                    flips[f"{name}: {row.key} ({row.happened[:80]})"] += 1
    finally:
        for process in hogs:
            process.terminate()
    checked = options.runs * len(loops)
    print(
        f"{len(loops)} right loops x {options.runs} runs x every row, beside {options.hogs} CPU hog(s): "
        f"{sum(flips.values())} flips in {checked} checks ({time.perf_counter() - started:.0f} s)"
    )
    for what, count in flips.most_common():
        print(f"  {count} x {what}")


if __name__ == "__main__":
    main()
