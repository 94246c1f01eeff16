"""Grading in a process of its own: bad input says one line, cheats score 0, a class is graded whole.

The cheats are files in tests/fixtures/cheats/, each a student trying to get full marks without writing the loop.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest

from agentlab.__main__ import main
from agentlab.behaviours import EXTRA_STEPS, Names, select
from agentlab.classroom.grading import Limits, csv_cell, grade, grade_class

FIXTURES = Path(__file__).resolve().parent / "fixtures"
RIGHT = FIXTURES / "loops" / "right" / "classes__own_errors.py"
CHEATS = sorted((FIXTURES / "cheats").glob("*.py"))
ROOT = Path(__file__).resolve().parent.parent
WORKBOOKS = ROOT / "teachers" / "source" / "workbooks"


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


# -- the command line on bad input: one clear line, exit code 2 -------------------------------------------------------


@pytest.mark.parametrize(
    ("make", "says"),
    [
        (lambda tmp: str(tmp / "missing.py"), "missing.py: no such file"),
        (lambda tmp: str(tmp), "is a folder; to grade every submission in it: python -m agentlab grade"),
        (lambda tmp: str(write(tmp, "notes.txt", "hello")), "not a .py file or a .ipynb workbook"),
        (lambda tmp: str(write(tmp, "empty.py", "x = 1\n")), "defines no agent_loop"),
    ],
    ids=["missing", "folder", "not-python", "no-agent-loop"],
)
def test_cli_bad_input_is_one_line_and_exit_code_2(tmp_path, capsys, make, says) -> None:
    assert main(["check", make(tmp_path)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.strip().splitlines()) == 1 and says in err, err


@pytest.mark.parametrize(
    ("target", "says"),
    [
        ("nodeadline", "nodeadline: no such file; did you mean nodeadline.py?"),  # the .py left out
        ("NoDeadline.py", "NoDeadline.py: no such file; did you mean nodeadline.py?"),
        ("nosuch", "nosuch: no such file, and no module of that name to import"),
        ("nosuch.py", "nosuch.py: no such file"),
    ],
)
def test_cli_a_name_that_is_not_there_says_so_and_what_was_meant(tmp_path, monkeypatch, capsys, target, says) -> None:
    write(tmp_path, "nodeadline.py", RIGHT.read_text(encoding="utf-8"))  # a working loop, in the folder it is run in
    monkeypatch.chdir(tmp_path)
    assert main(["check", target]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.splitlines() == [f"agentlab check: {says}"], err


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any file")
def test_cli_an_unreadable_file_is_one_line(tmp_path, capsys) -> None:
    path = write(tmp_path, "secret.py", "async def agent_loop(*a, **k): pass\n")
    path.chmod(0)
    assert main(["check", str(path)]) == 2
    assert "cannot be read" in capsys.readouterr().err


def test_cli_without_a_step_checks_every_row_of_a_file(capsys) -> None:
    assert main(["check", str(RIGHT), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert (data["step"], data["passed"], data["total"]) == (None, len(select()), len(select()))


def test_cli_checks_the_last_workbook_against_every_row(capsys) -> None:
    workbook = Path(__file__).resolve().parent.parent / "teachers" / "source" / "workbooks" / "06_limits.ipynb"
    assert main(["check", str(workbook), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["total"] == len(select())


# -- cheats -------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("cheat", CHEATS, ids=[c.stem for c in CHEATS])
def test_every_cheat_scores_zero(cheat: Path) -> None:
    report = grade(str(cheat)).report
    assert report.points == 0, str(report)


@pytest.mark.parametrize(
    ("cheat", "hint_id"),
    [
        ("delegate_import", "diagnosis/delegated"),
        ("delegate_importlib", "diagnosis/delegated"),
        ("delegate_copied_file", "diagnosis/delegated"),
        ("patch_checker_at_import", "diagnosis/tampered"),
        ("monkeypatch_asyncio", "diagnosis/tampered"),
        ("fake_report_and_exit", "diagnosis/stopped"),
        ("a__delegate_copied_source", "diagnosis/delegated"),  # loop.py's text compiled under another file name
    ],
)
def test_each_cheat_class_is_named(cheat: str, hint_id: str) -> None:
    report = grade(str(FIXTURES / "cheats" / f"{cheat}.py"), "limits").report
    assert {row.hint_id for row in report.rows} == {hint_id}, str(report)


def test_a_submission_that_pastes_agentlabs_loop_is_named_as_delegating(tmp_path) -> None:
    pasted = tmp_path / "pasted.py"
    source = (Path(__file__).resolve().parent.parent / "agentlab" / "loop.py").read_text(encoding="utf-8")
    pasted.write_text("# my own loop, honest\n" + source, encoding="utf-8")
    report = grade(str(pasted), "limits").report
    assert report.points == 0 and {row.hint_id for row in report.rows} == {"diagnosis/delegated"}, str(report)


def test_a_correct_loop_passes_in_its_own_process_whatever_the_seed() -> None:
    for seed in (1, 2):
        assert grade(str(RIGHT), "checks", seed=seed).report.passed


def test_the_seed_varies_the_names_the_scenarios_use() -> None:
    plain, one, two = Names(), Names(1), Names(2)
    assert (plain.id(1), plain.tool, plain.value(1)) == ("c1", "lookup", "A")
    assert len({(n.id(1), n.value(1), n.done) for n in (plain, one, two)}) == 3


# -- a class --------------------------------------------------------------------------------------------------------


def test_a_class_is_graded_whole_whatever_the_submissions_do(tmp_path) -> None:
    folder = tmp_path / "submissions"
    write(folder, "ada.py", RIGHT.read_text(encoding="utf-8"))
    write(folder, "bob/solution.py", "def agent_loop(:\n")
    write(folder, "cy.py", "import no_such_module_here\n")
    write(folder, "dee.py", "while True:\n    pass\n")
    write(folder, "eve.py", "import sys\nsys.stdout.write('x' * 3_000_000)\nasync def agent_loop(*a, **k): pass\n")
    (folder / "fay").mkdir()
    limits = Limits(load_s=3.0, output_mb=0.5)
    results = grade_class(folder, tmp_path / "grades", "limits", jobs=2, limits=limits)
    by_student = {graded.student: graded for graded in results}
    assert sorted(by_student) == ["ada", "bob", "cy", "dee", "eve", "fay"]
    assert by_student["ada"].report.passed
    reasons = {
        "bob": "SyntaxError",
        "cy": "No module named 'no_such_module_here'",
        "dee": "did not finish within 3 s",
        "eve": "more output",
        "fay": "no submission found",
    }
    for student, reason in reasons.items():
        assert by_student[student].report.points == 0 and reason in by_student[student].problem, by_student[student]
    with (tmp_path / "grades" / "grades.csv").open(encoding="utf-8") as file:
        rows = list(csv.DictReader(file))
    keys = [b.key for b in select("limits")]
    assert list(rows[0])[: 3 + len(keys)] == ["student", "submission", "step", *keys]
    assert (rows[0]["student"], rows[0]["step"], rows[0]["passed"], rows[0]["total"]) == ("ada", "limits", "2", "2")
    assert all((tmp_path / "grades" / f"{s}.txt").read_text(encoding="utf-8") for s in by_student)


def test_cli_grade_writes_the_csv_and_says_where(tmp_path, capsys) -> None:
    folder = tmp_path / "class"
    write(folder, "ada.py", RIGHT.read_text(encoding="utf-8"))
    assert main(["grade", str(folder), "--step", "limits", "--out", str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    assert "ada: 2/2" in out and str(tmp_path / "out" / "grades.csv") in out
    assert main(["grade", str(tmp_path / "nothing")]) == 2


@pytest.mark.parametrize("step", EXTRA_STEPS)
def test_cli_grade_takes_the_steps_check_takes(tmp_path, capsys, step) -> None:
    """The steps past the exercise (writes, recovery): `check --step` had them and `grade --step` refused them."""
    folder = tmp_path / "class"
    write(folder, "ada.py", RIGHT.read_text(encoding="utf-8"))  # a loop of the exercise: it need not pass them
    assert main(["grade", str(folder), "--step", step, "--out", str(tmp_path / "out")]) == 0
    assert f"/{len(select(step))}\n" in capsys.readouterr().out
    with (tmp_path / "out" / "grades.csv").open(encoding="utf-8") as file:
        columns = next(csv.reader(file))
    assert columns[2 : 3 + len(select(step))] == ["step", *(b.key for b in select(step))]


def test_cli_checks_workbook_7_on_its_writes_step(capsys) -> None:
    workbook = Path(__file__).resolve().parent.parent / "teachers" / "source" / "workbooks" / "07_writes.ipynb"
    assert main(["check", str(workbook), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert (data["step"], data["passed"], data["total"]) == ("writes", len(select("writes")), len(select("writes")))


def test_grades_csv_says_which_step_each_submission_was_graded_at(tmp_path) -> None:
    """A workbook-1 submission out of 5 beside a whole loop out of 24: the step column tells them apart."""
    folder = tmp_path / "class"
    shutil.copy(WORKBOOKS / "01_basics.ipynb", write(folder, "ada/01_basics.ipynb", ""))
    write(folder, "bob.py", RIGHT.read_text(encoding="utf-8"))
    grade_class(folder, tmp_path / "grades", jobs=2)
    with (tmp_path / "grades" / "grades.csv").open(encoding="utf-8") as file:
        rows = {row["student"]: row for row in csv.DictReader(file)}
    assert (rows["ada"]["step"], rows["ada"]["passed"], rows["ada"]["total"]) == ("basics", "5", "5")
    assert (rows["bob"]["step"], rows["bob"]["passed"], rows["bob"]["total"]) == ("all", "24", "24")


@pytest.mark.parametrize("start", ["=", "+", "-", "@"])
def test_a_csv_cell_a_student_controls_is_never_a_formula(tmp_path, start) -> None:
    folder = tmp_path / "class"
    name = f"{start}HYPERLINK(1)"
    write(folder, f"{name}/solution.py", f"raise RuntimeError('{start}cmd')\n")  # a folder name and an error message
    write(folder, f"{start}2+3.py", "def agent_loop(:\n")
    grade_class(folder, tmp_path / "grades", "limits", jobs=2)
    with (tmp_path / "grades" / "grades.csv").open(encoding="utf-8") as file:
        table = list(csv.reader(file))
    cells = [cell for row in table[1:] for cell in row]
    assert not [cell for cell in cells if cell.startswith(("=", "+", "-", "@"))], table
    students = sorted(row[0] for row in table[1:])
    assert students == sorted([f"'{start}2+3", f"'{name}"])
    assert csv_cell("-1") == "'-1" and csv_cell(-1) == -1 and csv_cell("ada") == "ada"


def test_feedback_files_name_no_absolute_path_of_the_graders_machine(tmp_path) -> None:
    folder = (tmp_path / "class").resolve()  # graded by its absolute path, as a teacher's script may
    write(folder, "ada/solution.py", "raise RuntimeError('I am ' + __file__)\n")
    write(folder, "bob.py", "def agent_loop(:\n")
    write(folder, "cy.py", "import os\nasync def agent_loop(*a, **k):\n    raise RuntimeError('in ' + os.getcwd())\n")
    results = grade_class(folder, tmp_path / "grades", "limits", jobs=2)
    assert {g.student: g.report.points for g in results} == {"ada": 0, "bob": 0, "cy": 0}
    texts = {path.stem: path.read_text(encoding="utf-8") for path in (tmp_path / "grades").glob("*.txt")}
    assert "ada/solution.py" in texts["ada"] and "loading bob.py raised SyntaxError" in texts["bob"]
    assert "raised RuntimeError: in" in texts["cy"], texts["cy"]
    for student, text in texts.items():
        for machine in (str(tmp_path), str(ROOT), tempfile.gettempdir() + "/", "agentlab-grade-", str(Path.home())):
            assert machine not in text, (student, machine, text)
