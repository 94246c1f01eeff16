"""Command line: `python -m agentlab demo` runs the tutorial's weather agent.

python -m agentlab demo                        # Pune: rain, 18°C, with its trace
python -m agentlab demo --max-turns 1          # a tripped limit: the trace, an `error:` line, exit code 1
python -m agentlab demo --case unknown-tool    # the tutorial's boundary cases
python -m agentlab check solution.py           # the student checker: exit 0 only when every behaviour passes
python -m agentlab grade submissions/          # every submission in a folder: grades.csv and a feedback file each
python -m agentlab student                     # release the workbooks (nbgrader) where learners work
python -m agentlab classroom init course/      # a GitHub Classroom starter repository: workbooks, README, workflow
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from agentlab.behaviours import EXTRA_STEPS, STEPS
from agentlab.errors import AgentError


def _demo(options: argparse.Namespace) -> int:
    # Imported here, not above: a GitHub Classroom grader step runs `classroom row` 51 times per push.
    from agentlab.adapters import from_decider
    from agentlab.lab.examples import BOUNDARY_CASES, WEATHER_GOAL, WeatherDemo, weather_tools
    from agentlab.lab.fakes import Slow
    from agentlab.lab.trace import render_text
    from agentlab.sync import agent_loop_sync

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
    grader.add_argument(
        "--workbook",
        default=None,
        help="in each student's subfolder, grade this file (e.g. 01_basics.ipynb: a GitHub Classroom repository)",
    )
    grader.add_argument("--jobs", type=int, default=None, help="submissions graded at once (default: CPU count)")
    grader.add_argument("--bound-s", type=float, default=None, help="give up on a behaviour after this long (4)")
    grader.set_defaults(handler=_grade)
    student = commands.add_parser(
        "student", help="release the workbooks with nbgrader into notebooks/exercises/, keeping learners' edits"
    )
    student.add_argument("--check", action="store_true", help="only list stale learners' copies; exit 1 if any")
    student.set_defaults(handler=_student)
    _classroom_parser(commands)
    return parser


def _classroom_parser(commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    from agentlab.classroom.template import PYTHON, default_requirement

    classroom = commands.add_parser(
        "classroom",
        help="GitHub Classroom: write a starter repository that grades every push; grade one row of it",
        description="GitHub Classroom: a starter repository whose workflow grades each workbook on every push.",
    )
    actions = classroom.add_subparsers(dest="action", required=True)
    init = actions.add_parser(
        "init",
        help="write the starter repository: the workbooks, a README for students, .github/workflows/classroom.yml",
        description="Write what a teacher pushes as the GitHub Classroom starter repository: the learners' "
        "workbooks, a README for students, and .github/workflows/classroom.yml, a grader step per row of each "
        "workbook (1 point each), then the reporter.",
    )
    init.add_argument("folder", help="where to write it (a new or empty folder)")
    init.add_argument(
        "--requirement",
        default=None,
        help=f"what the workflow has pip install (default: {default_requirement()}; a wheel's URL works too)",
    )
    init.add_argument("--python", default=PYTHON, help=f"the Python the workflow grades with (default {PYTHON})")
    init.add_argument(
        "--workbooks", default=None, help="the learners' workbooks to hand out (default: notebooks/exercises/)"
    )
    init.add_argument("--force", action="store_true", help="write into a folder that is not empty")
    init.set_defaults(handler=_classroom_init)
    row = actions.add_parser(
        "row",
        help="a grader step: exit 0 if one row of a workbook passes, else say why on stderr and exit 1",
        description="One grader step of the workflow: grade the workbook as `agentlab check` does (once; its other "
        "rows reuse the result), then exit 0 if the row passes, or print why it fails on stderr and exit 1.",
    )
    row.add_argument("workbook", help="the workbook, e.g. 01_basics.ipynb")
    row.add_argument("key", help="the row, e.g. result_reaches_model")
    row.add_argument("--bound-s", type=float, default=None, help="give up on a behaviour after this long (4)")
    row.set_defaults(handler=_classroom_row)


def _classroom_init(options: argparse.Namespace) -> int:
    from pathlib import Path

    from agentlab.classroom import template

    folder = Path(options.folder)
    try:
        written = template.init(
            folder,
            options.requirement,
            python=options.python,
            source=Path(options.workbooks) if options.workbooks else None,
            force=options.force,
        )
    except template.TemplateError as error:
        print(f"agentlab classroom init: {error}", file=sys.stderr)
        return 2
    books = template.workbooks(folder)
    rows = sum(len(book.rows) for book in books)
    for path in written:
        print(f"wrote {path}")
    print(
        f"{template.WORKFLOW} grades {len(books)} workbooks on every push: a grader step per row, "
        f"{rows} points in all, then the reporter"
    )
    print(
        f"next: push {folder} to a new GitHub repository, make it a template repository, and give it to a "
        "GitHub Classroom assignment as its starter code"
    )
    return 0


def _classroom_row(options: argparse.Namespace) -> int:
    from agentlab.classroom import template

    try:
        return template.row_main(options.workbook, options.key, options.bound_s)
    except template.TemplateError as error:
        print(f"agentlab classroom row: {error}", file=sys.stderr)
        return 2


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
    stem = f"-{Path(options.workbook).stem}" if options.workbook else ""
    out = Path(options.out) if options.out else folder.parent / f"{folder.name}{stem}-grades"

    def progress(graded) -> None:  # type: ignore[no-untyped-def]
        report = graded.report
        note = f"  ({graded.problem})" if graded.problem else ""
        print(f"{graded.student}: {report.points}/{report.total}{note}", flush=True)

    results = grade_class(
        folder,
        out,
        options.step,
        jobs=options.jobs,
        bound_s=options.bound_s or BOUND_S,
        progress=progress,
        workbook=options.workbook,
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
    print(outcome.summary())
    return 1 if outcome.kept else 0


def main(argv: Sequence[str] | None = None) -> int:
    options = _parser().parse_args(argv)
    return options.handler(options)


if __name__ == "__main__":
    sys.exit(main())
