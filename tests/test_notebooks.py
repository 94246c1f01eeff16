"""The notebooks are tests too: nbval (configured in pyproject.toml) re-executes each one and compares outputs.

Strict nbval catches stale outputs by itself. What it cannot catch is a notebook it never sees, or a cell it
does not compare: a cell saved without running has no reference outputs, so nbval runs it and checks nothing.
These tests close those gaps, and keep saved widget state (large, volatile, useless without a kernel) out.
Re-execute the notebooks with `make notebooks`.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from agentlab.lab.scenarios import SCENARIOS

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
STUDENT_WORK = (NOTEBOOKS / "exercises", NOTEBOOKS / "pl" / "exercises")  # learners' copies: never executed here
WORKBOOKS = ROOT / "teachers" / "source"  # their solved sources are
# The series, in its reading order (tests/test_lesson_shape.py holds it to the notebooks' own links).
SERIES = (
    "00_start_here",
    "01_call_ids",
    "02_tool_names",
    "03_tool_args",
    "04_budgets",
    "05_duplicate_ids",
    "05b_asyncio_primer",
    "06_deadline",
    "07_limits_and_cancellation",
    "07b_the_whole_loop",
    "08_tutorial_weather",
    "10_real_model",
    "09a_approval",
    "09b_write_budget",
    "09c_at_most_once",
    "09d_whole_or_nothing",
    "11_recovery",
)
# The lessons of the series' pattern: a demonstration, the reference check, a playground, "without the rule".
# (00 is the start, 05b the asyncio primer, 07b the whole loop: pages, not lessons.)
LESSONS = tuple(name for name in SERIES if not name.startswith(("00", "05b", "07b")))
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
# nbval markers that weaken a cell's check; a cell using one must say why in a comment of its own.
WEAKENING = {"NBVAL_SKIP", "NBVAL_IGNORE_OUTPUT", "nbval-skip", "nbval-ignore-output"}


def notebooks_under_test() -> list[Path]:
    return sorted(
        path
        for path in [*NOTEBOOKS.rglob("*.ipynb"), *WORKBOOKS.rglob("*.ipynb")]
        if not set(STUDENT_WORK) & set(path.parents) and ".ipynb_checkpoints" not in path.parts
    )


def code_cells(path: Path) -> list[nbformat.NotebookNode]:
    return [cell for cell in nbformat.read(path, as_version=4).cells if cell.cell_type == "code"]


NOTEBOOK_PARAMS = [pytest.param(path, id=str(path.relative_to(ROOT))) for path in notebooks_under_test()]


def test_the_series_is_all_there() -> None:
    names = {path.stem for path in NOTEBOOKS.glob("*.ipynb")}
    assert set(SERIES) <= names, f"missing from notebooks/: {sorted(set(SERIES) - names)}"


@pytest.mark.parametrize("name", LESSONS)
def test_each_lesson_runs_its_reference_check_and_shows_a_playground(name: str) -> None:
    """The series' pattern, kept when a notebook is split or added: `await verify(...)` and `playground(...)`."""
    sources = "\n".join(cell.source for cell in code_cells(NOTEBOOKS / f"{name}.ipynb"))
    assert "await verify(" in sources, f"{name} runs no reference check from agentlab.behaviours"
    shown = re.findall(r"playground\(\"(\w+)\"", sources)
    assert shown and set(shown) <= set(SCENARIOS), f"{name} shows no playground of agentlab.lab.scenarios: {shown}"
    markdown = "\n".join(cell.source for cell in nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4).cells)
    assert "## Without the rule" in markdown, f"{name} has no section 'Without the rule'"


def test_nbval_collects_every_cell_of_every_notebook() -> None:
    """`make test` (its pytest config, as is) collects each notebook, one item per code cell; no student copy."""
    listing = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "-p", "no:xdist"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert listing.returncode == 0, listing.stdout[-3000:] + listing.stderr[-3000:]
    collected: dict[str, int] = {}
    for match in re.finditer(r"^((?:notebooks|teachers)/\S+\.ipynb)::Cell \d+$", listing.stdout, flags=re.MULTILINE):
        collected[match[1]] = collected.get(match[1], 0) + 1
    expected = {str(path.relative_to(ROOT)): len(code_cells(path)) for path in notebooks_under_test()}
    assert collected == expected


@pytest.mark.parametrize("path", NOTEBOOK_PARAMS)
def test_saved_from_one_clean_run(path: Path) -> None:
    """Every code cell ran, in order, in one fresh kernel: execution counts are exactly 1, 2, 3, ..."""
    cells = code_cells(path)
    assert all(cell.source.strip() for cell in cells), "an empty code cell: remove it"
    counts = [cell.execution_count for cell in cells]
    assert counts == list(range(1, len(cells) + 1)), (
        f"execution counts {counts}: some cells were not run, or not top to bottom from a fresh kernel; "
        "run `make notebooks`"
    )


@pytest.mark.parametrize("path", NOTEBOOK_PARAMS)
def test_no_saved_widget_state(path: Path) -> None:
    """No widget state, and no output pointing at it: JupyterLab would show "model not found", not the snapshot."""
    notebook = nbformat.read(path, as_version=4)
    assert "widgets" not in notebook.metadata, "saved widget state: run `make notebooks`, which strips it"
    assert not [cell for cell in notebook.cells if "widgets" in cell.metadata]
    views = [
        number
        for number, cell in enumerate(code_cells(path))
        if any(WIDGET_VIEW in output.get("data", {}) for output in cell.outputs)
    ]
    assert not views, f"code cells {views} save a widget view with no state to show: run `make notebooks`"


@pytest.mark.parametrize("path", NOTEBOOK_PARAMS)
def test_weakened_checks_say_why(path: Path) -> None:
    """A cell that nbval skips or does not compare carries a comment explaining why."""
    for number, cell in enumerate(code_cells(path)):
        lines = [line.strip() for line in cell.source.splitlines()]
        markers = WEAKENING & ({line.lstrip("# ").strip() for line in lines} | set(cell.metadata.get("tags", [])))
        if markers:
            reasons = [line for line in lines if line.startswith("#") and line.lstrip("# ").strip() not in WEAKENING]
            assert reasons, f"code cell {number} uses {sorted(markers)} without a comment saying why"
