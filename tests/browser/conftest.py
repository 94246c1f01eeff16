"""Browser tests: one JupyterLab server and one headless Chromium for the whole session.

They are slow, so `make test` (plain pytest) skips them with a reason that says
how to run them; `make test-browser` selects them with `-m browser`. Selected on
a machine without Chromium, they fail and say how to install it.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from lab_harness import CHROMIUM, NOTEBOOKS, Chromium, LabServer, start_chromium, start_lab, stop_chromium, stop_lab

SHOTS_ENV = "AGENTLAB_SCREENSHOTS"  # where to keep the screenshots; a new temporary folder by default


def _selected(config: pytest.Config) -> bool:
    """Whether this pytest run asked for the browser tests (`-m browser`, as `make test-browser` does)."""
    expression = config.getoption("markexpr") or ""
    return re.search(r"\bbrowser\b", expression) is not None and re.search(r"\bnot\s+browser\b", expression) is None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if _selected(config):
        return
    missing = "" if CHROMIUM.exists() else f"; Chromium is not installed here ({CHROMIUM} missing)"
    skip = pytest.mark.skip(
        reason=f"browser test (JupyterLab in headless Chromium, minutes long): run it with `make test-browser`{missing}"
    )
    for item in items:
        if item.get_closest_marker("browser") is not None:
            item.add_marker(skip)


_SHOTS_KEY = pytest.StashKey[Path]()


def pytest_configure(config: pytest.Config) -> None:
    if _selected(config):
        chosen = os.environ.get(SHOTS_ENV)
        folder = Path(chosen) if chosen else Path(tempfile.mkdtemp(prefix="agentlab-browser-screenshots-"))
        folder.mkdir(parents=True, exist_ok=True)
        config.stash[_SHOTS_KEY] = folder


def pytest_report_header(config: pytest.Config) -> str | None:
    folder = config.stash.get(_SHOTS_KEY, None)
    return f"browser test screenshots: {folder}" if folder else None


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    folder = config.stash.get(_SHOTS_KEY, None)
    if folder is not None:
        terminalreporter.write_line(f"browser test screenshots: {folder}")


@pytest.fixture(scope="session")
def shots_dir(pytestconfig: pytest.Config) -> Path:
    """The folder for the screenshots (AGENTLAB_SCREENSHOTS, or a new temporary one), printed first and last."""
    return pytestconfig.stash[_SHOTS_KEY]


@pytest.fixture(scope="session")
def workdir() -> Iterator[Path]:
    """The throwaway folder for the server's copy of the notebooks and all its state."""
    folder = Path(tempfile.mkdtemp(prefix="agentlab-browser-"))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="session")
def lab(workdir: Path) -> Iterator[LabServer]:
    server = start_lab(workdir, NOTEBOOKS)
    try:
        yield server
    finally:
        stop_lab(server)


@pytest.fixture(scope="session")
def chromium(workdir: Path) -> Iterator[Chromium]:
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} not found: install Debian's Chromium (as root: apt-get install -y chromium)")
    browser = start_chromium(workdir / "home")
    try:
        yield browser
    finally:
        stop_chromium(browser)
