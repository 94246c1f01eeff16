"""A learner's JupyterLab shows no teachers' tools, even after `make test` or `make student` installed nbgrader.

nbgrader (requirements-dev.txt) brings JupyterLab menus and server pages (Formgrader, Assignments, Courses) that,
outside a teacher's nbgrader course, only show errors ("exchange directory does not exist", a traceback in the
terminal). The Makefile switches them off in .venv (NBGRADER_OFF); this opens JupyterLab on notebook 00 in that
.venv, as `make lab` does, and finds neither a menu nor a page of them. `tests/test_learner_lab.py` checks the same
without a browser, from `jupyter server extension list` and `jupyter labextension list`.

    make test-browser      # the screenshot: <folder>/no-teacher-menus.png
"""

from __future__ import annotations

import urllib.error
import urllib.request
from pathlib import Path

import pytest
from lab_harness import Chromium, LabServer, notebook_page, wait_for

NOTEBOOK = Path("00_start_here.ipynb")
# nbgrader's menu and its pages; any of these in the menu bar or the launcher is a teacher's tool showing.
TEACHERS_WORDS = ("nbgrader", "formgrader", "assignment list", "course list", "validate")
TEACHERS_PAGES = ("/formgrader", "/assignments", "/courses")


@pytest.mark.browser
def test_the_learners_lab_shows_no_nbgrader_menu_nor_page(lab: LabServer, chromium: Chromium, shots_dir: Path) -> None:
    with notebook_page(chromium.browser, "no-teacher-menus", lab.root / NOTEBOOK, shots_dir) as page:
        page.open(lab.url(NOTEBOOK))
        menu_bar = page.page.locator(".lm-MenuBar-itemLabel")
        labels = wait_for("the menu bar", lambda: "File" in (found := menu_bar.all_inner_texts()) and found, 30)
        shot = page.screenshot()
        shown = [label for label in labels if any(word in label.lower() for word in TEACHERS_WORDS)]
        assert not shown, f"the learner's JupyterLab shows nbgrader's menus {shown} (see {shot}): run make lab again"
        toolbar = page.page.locator(".jp-NotebookPanel-toolbar").inner_text().lower()
        assert "validate" not in toolbar, f"nbgrader's Validate button is in the notebook's toolbar ({shot})"
        sidebars = " ".join(page.page.locator(".jp-SideBar").all_inner_texts()).lower()
        assert "create assignment" not in sidebars, f"nbgrader's Create Assignment panel is in a sidebar ({shot})"
    answers = {path: status(lab, path) for path in TEACHERS_PAGES}
    assert answers == dict.fromkeys(TEACHERS_PAGES, 404), f"nbgrader's server pages answer: {answers}"


def status(lab: LabServer, path: str) -> int:
    """The HTTP status the server answers `path` with (the token sent, so 404 means no such page)."""
    request = urllib.request.Request(f"{lab.base_url}{path}", headers={"Authorization": f"token {lab.token}"})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status
    except urllib.error.HTTPError as error:
        return error.code
