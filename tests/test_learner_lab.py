"""A learner's JupyterLab shows no teachers' tools: nbgrader's server and lab extensions are off in .venv.

nbgrader comes with the developer tools (requirements-dev.txt: `make student` and the tests run it from the command
line), and with it JupyterLab menus and server pages (Formgrader, Assignments, Courses) that, outside a teacher's
nbgrader course, only show errors. The Makefile switches them off in .venv (NBGRADER_OFF) when it installs the
developer tools and before `make lab` starts; this asks Jupyter's own commands what is enabled in the environment
the tests run in. tests/browser/test_no_teacher_menus.py looks at the menus themselves.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ANSI = re.compile(r"\x1b\[[0-9;]*m")
MAKEFILE = Path(__file__).resolve().parent.parent / "Makefile"


def jupyter(*args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "jupyter", *args], capture_output=True, text=True, timeout=180, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return ANSI.sub("", done.stdout + done.stderr)


@pytest.fixture(scope="module", autouse=True)
def _set_up_by_make() -> None:
    if not (Path(sys.prefix) / ".dev-ready").exists():  # the Makefile's stamp: it promises this, plain pip does not
        pytest.skip(f"{sys.prefix} was not set up by `make test`, which switches nbgrader's extensions off")


def test_no_nbgrader_server_extension_is_enabled() -> None:
    listed = jupyter("server", "extension", "list")
    enabled = re.findall(r"^\s*(\S*nbgrader\S*) enabled\b", listed, re.MULTILINE)
    assert not enabled, f"nbgrader's server pages are on in {sys.prefix}: {enabled}; make lab switches them off"


def test_no_nbgrader_lab_extension_is_enabled() -> None:
    listed = jupyter("labextension", "list")
    enabled = re.findall(r"^\s*(\S*nbgrader\S*) v\S+ enabled\b", listed, re.MULTILINE)
    assert not enabled, f"nbgrader's JupyterLab menus are on in {sys.prefix}: {enabled}; make lab switches them off"


def test_make_lab_switches_them_off_before_it_starts_jupyterlab() -> None:
    recipe = MAKEFILE.read_text(encoding="utf-8").split("\nlab: ", 1)[1].split("\n\n", 1)[0]
    assert recipe.index("NBGRADER_OFF") < recipe.index("$(BIN)/jupyter lab")
