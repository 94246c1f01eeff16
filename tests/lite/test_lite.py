"""The browser edition, as a learner with only a browser has it: every notebook of the series run top to bottom in
the Pyodide kernel of the built site (lite/dist), a playground's slider moved, a reference check that fails on a
wrong loop, a workbook checked; nothing asked of anything but 127.0.0.1 (`make test-lite`)."""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import Served, only_here
from lab_harness import LAPTOP, NOTEBOOKS, NotebookPage, wait_for
from playground_view import PlaygroundView

pytestmark = pytest.mark.lite

SERIES = sorted(path.stem for path in NOTEBOOKS.glob("*.ipynb"))
KERNEL_START_S = 180  # the first page downloads and compiles Pyodide; later ones have it cached
RUN_S = 300


@contextlib.contextmanager
def open_page(chromium, site: Served, name: str, source: Path, shots: Path) -> Iterator[NotebookPage]:
    # The site's service worker is what lets the kernel read the notebook's folder (a notebook in exercises/ does
    # not start without it, on a host that sends no cross-origin isolation headers): allowed, as a learner has it.
    # Its own requests go through the route too (conftest turns on Playwright's service-worker routing).
    context = chromium.browser.new_context(viewport=LAPTOP, service_workers="allow")
    context.route("**/*", only_here(site))
    try:
        page = context.new_page()
        page.set_default_timeout(60_000)
        notebook = NotebookPage(page, name, json.loads(source.read_text()), shots)
        page.on("pageerror", lambda error: notebook.console_errors.append(str(error)))
        page.goto(f"{site.url}/lab/index.html?path={source.relative_to(NOTEBOOKS).as_posix()}")
        expected = len(notebook.source["cells"])
        wait_for(f"{name}'s {expected} cells", lambda: len(notebook.cells()) == expected, KERNEL_START_S)
        notebook.wait_idle("the Pyodide kernel to start and be idle", KERNEL_START_S)
        yield notebook
    finally:
        context.close()


@pytest.fixture
def shots(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("lite-shots")


def run_whole(notebook: NotebookPage) -> float:
    started = time.monotonic()
    notebook.run_all()
    cells = notebook.wait_all_executed()
    problems = notebook.problems(cells)
    assert not problems, f"{notebook.name} in the browser:\n" + "\n".join(problems)
    return time.monotonic() - started


@pytest.mark.parametrize("name", SERIES)
def test_every_notebook_runs_top_to_bottom_in_pyodide(chromium, site: Served, name: str, shots: Path) -> None:
    with open_page(chromium, site, name, NOTEBOOKS / f"{name}.ipynb", shots) as notebook:
        seconds = run_whole(notebook)
        notebook.screenshot("run")
        print(f"{name}: ran in {seconds:.1f} s")
    assert site.outside == []


def outputs_of(notebook: NotebookPage, needle: str) -> list[str]:
    """The output texts of the first code cell whose source contains `needle`."""
    index = next(i for i, cell in enumerate(notebook.source["cells"]) if needle in "".join(cell["source"]))
    return [output["text"] for output in notebook.cells()[index].outputs]


def test_a_reference_check_fails_on_the_naive_loop_and_passes_on_agentlabs(chromium, site: Served, shots) -> None:
    with open_page(chromium, site, "01_call_ids", NOTEBOOKS / "01_call_ids.ipynb", shots) as notebook:
        run_whole(notebook)
        shown = "".join(outputs_of(notebook, "expect_failure=True"))
        assert "✓ A tool result with the right call id reaches the model." in shown
        assert "✗ A tool result with the right call id reaches the model." in shown  # the naive loop's verdict
        assert "instead it was {'role': 'tool', 'content'" in " ".join(shown.split())
    assert site.outside == []


def test_a_slider_moves_and_the_view_shows_what_that_run_gives(chromium, site: Served, shots) -> None:
    with open_page(chromium, site, "04_budgets", NOTEBOOKS / "04_budgets.ipynb", shots) as notebook:
        run_whole(notebook)
        notebook.wait_widgets_rendered()
        view = PlaygroundView(notebook.page, "budgets")
        view.output.scroll_into_view_if_needed()
        before = view.wait_settled_as_expected()  # the view equals a CPython run with the controls' settings
        view.type_into_readout("max_calls", 1)
        wait_for("max_calls to read 1", lambda: view.value("max_calls") == 1, 30)
        after = view.wait_settled_as_expected()
        assert after != before and "ToolBudgetError" in after
        notebook.screenshot("slider")
    assert site.outside == []


def test_a_workbook_check_grades_the_learners_loop_in_the_browser(chromium, site: Served, shots) -> None:
    source = NOTEBOOKS / "exercises" / "01_basics.ipynb"
    with open_page(chromium, site, "exercises-01_basics", source, shots) as notebook:
        run_whole(notebook)  # the stub raises NotImplementedError inside agent_loop: failed rows, no error cell
        shown = outputs_of(notebook, "report = check(agent_loop")
        assert shown[-1].strip() == "0", shown  # report.points: nothing passes yet
        assert "NotImplementedError" in " ".join(shown)
    assert site.outside == []
