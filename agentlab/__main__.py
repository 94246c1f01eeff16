"""Command line: `python -m agentlab demo` runs the tutorial's weather agent.

python -m agentlab demo                        # Pune: rain, 18°C, with its trace
python -m agentlab demo --max-turns 1          # a tripped limit: the trace, an `error:` line, exit code 1
python -m agentlab demo --case unknown-tool    # the tutorial's boundary cases
python -m agentlab check solution.py           # the student checker: exit 0 only when every behaviour passes
python -m agentlab grade submissions/          # every submission in a folder: grades.csv and a feedback file each
python -m agentlab student                     # release the workbooks (nbgrader) where learners work
python -m agentlab classroom init course/      # a GitHub Classroom starter repository: workbooks, README, workflow

Every command takes --lang en or --lang pl, the language of what it prints (and of the feedback and the README it
writes); without it, AGENTLAB_LANG, else an `agentlab-lang` file in the working directory, else English. argparse's
own words (usage errors) stay English.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from agentlab import i18n
from agentlab.behaviours import EXTRA_STEPS, STEPS
from agentlab.errors import AgentError
from agentlab.i18n import _, ngettext


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
    except AgentError as error:  # its message stays English: the rule's own words ("turn budget", ...)
        print(render_text(error))
        print(_("error: {error}").format(error=error), file=sys.stderr)
        return 1
    print(render_text(result))  # its first line is the answer: not printed a second time
    return 0


# The examples of `--help`: the docstring's second paragraph.
EXAMPLES = __doc__.split("\n\n")[1]

# What each --case's model proposes, for --help.
CASES = {
    "weather": "asks getWeather for Pune, then answers (the tutorial's agent)",
    "unknown-tool": "proposes deleteEverything, a tool that does not exist: UnknownToolError",
    "invalid-city": 'proposes getWeather with {"city": 42}: ToolArgsError',
    "same-call-twice": "proposes the same getWeather call twice: RepeatedCallError",
}


class _Formatter(argparse.HelpFormatter):
    """argparse's help, its "usage: " in the language in force."""

    def add_usage(self, usage, actions, groups, prefix=None) -> None:  # type: ignore[no-untyped-def]
        super().add_usage(usage, actions, groups, _("usage: ") if prefix is None else prefix)


class _RawFormatter(_Formatter, argparse.RawDescriptionHelpFormatter):
    """The same, with the description and epilog laid out as written."""


def _translated(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """`parser` (made with add_help=False) with argparse's own headings and -h in the language in force."""
    parser._positionals.title = _("positional arguments")
    parser._optionals.title = _("options")
    parser.add_argument("-h", "--help", action="help", help=_("show this help message and exit"))
    return parser


def _command(
    commands: argparse._SubParsersAction,  # type: ignore[type-arg]
    name: str,
    *,
    lang: bool = True,
    **kwargs: object,
) -> argparse.ArgumentParser:
    """A subcommand's parser, its argparse words translated, taking --lang (a group of subcommands leaves it to
    them)."""
    kwargs.setdefault("formatter_class", _Formatter)
    parser = _translated(commands.add_parser(name, add_help=False, **kwargs))  # type: ignore[arg-type]
    if lang:
        parser.add_argument(
            "--lang",
            choices=i18n.LANGUAGES,
            default=None,
            help=_("the language of what it prints (default: AGENTLAB_LANG, an agentlab-lang file here, else en)"),
        )
    return parser


def _parser() -> argparse.ArgumentParser:
    parser = _translated(
        argparse.ArgumentParser(
            prog="python -m agentlab",
            description=_("agentlab: a bounded agent loop to learn from"),
            epilog=_(EXAMPLES),
            formatter_class=_RawFormatter,
            add_help=False,
        )
    )
    commands = parser.add_subparsers(dest="command", required=True)
    demo = _command(
        commands,
        "demo",
        help=_("run the tutorial's weather agent and print its trace"),
        description=_(
            "Run the tutorial's weather agent with a fake model, print its trace; exit 1 if a rule stops it."
        ),
        epilog=_("cases (--case):")
        + "\n"
        + "\n".join(f"  {name:<16} {_(what)}" for name, what in CASES.items())
        + "\n\n"
        + _("examples:")
        + "\n  python -m agentlab demo --max-turns 1\n  python -m agentlab demo --case unknown-tool"
        + "\n  python -m agentlab demo --timeout-ms 50 --delay-ms 200",
        formatter_class=_RawFormatter,
    )
    demo.add_argument("--case", choices=list(CASES), default="weather", help=_("what the model proposes (see below)"))
    demo.add_argument("--max-turns", type=int, default=5, help=_("model calls at most (default 5, as in the tutorial)"))
    demo.add_argument("--max-calls", type=int, default=8, help=_("tool runs at most (default 8)"))
    demo.add_argument("--timeout-ms", type=float, default=5000, help=_("deadline for the whole run (default 5000)"))
    demo.add_argument("--max-chars", type=int, default=50_000, help=_("context and output budget (default 50000)"))
    demo.add_argument("--delay-ms", type=float, default=0, help=_("make the model think this long per turn"))
    demo.add_argument(
        "--allow-repeats", action="store_true", help=_("allow the same call twice (the tutorial forbids it)")
    )
    demo.set_defaults(handler=_demo)
    checker = _command(commands, "check", help=_("check a student's agent_loop against every behaviour, with hints"))
    checker.add_argument(
        "target", help=_("a .py file, a submitted workbook (.ipynb) or a module that defines agent_loop")
    )
    checker.add_argument(
        "--step", choices=STEPS + EXTRA_STEPS, help=_("only the behaviours of one step (default: every workbook step)")
    )
    checker.add_argument("--json", action="store_true", help=_("print a JSON result for graders (score, rows, hints)"))
    checker.add_argument("--bound-s", type=float, default=None, help=_("give up on a behaviour after this long (4)"))
    checker.add_argument("--seed", type=int, default=None, help=_("the scenarios' names and ids (default: a new one)"))
    checker.set_defaults(handler=_check)
    grader = _command(
        commands,
        "grade",
        help=_("grade every submission in a folder, each in a process of its own: a CSV and feedback files"),
    )
    grader.add_argument("folder", help=_("one .py file or workbook per student, or one subfolder per student"))
    grader.add_argument("--out", default=None, help=_("where to write grades.csv and the feedback (FOLDER-grades)"))
    grader.add_argument(
        "--step", choices=STEPS + EXTRA_STEPS, help=_("only the behaviours of one step (default: every workbook step)")
    )
    grader.add_argument(
        "--workbook",
        default=None,
        help=_("in each student's subfolder, grade this file (e.g. 01_basics.ipynb: a GitHub Classroom repository)"),
    )
    grader.add_argument("--jobs", type=int, default=None, help=_("submissions graded at once (default: CPU count)"))
    grader.add_argument("--bound-s", type=float, default=None, help=_("give up on a behaviour after this long (4)"))
    grader.set_defaults(handler=_grade)
    student = _command(
        commands,
        "student",
        help=_("release the workbooks with nbgrader into notebooks/exercises/, keeping learners' edits"),
    )
    student.add_argument("--check", action="store_true", help=_("only list stale learners' copies; exit 1 if any"))
    student.set_defaults(handler=_student)
    _classroom_parser(commands)
    return parser


def _classroom_parser(commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    from agentlab.classroom.template import PYTHON, default_requirement

    classroom = _command(
        commands,
        "classroom",
        lang=False,
        help=_("GitHub Classroom: write a starter repository that grades every push; grade one row of it"),
        description=_("GitHub Classroom: a starter repository whose workflow grades each workbook on every push."),
    )
    actions = classroom.add_subparsers(dest="action", required=True)
    init = _command(
        actions,
        "init",
        help=_("write the starter repository: the workbooks, a README for students, .github/workflows/classroom.yml"),
        description=_(
            "Write what a teacher pushes as the GitHub Classroom starter repository: the learners' "
            "workbooks, a README for students, and .github/workflows/classroom.yml, a grader step per row of each "
            "workbook (1 point each), then the reporter."
        ),
    )
    init.add_argument("folder", help=_("where to write it (a new or empty folder)"))
    init.add_argument(
        "--requirement",
        default=None,
        help=_("what the workflow has pip install (default: {requirement}; a wheel's URL works too)").format(
            requirement=default_requirement()
        ),
    )
    init.add_argument(
        "--python",
        default=PYTHON,
        help=_("the Python the workflow grades with (default {python})").format(python=PYTHON),
    )
    init.add_argument(
        "--workbooks",
        default=None,
        help=_(
            "the learners' workbooks to hand out (default: notebooks/exercises/; with --lang pl, "
            "notebooks/pl/exercises/)"
        ),
    )
    init.add_argument("--force", action="store_true", help=_("write into a folder that is not empty"))
    init.set_defaults(handler=_classroom_init)
    row = _command(
        actions,
        "row",
        help=_("a grader step: exit 0 if one row of a workbook passes, else say why on stderr and exit 1"),
        description=_(
            "One grader step of the workflow: grade the workbook as `agentlab check` does (once; its other "
            "rows reuse the result), then exit 0 if the row passes, or print why it fails on stderr and exit 1."
        ),
    )
    row.add_argument("workbook", help=_("the workbook, e.g. 01_basics.ipynb"))
    row.add_argument("key", help=_("the row, e.g. result_reaches_model"))
    row.add_argument("--bound-s", type=float, default=None, help=_("give up on a behaviour after this long (4)"))
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
    except template.TemplateError as error:  # its message stays English; in Polish a sentence follows
        print(_("agentlab classroom init: {error}").format(error=error), file=sys.stderr)
        return 2
    books = template.workbooks(folder)
    rows = sum(len(book.rows) for book in books)
    for path in written:
        print(_("wrote {path}").format(path=path))
    grades = ngettext(
        "{workflow} grades {count} workbooks on every push: a grader step per row, {points} points in all, "
        "then the reporter",
        "{workflow} grades {count} workbooks on every push: a grader step per row, {points} points in all, "
        "then the reporter",
        len(books),
    )
    print(grades.format(workflow=template.WORKFLOW, count=len(books), points=rows))
    print(
        _(
            "next: push {folder} to a new GitHub repository, make it a template repository, and give it to a "
            "GitHub Classroom assignment as its starter code"
        ).format(folder=folder)
    )
    return 0


def _classroom_row(options: argparse.Namespace) -> int:
    from agentlab.classroom import template

    try:
        return template.row_main(options.workbook, options.key, options.bound_s)
    except template.TemplateError as error:  # its message stays English; in Polish a sentence follows
        print(_("agentlab classroom row: {error}").format(error=error), file=sys.stderr)
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
        print(_("agentlab grade: {folder} is not a folder of submissions").format(folder=folder), file=sys.stderr)
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
    graded = ngettext(
        "graded {count} submissions: {table} and a feedback file per student in {out}",
        "graded {count} submissions: {table} and a feedback file per student in {out}",
        len(results),
    )
    print(graded.format(count=len(results), table=out / "grades.csv", out=out))
    return 0


def _student(options: argparse.Namespace) -> int:
    from agentlab.classroom import student

    try:
        if options.check:
            problems = student.stale_all()
            for problem in problems:
                print(_("stale: {problem}").format(problem=problem), file=sys.stderr)
            return 1 if problems else 0
        outcomes = student.write_all()
    except student.WorkbookError as error:  # its message stays English
        print(_("error: {error}").format(error=error), file=sys.stderr)
        return 2
    for outcome in outcomes:
        for path in outcome.written:
            print(_("wrote {path}").format(path=path.relative_to(student.ROOT)))
        for path in outcome.kept:
            kept = _("kept {path}: it has a learner's edits; the new version is {new}")
            release = outcome.released[0].parent if outcome.released else student.RELEASE
            new = (release / path.name).relative_to(student.ROOT)
            print(kept.format(path=path.relative_to(student.ROOT), new=new), file=sys.stderr)
        print(outcome.summary())
    return 1 if any(outcome.kept for outcome in outcomes) else 0


def _language_in(argv: Sequence[str]) -> str | None:
    """The `--lang` of a command line, read before argparse is (its help is in that language too)."""
    for number, argument in enumerate(argv):
        if argument == "--lang" and number + 1 < len(argv):
            wanted = argv[number + 1]
        elif argument.startswith("--lang="):
            wanted = argument.partition("=")[2]
        else:
            continue
        return wanted if wanted in i18n.LANGUAGES else None
    return None


def main(argv: Sequence[str] | None = None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    wanted = _language_in(arguments)
    before = i18n._chosen  # put back afterwards: main() is called in-process by tests and notebooks too
    if wanted is not None:
        i18n.set_language(wanted)  # the checker's child gets it through AGENTLAB_LANG (grading._run_child)
    try:
        options = _parser().parse_args(arguments)
        return options.handler(options)
    finally:
        i18n.set_language(before)


if __name__ == "__main__":
    sys.exit(main())
