"""The learners' copies of the workbooks: nbgrader's release, up to date, without a solution, and they run.

`make student` (`python -m agentlab student`) has nbgrader make them from teachers/source/workbooks/ and copies
them into notebooks/exercises/, never over a learner's edits. These tests fail when someone edits a workbook and
forgets to, when a solution leaks into what learners get, when a learner's copy would crash instead of showing
the checker's failures, or when the command would overwrite a learner's work.
"""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import sys
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from agentlab.__main__ import main
from agentlab.behaviours import STEPS, select
from agentlab.classroom import student
from agentlab.classroom.student import stale

_MARKER = re.compile(r"^\s*#+\s*(BEGIN|END) SOLUTION\s*$", re.MULTILINE)


def has_solution(text: str) -> bool:
    return bool(_MARKER.search(text))


SOURCES = sorted(student.SOURCE.glob("*.ipynb"))


def cells(path: Path) -> list[dict]:
    return json.loads(path.read_text(encoding="utf-8"))["cells"]


def test_there_is_a_workbook_per_step_in_order() -> None:
    steps = [json.loads(path.read_text(encoding="utf-8"))["metadata"]["agentlab"]["step"] for path in SOURCES]
    assert steps == [*STEPS, "writes"]  # the exercise's six, then workbook 7 (recovery is notebook 11's, no workbook)


def test_the_committed_student_versions_are_up_to_date() -> None:
    assert stale() == [], "run `make student` (python -m agentlab student) and commit notebooks/exercises/"


def test_the_polish_student_versions_are_the_release_of_the_polish_sources() -> None:
    (_english, (source, learners, _release)) = student.EDITIONS
    assert sorted(p.name for p in source.glob("*.ipynb")) == sorted(p.name for p in SOURCES)
    assert student.stale(source, learners) == [], "run `make student` and commit notebooks/pl/exercises/"


@pytest.mark.parametrize("path", SOURCES, ids=lambda path: path.stem)
def test_no_solution_is_left_in_a_student_version(path: Path) -> None:
    source_cells, student_cells = cells(path), cells(student.LEARNERS / path.name)
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
    assert all(not c.get("outputs") for c in cells(student.LEARNERS / path.name) if c["cell_type"] == "code")


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
    notebooks = {path.name: nbformat.read(student.LEARNERS / path.name, as_version=4) for path in SOURCES}

    async def run_all() -> None:
        clients = [
            NotebookClient(
                nb, timeout=60, kernel_name="python3", resources={"metadata": {"path": str(student.LEARNERS)}}
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
                # A workbook past the exercise (7: writes) keeps the exercise's code whole, so its check of the
                # whole exercise may pass the rules no gap of its own is on the way to; its own step fails whole.
                step = notebook.metadata["agentlab"]["step"]
                if step in STEPS or f'step="{step}"' in cell.source:
                    assert "✓" not in shown, f"{name}:\n{shown}"
                    assert cell.outputs[-1]["data"]["text/plain"] == "0"


# -- the command never overwrites a learner's work -------------------------------------------------------------------


def jupyter_config() -> dict[str, bytes]:
    """This environment's Jupyter configuration, where NBGRADER_OFF (the Makefile) switches nbgrader's menus off."""
    etc = Path(sys.prefix, "etc", "jupyter")
    return {str(path.relative_to(etc)): path.read_bytes() for path in sorted(etc.rglob("*.json"))}


def test_a_release_replaces_untouched_copies_and_keeps_edited_ones(tmp_path: Path) -> None:
    source, learners, release = tmp_path / "source", tmp_path / "exercises", tmp_path / "release"
    source.mkdir()
    for path in SOURCES[:2]:
        shutil.copy(path, source / path.name)
    config = jupyter_config()
    first = student.write(source, learners, release)
    assert jupyter_config() == config  # releasing with nbgrader leaves the learner's JupyterLab as it was
    assert [p.name for p in first.written] == [SOURCES[0].name, SOURCES[1].name] and first.kept == []
    assert sorted(p.name for p in release.iterdir()) == [SOURCES[0].name, SOURCES[1].name]
    assert stale(source, learners) == []
    # The teacher edits both workbooks; a learner has meanwhile written in the first copy.
    edited = learners / SOURCES[0].name
    work = edited.read_text(encoding="utf-8").replace("raise NotImplementedError()", "return 42  # mine", 1)
    edited.write_text(work, encoding="utf-8")
    for path in source.iterdir():
        notebook = json.loads(path.read_text(encoding="utf-8"))
        notebook["cells"][0]["source"] = [*notebook["cells"][0]["source"], "\n\nRevised."]
        path.write_text(json.dumps(notebook, indent=1), encoding="utf-8")
    second = student.write(source, learners, release)
    assert second.kept == [edited] and [p.name for p in second.written] == [SOURCES[1].name]
    assert edited.read_text(encoding="utf-8") == work  # the learner's work, untouched
    assert "Revised." in (learners / SOURCES[1].name).read_text(encoding="utf-8")
    assert "Revised." in (release / SOURCES[0].name).read_text(encoding="utf-8")  # the new version is there
    assert stale(source, learners) == [f"{SOURCES[0].name}: out of date", ".released.json: out of date"]
    third = student.write(source, learners, release)
    assert third.summary(tmp_path) == (
        "released 2 workbooks with nbgrader into release/; exercises/: 0 written, 1 already up to date, "
        "1 kept for a learner's edits"
    )


def test_the_command_says_which_copies_it_kept(tmp_path: Path, monkeypatch, capsys) -> None:
    outcome = student.Outcome(kept=[student.LEARNERS / "01_basics.ipynb"])
    monkeypatch.setattr(student, "write_all", lambda: [outcome])
    assert main(["student"]) == 1
    err = capsys.readouterr().err
    assert "kept notebooks/exercises/01_basics.ipynb: it has a learner's edits" in err
    assert "teachers/release/workbooks/01_basics.ipynb" in err


def test_the_command_says_what_it_did_when_all_went_well(monkeypatch, capsys) -> None:
    """`make student` used to print nothing when it succeeded."""
    names = [path.name for path in SOURCES]
    outcome = student.Outcome(
        written=[student.LEARNERS / names[0]],
        current=[student.LEARNERS / name for name in names[1:]],
        released=[student.RELEASE / name for name in names],
    )
    monkeypatch.setattr(student, "write_all", lambda: [outcome])
    assert main(["student"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == [
        f"wrote notebooks/exercises/{names[0]}",
        f"released {len(names)} workbooks with nbgrader into teachers/release/workbooks/; notebooks/exercises/: "
        f"1 written, {len(names) - 1} already up to date, 0 kept for a learner's edits",
    ]
