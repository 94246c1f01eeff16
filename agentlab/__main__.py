"""Command line: `python -m agentlab demo` runs the tutorial's weather agent.

python -m agentlab demo                        # Pune: rain, 18°C, with its trace
python -m agentlab demo --max-turns 1          # a tripped limit: the trace, an `error:` line, exit code 1
python -m agentlab demo --case unknown-tool    # the tutorial's boundary cases
python -m agentlab check solution.py           # the student checker: exit 0 only when every behaviour passes
python -m agentlab grade submissions/          # every submission in a folder: grades.csv and a feedback file each
python -m agentlab student                     # release the workbooks (nbgrader) where learners work
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from agentlab.adapters import from_decider
from agentlab.behaviours import EXTRA_STEPS, STEPS
from agentlab.errors import AgentError
from agentlab.lab.examples import BOUNDARY_CASES, WEATHER_GOAL, WeatherDemo, weather_tools
from agentlab.lab.fakes import Slow
from agentlab.lab.trace import render_text
from agentlab.sync import agent_loop_sync


def _demo(options: argparse.Namespace) -> int:
    decider = BOUNDARY_CASES[options.case] if options.case != "weather" else WeatherDemo()
    model = from_decider(decider)
    if options.delay_ms:
        model = Slow(model, options.delay_ms)
    try:
        result = agent_loop_sync(
            WEATHER_GOAL,
            model,
            weather_tools(),
            max_turns=options.max_turns,
            max_calls=options.max_calls,
            timeout_ms=options.timeout_ms,
            max_chars=options.max_chars,
            forbid_repeats=not options.allow_repeats,
        )
    except AgentError as error:
        print(render_text(error))
        print(f"error: {error}", file=sys.stderr)
        return 1
    print(render_text(result))  # its first line is the answer: not printed a second time
    return 0


# What each --case's model proposes, for --help.
CASES = {
    "weather": "asks getWeather for Pune, then answers (the tutorial's agent)",
    "unknown-tool": "proposes deleteEverything, a tool that does not exist: UnknownToolError",
    "invalid-city": 'proposes getWeather with {"city": 42}: ToolArgsError',
    "same-call-twice": "proposes the same getWeather call twice: RepeatedCallError",
}


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m agentlab",
        description="agentlab: a bounded agent loop to learn from",
        epilog=__doc__.split("\n\n")[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser(
        "demo",
        help="run the tutorial's weather agent and print its trace",
        description="Run the tutorial's weather agent with a fake model, print its trace; exit 1 if a rule stops it.",
        epilog="cases (--case):\n"
        + "\n".join(f"  {name:<16} {what}" for name, what in CASES.items())
        + "\n\nexamples:\n  python -m agentlab demo --max-turns 1\n  python -m agentlab demo --case unknown-tool"
        + "\n  python -m agentlab demo --timeout-ms 50 --delay-ms 200",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    demo.add_argument("--case", choices=list(CASES), default="weather", help="what the model proposes (see below)")
    demo.add_argument("--max-turns", type=int, default=5, help="model calls at most (default 5, as in the tutorial)")
    demo.add_argument("--max-calls", type=int, default=8, help="tool runs at most (default 8)")
    demo.add_argument("--timeout-ms", type=float, default=5000, help="deadline for the whole run (default 5000)")
    demo.add_argument("--max-chars", type=int, default=50_000, help="context and output budget (default 50000)")
    demo.add_argument("--delay-ms", type=float, default=0, help="make the model think this long per turn")
    demo.add_argument(
        "--allow-repeats", action="store_true", help="allow the same call twice (the tutorial forbids it)"
    )
    demo.set_defaults(handler=_demo)
    checker = commands.add_parser("check", help="check a student's agent_loop against every behaviour, with hints")
    checker.add_argument("target", help="a .py file, a submitted workbook (.ipynb) or a module that defines agent_loop")
    checker.add_argument(
        "--step", choices=STEPS + EXTRA_STEPS, help="only the behaviours of one step (default: every workbook step)"
    )
    checker.add_argument("--json", action="store_true", help="print a JSON result for graders (score, rows, hints)")
    checker.add_argument("--bound-s", type=float, default=None, help="give up on a behaviour after this long (4)")
    checker.add_argument("--seed", type=int, default=None, help="the scenarios' names and ids (default: a new one)")
    checker.set_defaults(handler=_check)
    grader = commands.add_parser(
        "grade", help="grade every submission in a folder, each in a process of its own: a CSV and feedback files"
    )
    grader.add_argument("folder", help="one .py file or workbook per student, or one subfolder per student")
    grader.add_argument("--out", default=None, help="where to write grades.csv and the feedback (FOLDER-grades)")
    grader.add_argument(
        "--step", choices=STEPS + EXTRA_STEPS, help="only the behaviours of one step (default: every workbook step)"
    )
    grader.add_argument("--jobs", type=int, default=None, help="submissions graded at once (default: CPU count)")
    grader.add_argument("--bound-s", type=float, default=None, help="give up on a behaviour after this long (4)")
    grader.set_defaults(handler=_grade)
    student = commands.add_parser(
        "student", help="release the workbooks with nbgrader into notebooks/exercises/, keeping learners' edits"
    )
    student.add_argument("--check", action="store_true", help="only list stale learners' copies; exit 1 if any")
    student.set_defaults(handler=_student)
    return parser


def _check(options: argparse.Namespace) -> int:
    from agentlab.classroom.check import main as check_main

    return check_main(options.target, options.step, options.json, options.bound_s, options.seed)


def _grade(options: argparse.Namespace) -> int:
    from pathlib import Path

    from agentlab.classroom.check import BOUND_S
    from agentlab.classroom.grading import grade_class

    folder = Path(options.folder)
    if not folder.is_dir():
        print(f"agentlab grade: {folder} is not a folder of submissions", file=sys.stderr)
        return 2
    out = Path(options.out) if options.out else folder.parent / f"{folder.name}-grades"

    def progress(graded) -> None:  # type: ignore[no-untyped-def]
        report = graded.report
        note = f"  ({graded.problem})" if graded.problem else ""
        print(f"{graded.student}: {report.points}/{report.total}{note}", flush=True)

    results = grade_class(
        folder, out, options.step, jobs=options.jobs, bound_s=options.bound_s or BOUND_S, progress=progress
    )
    print(f"graded {len(results)} submissions: {out / 'grades.csv'} and a feedback file per student in {out}")
    return 0


def _student(options: argparse.Namespace) -> int:
    from agentlab.classroom import student

    try:
        if options.check:
            problems = student.stale()
            for problem in problems:
                print(f"stale: {problem}", file=sys.stderr)
            return 1 if problems else 0
        outcome = student.write()
    except student.WorkbookError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    for path in outcome.written:
        print(f"wrote {path.relative_to(student.ROOT)}")
    for path in outcome.kept:
        print(
            f"kept {path.relative_to(student.ROOT)}: it has a learner's edits; the new version is "
            f"{(student.RELEASE / path.name).relative_to(student.ROOT)}",
            file=sys.stderr,
        )
    return 1 if outcome.kept else 0


def main(argv: Sequence[str] | None = None) -> int:
    options = _parser().parse_args(argv)
    return options.handler(options)


if __name__ == "__main__":
    sys.exit(main())
