"""A GitHub Classroom starter repository: the workbooks, a README for students, and the workflow that grades them.

    python -m agentlab classroom init course/                  # what a teacher pushes as the starter repository
    python -m agentlab classroom init course/ --requirement 'agentlab @ https://example.org/agentlab-0.1.0.whl'
    python -m agentlab classroom row 01_basics.ipynb result_reaches_model    # one grader step: one row, 1 point

The workflow (`.github/workflows/classroom.yml`) is GitHub Classroom's own shape: `actions/checkout`, then one
`classroom-resources/autograding-command-grader@v1` step per graded row, then
`classroom-resources/autograding-grading-reporter@v1`, which adds the steps' points up for Classroom. The command
grader gives a step all of its `max-score` or nothing (exit code 0 or not), so points per row need a step per row:
each is worth 1 point, and a workbook's steps together are worth what `agentlab grade` gives it.

A row's step runs `python -m agentlab classroom row WORKBOOK KEY`. The first row of a workbook grades the whole
workbook as `agentlab check WORKBOOK` does (in a child process of its own, see grading.py) and keeps what
`agentlab check --json` prints, under the home folder, keyed by the workbook's bytes; the workbook's other rows read
their verdict from it. A failed row writes what was expected, what happened and the hint to stderr, which the
command grader shows in the step's log, and exits 1.

In Polish (`classroom init --lang pl`, or AGENTLAB_LANG=pl): the Polish workbooks (notebooks/pl/exercises/), a
Polish README, an `agentlab-lang` file saying pl (so that the checker speaks Polish in the students' own Jupyter
and terminal), and each grader step's command run with AGENTLAB_LANG=pl (the command grader passes a command
only a few variables of its own, so the variable is set on the command line, not in the job's `env`).
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentlab.behaviours import select
from agentlab.errors import AgentError
from agentlab.i18n import MARKER, _, language, ngettext

WORKFLOW = Path(".github") / "workflows" / "classroom.yml"
PYTHON = "3.12"  # the runner's Python for grading (any of 3.11 to 3.13 works)
CHECKOUT = "actions/checkout@v5"
SETUP_PYTHON = "actions/setup-python@v6"
GRADER = "classroom-resources/autograding-command-grader@v1"
REPORTER = "classroom-resources/autograding-grading-reporter@v1"


class TemplateError(AgentError):
    """The starter repository cannot be written as asked: the message says what to change."""


@dataclass(frozen=True)
class Workbook:
    """One workbook of the template: its file name, the step it is graded at, and the keys and titles of its rows."""

    name: str
    step: str | None
    rows: tuple[tuple[str, str], ...]

    @property
    def number(self) -> str:
        return self.name.split("_", 1)[0].lstrip("0") or "0"


def default_workbooks() -> Path:
    """The learners' workbooks a template hands out: notebooks/exercises/, or their Polish twins in Polish."""
    from agentlab.classroom.student import LEARNERS, ROOT

    polish = ROOT / "notebooks" / "pl" / "exercises"
    return polish if language() == "pl" else LEARNERS


def default_requirement() -> str:
    """What the workflow installs unless told otherwise: this very version of agentlab, from PyPI."""
    from agentlab import __version__

    return f"agentlab=={__version__}"


def workbooks(folder: Path) -> list[Workbook]:
    """The workbooks in `folder` (the learners' copies), each with the rows `agentlab grade` checks in it."""
    from agentlab.classroom.grading import scope

    paths = sorted(folder.glob("*.ipynb")) if folder.is_dir() else []
    if not paths:
        raise TemplateError(
            f"no workbooks (*.ipynb) in {folder}: run this in a clone of the agentlab repository (it takes "
            f"notebooks/exercises/, the learners' copies), or pass --workbooks FOLDER"
        )
    found = []
    for path in paths:
        step = scope(str(path), None)
        found.append(Workbook(path.name, step, tuple((b.key, b.title) for b in select(step))))
    return found


def step_id(workbook: Workbook, key: str) -> str:
    """The grader step's id: what the reporter's `runners` lists, and its `<ID>_RESULTS` variable is named after."""
    return f"w{workbook.number}_{key}"


def _q(text: str) -> str:
    """A YAML double-quoted scalar (JSON's string syntax is a subset of it)."""
    return json.dumps(text, ensure_ascii=False)


def timeout_minutes(workbook: Workbook) -> int:
    """The grader step's `timeout`: the first row grades the whole workbook, bounded as grade() bounds it."""
    from agentlab.classroom.check import BOUND_S
    from agentlab.classroom.grading import Limits

    wall_s = Limits().load_s + len(workbook.rows) * (BOUND_S + 1.0) + 10.0
    return int(wall_s // 60) + 2


def workflow(books: list[Workbook], requirement: str, python: str = PYTHON) -> str:
    """The text of `.github/workflows/classroom.yml`: a grader step per row of each workbook, then the reporter.

    In a language other than English, each step's command sets AGENTLAB_LANG (the rows' titles, hints and messages
    in that language) and its test name has the row's title in it.
    """
    from agentlab import __version__

    prefix = "" if language() == "en" else f"AGENTLAB_LANG={language()} "

    install = f"python -m pip install --disable-pip-version-check --no-input {shlex.quote(requirement)}"
    total = sum(len(book.rows) for book in books)
    lines = [
        f"# Written by `python -m agentlab classroom init` (agentlab {__version__}). GitHub Classroom grades every",
        f"# push with it: one step per row of each workbook, 1 point each ({total} in all), then the reporter, which",
        "# adds them up for Classroom. A failed row's step log says what was expected, what happened, and a hint.",
        "# Names matter: Classroom reads the workflow called 'Autograding Tests' and the reporter updates the job",
        "# 'run-autograding-tests'.",
        "name: Autograding Tests",
        # A mapping, not GitHub Classroom's usual list: older actionlint releases refuse repository_dispatch in one.
        '"on":',
        "  push:",
        "  workflow_dispatch:",
        "  repository_dispatch:",
        "permissions:",
        "  checks: write",
        "  actions: read",
        "  contents: read",
        "jobs:",
        "  run-autograding-tests:",
        "    runs-on: ubuntu-latest",
        "    if: github.actor != 'github-classroom[bot]'",
        "    timeout-minutes: 60",
        "    steps:",
        "      - name: Checkout code",
        f"        uses: {CHECKOUT}",
        "      - name: Set up Python",
        f"        uses: {SETUP_PYTHON}",
        "        with:",
        f"          python-version: {_q(python)}",
    ]
    ids = []
    for book in books:
        for key, title in book.rows:
            ids.append(step_id(book, key))
            command = f"{prefix}python -X utf8 -m agentlab classroom row {shlex.quote(book.name)} {key}"
            lines += [
                f"      - name: {_q(f'{Path(book.name).stem} · {key}')}",
                f"        id: {ids[-1]}",
                f"        uses: {GRADER}",
                "        with:",
                f"          test-name: {_q(f'{Path(book.name).stem} · {key}: {_(title)}')}",
                f"          setup-command: {_q(install if len(ids) == 1 else '')}",
                f"          command: {_q(command)}",
                f"          timeout: {timeout_minutes(book)}",
                "          max-score: 1",
            ]
    lines += [
        "      - name: Autograding Reporter",
        f"        uses: {REPORTER}",
        "        env:",
        *(f'          {i.upper()}_RESULTS: "${{{{ steps.{i}.outputs.result }}}}"' for i in ids),
        "        with:",
        f"          runners: {','.join(ids)}",
    ]
    return "\n".join(lines) + "\n"


def readme(books: list[Workbook], requirement: str) -> str:
    """The students' README of the starter repository, in the language in force."""
    total = sum(len(book.rows) for book in books)
    table = "\n".join(
        f"| `{book.name}` | {len(book.rows)} | `python -m agentlab check {book.name}` |" for book in books
    )
    title = ngettext("# The agent loop, in {count} workbooks", "# The agent loop, in {count} workbooks", len(books))
    lines = [
        title.format(count=len(books)),
        "",
        _(_README_INTRO),
        "",
        _("## Working"),
        "",
        "```",
        "python -m venv .venv",
        f".venv/bin/pip install {shlex.quote(requirement)} jupyterlab     # Windows: .venv\\Scripts\\pip install ...",
        ".venv/bin/jupyter lab",
        "```",
        "",
        _(_README_WORKING),
        "",
        _("## Grading"),
        "",
        _(_README_GRADING).format(total=total),
        "",
        _("| workbook | points | check it yourself |"),
        "| --- | --- | --- |",
        table,
        "",
        _(_README_KEEP),
    ]
    return "\n".join(lines) + "\n"


# The README's paragraphs, each a message of its own (classroom.po has the Polish).
_README_INTRO = """\
You write `agent_loop`, the loop around a language model that checks what the model proposes and decides what
actually runs. Each workbook ends with a check cell that runs the rules of that step on your code and says, row by
row, what was expected, what happened, and a hint."""
_README_WORKING = """\
Open the workbooks in order, run the cells from the top, write your code where it says `# YOUR CODE HERE`, and
re-run the check cell. In a terminal, the same check: `python -m agentlab check 01_basics.ipynb`."""
_README_GRADING = """\
Each push is graded by GitHub Actions (the "Autograding Tests" workflow, in the Actions tab): one step per row of
each workbook, 1 point each, {total} in all, and GitHub Classroom shows the total. A failed row's step shows, in its
log, what was expected, what happened and a hint; it is the row the check cell shows with a ✗."""
_README_KEEP = "Keep the workbooks' names, and leave `.github/` as it is: your teacher sees every change to it."


GITIGNORE = ".ipynb_checkpoints/\n__pycache__/\n.venv/\n"


def init(
    folder: Path,
    requirement: str | None = None,
    *,
    python: str = PYTHON,
    source: Path | None = None,
    force: bool = False,
) -> list[Path]:
    """Write the starter repository into `folder`; return the files written.

    `requirement` is what the workflow's setup command gives pip (default: this version of agentlab, from PyPI);
    `source` the folder of the learners' workbooks (default: notebooks/exercises/ of this clone, or in Polish
    notebooks/pl/exercises/). The README, the rows' titles and the checker's words are in the language in force
    (`agentlab classroom init --lang pl`); in Polish the repository also gets an `agentlab-lang` file saying pl.
    """

    requirement = default_requirement() if requirement is None else requirement.strip()
    if not requirement or "\n" in requirement:
        raise TemplateError(f"--requirement {requirement!r}: give pip one requirement, e.g. 'agentlab==0.1.0'")
    if not python.replace(".", "").isdigit():
        raise TemplateError(f"--python {python!r}: give a Python version such as 3.12")
    if folder.exists() and not folder.is_dir():
        raise TemplateError(f"{folder} is a file: give a folder for the starter repository")
    if folder.is_dir() and any(folder.iterdir()) and not force:
        raise TemplateError(
            f"{folder} is not empty: give a new folder, or pass --force to write the template's files into it"
        )
    source = default_workbooks() if source is None else source
    books = workbooks(source)
    files = {book.name: (source / book.name).read_bytes() for book in books}
    files["README.md"] = readme(books, requirement).encode()
    files[".gitignore"] = GITIGNORE.encode()
    if (
        language() != "en"
    ):  # the students' Jupyter and terminal find it in the repository's root: the checker's language
        files[MARKER] = f"{language()}\n".encode()
    files[str(WORKFLOW)] = workflow(books, requirement, python).encode()
    written = []
    for name, data in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        written.append(path)
    return written


# -- one row: the command of a grader step ----------------------------------------------------------------------------


def cache_folder() -> Path:
    """Where a workbook's report waits for its other rows: under the home folder, out of the student's repository."""
    return Path.home() / ".cache" / "agentlab-classroom"


def workbook_report(target: str, bound_s: float | None = None) -> dict[str, Any]:
    """What `agentlab check TARGET --json` prints, graded once per workbook's bytes and kept for its other rows."""
    from agentlab import __version__
    from agentlab.classroom.check import BOUND_S, unloadable
    from agentlab.classroom.grading import GradingError, grade, refuse_bad_target, scope

    bound_s = bound_s or BOUND_S
    try:
        refuse_bad_target(target)
        data = Path(target).read_bytes()
    except GradingError as error:  # a workbook deleted or renamed: every row fails, saying so
        hint = _("Put the workbook back, under this name.")
        return unloadable(target, scope(target, None), str(error), hint).to_json()
    # keyed by the language too: the kept rows' titles and hints are in the language they were graded in
    seen = (__version__.encode(), target.encode(), bound_s, language().encode())
    key = hashlib.sha256(b"%s\0%s\0%r\0%s\0" % seen + data).hexdigest()
    kept = cache_folder() / f"{key}.json"
    try:
        return json.loads(kept.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        pass
    report = grade(target, bound_s=bound_s).report.to_json()
    kept.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", dir=kept.parent, delete=False, suffix=".tmp", encoding="utf-8") as file:
        json.dump(report, file, ensure_ascii=False)
    os.replace(file.name, kept)
    return report


def row_main(target: str, key: str, bound_s: float | None = None) -> int:
    """`python -m agentlab classroom row WORKBOOK KEY`: exit 0 if the row passes; else say why on stderr, exit 1."""
    from agentlab.classroom.check import Report, Row, render_text

    data = workbook_report(target, bound_s)
    rows = [Row(**row) for row in data["rows"]]
    row = next((r for r in rows if r.key == key), None)
    if row is None:
        keys = ", ".join(r.key for r in rows)
        raise TemplateError(
            f"{target} has no row {key!r} (its rows: {keys}): write the workflow again with this version of agentlab "
            f"(python -m agentlab classroom init)"
        )
    passed = sum(r.passed for r in rows)
    verdicts = {(r.clue, r.happened) for r in rows}  # one verdict on the whole workbook: no row was run on its own
    whole = len(verdicts) == 1 and row.clue in ("missing", "stopped", "delegated", "tampered")
    if whole:
        tally = _("{target}: 0 points, for the reason below").format(target=target)
    else:
        tally = _("{target}: {passed} of {total} rows pass").format(target=target, passed=passed, total=len(rows))
    if row.passed:
        print(f"✓ {key}: {row.title} ({tally})")
        return 0
    body = render_text(Report(target, data.get("step"), (row,))).split("\n")[1:]  # its rows, not its headline
    print(_("{tally}; this one fails:").format(tally=tally), file=sys.stderr)
    print("\n".join(body), file=sys.stderr)
    print(
        _("  (every row, in your own terminal: python -m agentlab check {target})").format(target=target),
        file=sys.stderr,
    )
    return 1


__all__ = [
    "GRADER",
    "REPORTER",
    "WORKFLOW",
    "TemplateError",
    "Workbook",
    "default_requirement",
    "default_workbooks",
    "init",
    "readme",
    "row_main",
    "step_id",
    "workbook_report",
    "workbooks",
    "workflow",
]
