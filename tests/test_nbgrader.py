"""nbgrader, for real: a course of three submissions, released and autograded by nbgrader, and graded by the checker.

The course is workbook 6 as `teachers/` holds it. Three students hand it in: one with a correct loop, one with a
real mistake (the context check lets one character too many through... or not: the checker decides), and one who
cheats by rewriting the locked check cells to claim full marks. nbgrader's autograde puts the check cells back as
released, runs each notebook, and reads each check cell's last value (`report.points`) as its partial credit; the
test checks that the gradebook holds, cell by cell, the number of rows the checker passes for the same file, graded
in a process of its own (`python -m agentlab check FILE --json`).

Slow (a minute or two): `make test-nbgrader` runs it, and CI does; `make test` skips it.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from agentlab.classroom import student

pytestmark = pytest.mark.nbgrader
WORKBOOK = "06_limits.ipynb"
STUDENTS = ("correct", "mistaken", "cheat")


@pytest.fixture(autouse=True)
def _only_when_selected(request: pytest.FixtureRequest) -> None:
    expression = request.config.option.markexpr or ""
    if not re.search(r"\bnbgrader\b", expression) or re.search(r"\bnot\s+nbgrader\b", expression):
        pytest.skip("the nbgrader course (a minute or two): run it with `make test-nbgrader`")


def nbgrader(course: Path, *args: str) -> str:
    env_path = f"{Path(sys.executable).parent}:{__import__('os').environ.get('PATH', '')}"  # alembic, by name
    done = subprocess.run(
        [sys.executable, "-m", "nbgrader", *args],
        cwd=course,
        capture_output=True,
        text=True,
        timeout=900,
        env={**__import__("os").environ, "PATH": env_path},
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout + done.stderr


def solution_of(source: dict, grade_id: str) -> list[str]:
    cell = next(c for c in source["cells"] if c["metadata"].get("nbgrader", {}).get("grade_id") == grade_id)
    text = "".join(cell["source"])
    return [
        line for line in text.splitlines(keepends=True) if "### BEGIN SOLUTION" not in line and "### END" not in line
    ]


def submission(released: dict, source: dict, who: str) -> dict:
    notebook = json.loads(json.dumps(released))
    for cell in notebook["cells"]:
        grading = cell["metadata"].get("nbgrader", {})
        if grading.get("solution") and who in ("correct", "mistaken"):
            lines = solution_of(source, grading["grade_id"])
            text = "".join(lines)
            if who == "mistaken":
                assert text.count("if len(text) > max_chars:") == 1
                text = text.replace("if len(text) > max_chars:", "if len(text) >= max_chars:")  # exactly max_chars
            cell["source"] = text.splitlines(keepends=True)
        if grading.get("grade") and who == "cheat":
            cell["source"] = [f"{grading['points']}  # full marks, whatever the loop does"]
    return notebook


def checker_passes(path: Path, step: str | None) -> int:
    command = [sys.executable, "-m", "agentlab", "check", str(path), "--json", *(["--step", step] if step else [])]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert done.returncode in (0, 1), done.stderr[-2000:]
    return json.loads(done.stdout)["passed"]


def test_the_gradebook_agrees_with_the_checker(tmp_path: Path) -> None:
    from nbgrader.api import Gradebook

    course = tmp_path / "course"
    (course / "source" / "workbooks").mkdir(parents=True)
    shutil.copy(student.COURSE / "nbgrader_config.py", course)
    shutil.copy(student.SOURCE / WORKBOOK, course / "source" / "workbooks")
    nbgrader(course, "generate_assignment", "workbooks", "--force")
    released = json.loads((course / "release" / "workbooks" / WORKBOOK).read_text(encoding="utf-8"))
    source = json.loads((student.SOURCE / WORKBOOK).read_text(encoding="utf-8"))
    for who in STUDENTS:
        folder = course / "submitted" / who / "workbooks"
        folder.mkdir(parents=True)
        (folder / WORKBOOK).write_text(json.dumps(submission(released, source, who), indent=1), encoding="utf-8")
    nbgrader(course, "autograde", "workbooks", "--create", "--force")

    checks = {
        c["metadata"]["nbgrader"]["grade_id"]: ("limits" if 'step="limits"' in "".join(c["source"]) else None)
        for c in source["cells"]
        if c["metadata"].get("nbgrader", {}).get("grade")
    }
    assert checks == {"check_limits": "limits", "check_all": None}
    scores: dict[str, dict[str, float]] = {}
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:
        for who in STUDENTS:
            scores[who] = {
                grade_id: gradebook.find_grade(grade_id, "06_limits", "workbooks", who).score for grade_id in checks
            }
    verdicts = {
        who: {
            grade_id: checker_passes(course / "submitted" / who / "workbooks" / WORKBOOK, step)
            for grade_id, step in checks.items()
        }
        for who in STUDENTS
    }
    assert scores == verdicts
    assert verdicts["correct"] == {"check_limits": 2, "check_all": 24}
    assert 0 < sum(verdicts["mistaken"].values()) < 26
    assert verdicts["cheat"] == {"check_limits": 0, "check_all": 0}
