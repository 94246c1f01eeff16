"""How long does grading a class of 30 take on this machine?

    python benchmarks/grade_class.py [--students 30] [--jobs N]

The class is made from tests/fixtures: 4 right loops, 16 wrong ones, 7 cheats, and three submissions that do not
load (a syntax error, an endless loop at import, megabytes of output), cycled past 30. Each is graded
as `python -m agentlab grade` does: in a process of its own, `--jobs` at a time (the CPU count by default), with the
default limits (an endless loop at import costs its 10 s load bound). Prints the wall time and the spread.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from itertools import cycle, islice
from pathlib import Path

from agentlab.classroom.grading import grade_class

FIXTURES = Path(__file__).resolve().parent.parent / "tests" / "fixtures"
BROKEN = {
    "syntax_error.py": "def agent_loop(:\n",
    "endless_import.py": "while True:\n    pass\n",
    "floods_output.py": "print('x' * 5_000_000)\n",
}


def make_class(folder: Path, students: int) -> None:
    """For 30: 4 right loops, 16 wrong ones (every third), 7 cheats, the 3 broken files; cycled past that."""
    right = sorted(FIXTURES.glob("loops/right/*.py"))[:4]
    wrong = sorted(FIXTURES.glob("loops/wrong/*.py"))[::3][:16]
    cheats = sorted(FIXTURES.glob("cheats/*.py"))[:7]
    sources = [p.read_text(encoding="utf-8") for p in (*right, *wrong, *cheats)] + list(BROKEN.values())
    for number, text in enumerate(islice(cycle(sources), students), 1):
        (folder / f"student{number:02}.py").write_text(text, encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--students", type=int, default=30)
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    options = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="agentlab-class-"))
    try:
        (work / "class").mkdir()
        make_class(work / "class", options.students)
        started = time.perf_counter()
        results = grade_class(work / "class", work / "grades", jobs=options.jobs)
        wall = time.perf_counter() - started
    finally:
        shutil.rmtree(work, ignore_errors=True)
    seconds = sorted(graded.seconds for graded in results)
    full = sum(graded.report.passed for graded in results)
    print(f"{len(results)} submissions, {options.jobs} at a time, on {os.cpu_count()} cores: {wall:.1f} s wall")
    print(
        f"per submission: median {statistics.median(seconds):.1f} s, max {seconds[-1]:.1f} s; "
        f"{full} passed every row, {len(results) - full} did not"
    )


if __name__ == "__main__":
    main()
