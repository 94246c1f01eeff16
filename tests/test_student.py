"""The student versions of the workbooks: up to date, without a solution left in them, and they run.

`make student` (or `python -m agentlab student`) writes them; these tests fail when someone
edits a workbook and forgets to, when a solution leaks into what students get, or when a
student version would crash instead of showing the checker's failures.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from agentlab import student
from agentlab.__main__ import main
from agentlab.behaviours import STEPS, select
from agentlab.student import WorkbookError, has_solution, stale, strip_solutions, student_notebook

SOURCES = sorted(student.SOURCE.glob("*.ipynb"))


def cells(path: Path) -> list[dict]:
    return json.loads(path.read_text(encoding="utf-8"))["cells"]


def test_there_is_a_workbook_per_step_in_order() -> None:
    steps = [json.loads(path.read_text(encoding="utf-8"))["metadata"]["agentlab"]["step"] for path in SOURCES]
    assert steps == [*STEPS, "writes"]  # the exercise's five, then workbook 6 (recovery is notebook 11's, no workbook)


def test_the_committed_student_versions_are_up_to_date() -> None:
    assert stale() == [], "run `make student` (python -m agentlab student) and commit notebooks/exercises/student/"
    assert main(["student", "--check"]) == 0


@pytest.mark.parametrize("path", SOURCES, ids=lambda path: path.stem)
def test_no_solution_is_left_in_a_student_version(path: Path) -> None:
    source_cells, student_cells = cells(path), cells(student.STUDENT / path.name)
    student_text = "\n".join("".join(cell["source"]) for cell in student_cells if cell["cell_type"] == "code")
    assert not has_solution(student_text)  # the hints (markdown) show some code on purpose, one step at a time
    given, solved = [], []
    for cell in source_cells:
        inside = False
        for line in "".join(cell["source"]).splitlines():
            if line.strip() in ("### BEGIN SOLUTION", "### END SOLUTION"):
                inside = line.strip() == "### BEGIN SOLUTION"
            else:
                (solved if inside else given).append(line.strip())
    assert solved, "a workbook with nothing for the student to write"
    leaked = [line for line in solved if len(line) > 12 and line not in given and line in student_text]
    assert leaked == []
    regions = sum("".join(cell["source"]).count("### BEGIN SOLUTION") for cell in source_cells)
    assert student_text.count("raise NotImplementedError()") == regions


@pytest.mark.parametrize("path", SOURCES, ids=lambda path: path.stem)
def test_a_source_workbook_has_outputs_and_its_student_version_none(path: Path) -> None:
    checks = [c for c in cells(path) if "check" in c["metadata"].get("tags", [])]
    assert checks and all(c["outputs"] for c in checks)
    assert all(not c.get("outputs") for c in cells(student.STUDENT / path.name) if c["cell_type"] == "code")


@pytest.mark.parametrize("path", SOURCES, ids=lambda path: path.stem)
def test_every_check_cell_is_worth_its_rows_for_nbgrader(path: Path) -> None:
    notebook = json.loads(path.read_text(encoding="utf-8"))
    step = notebook["metadata"]["agentlab"]["step"]
    for cell in notebook["cells"]:
        if "check" in cell["metadata"].get("tags", []):
            grading = cell["metadata"]["nbgrader"]
            source = "".join(cell["source"])
            rows = len(select(step)) if f'step="{step}"' in source else len(select())
            assert grading["grade"] and grading["points"] == rows
            assert source.splitlines()[-1] == "report.points"  # nbgrader's partial credit reads this number


def test_student_versions_run_top_to_bottom_and_show_the_failures() -> None:
    """Each student version runs in a fresh kernel without an error, and its checks say what to write."""
    notebooks = {path.name: nbformat.read(student.STUDENT / path.name, as_version=4) for path in SOURCES}

    async def run_all() -> None:
        clients = [
            NotebookClient(
                nb, timeout=60, kernel_name="python3", resources={"metadata": {"path": str(student.STUDENT)}}
            )
            for nb in notebooks.values()
        ]
        await asyncio.gather(*(client.async_execute() for client in clients))

    asyncio.run(run_all())
    for name, notebook in notebooks.items():
        for cell in notebook.cells:
            if cell.cell_type != "code":
                continue
            assert not [o for o in cell.outputs if o.output_type == "error"], f"{name}: a cell raised"
            assert not [o for o in cell.outputs if o.get("name") == "stderr"], f"{name}: a cell wrote to stderr"
            if "check" in cell.metadata.get("tags", []):
                shown = cell.outputs[0]["data"]["text/plain"]
                assert "✗" in shown and "YOUR CODE HERE" in shown, f"{name}:\n{shown}"
                # A workbook past the exercise (6: writes) keeps the exercise's code whole, so its check of the
                # whole exercise may pass the rules no gap of its own is on the way to; its own step fails whole.
                step = notebook.metadata["agentlab"]["step"]
                if step in STEPS or f'step="{step}"' in cell.source:
                    assert "✓" not in shown, f"{name}:\n{shown}"
                    assert cell.outputs[-1]["data"]["text/plain"] == "0"


# -- cutting the solutions out ---------------------------------------------------------------------------------------


def test_a_region_becomes_the_stub_at_its_indentation() -> None:
    source = "def f():\n    x = 1\n    ### BEGIN SOLUTION\n    return x\n    ### END SOLUTION\n"
    assert strip_solutions(source) == "def f():\n    x = 1\n    # YOUR CODE HERE\n    raise NotImplementedError()"


@pytest.mark.parametrize(
    ("source", "problem"),
    [
        ("### BEGIN SOLUTION\nx = 1\n", "without an END SOLUTION"),
        ("x = 1\n### END SOLUTION\n", "END SOLUTION without a BEGIN"),
        ("### BEGIN SOLUTION\n### BEGIN SOLUTION\n", "inside another"),
    ],
)
def test_unbalanced_markers_are_refused(source: str, problem: str) -> None:
    with pytest.raises(WorkbookError, match=problem):
        strip_solutions(source)


def test_a_region_outside_a_solution_cell_is_refused() -> None:
    notebook = {"cells": [{"cell_type": "code", "metadata": {}, "source": "### BEGIN SOLUTION\n### END SOLUTION"}]}
    with pytest.raises(WorkbookError, match="not an nbgrader solution cell"):
        student_notebook(notebook)


def test_stale_names_missing_changed_and_extra_versions(tmp_path: Path) -> None:
    source, out = tmp_path / "source", tmp_path / "student"
    source.mkdir()
    for path in SOURCES[:2]:
        (source / path.name).write_text(path.read_text(encoding="utf-8"), encoding="utf-8")
    assert stale(source, out) == [f"{SOURCES[0].name}: missing", f"{SOURCES[1].name}: missing"]
    assert [p.name for p in student.write(source, out)] == [SOURCES[0].name, SOURCES[1].name]
    assert stale(source, out) == [] and student.write(source, out) == []
    (out / SOURCES[0].name).write_text("{}", encoding="utf-8")
    (out / "99_extra.ipynb").write_text("{}", encoding="utf-8")
    assert stale(source, out) == [f"{SOURCES[0].name}: out of date", "99_extra.ipynb: has no source workbook"]
