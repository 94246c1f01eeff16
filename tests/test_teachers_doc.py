"""docs/teachers.md shows the command line's real output: each `$ python -m agentlab ...` example is run here.

The examples run in a folder holding what they name: bob.py (a wrong loop from the fixtures), dee.py (a syntax
error), class/ (a right loop, the wrong one, a cheat, the syntax error) and repos/ (two students' GitHub Classroom
repositories: ada's workbook 1 solved, bob's with json.dumps where compact_json belongs), with a home folder of its
own (`classroom row` keeps a workbook's report there). `grade` prints a line per student as each finishes, in
parallel, so its lines are compared in any order.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "teachers.md"
FIXTURES = ROOT / "tests" / "fixtures"
SOURCE = ROOT / "teachers" / "source" / "workbooks"


def examples() -> list[tuple[str, list[str]]]:
    """(command, the lines it prints) for every `$ python -m agentlab` line of the doc's code blocks."""
    blocks: list[list[str]] = []
    inside = False
    for line in DOC.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            inside = not inside
            if inside:
                blocks.append([])
        elif inside:
            blocks[-1].append(line)
    found: list[tuple[str, list[str]]] = []
    for block in blocks:
        starts = [i for i, line in enumerate(block) if line.startswith("$ ")]
        for start, end in zip(starts, [*starts[1:], len(block)], strict=False):
            found.append((block[start][2:], block[start + 1 : end]))
    return found


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    here = tmp_path_factory.mktemp("teacher")
    wrong = (FIXTURES / "loops" / "wrong" / "timeout__abort_reason_rewrapped.py").read_text(encoding="utf-8")
    files = {
        "bob.py": wrong,
        "dee.py": "def agent_loop(:\n",
        "class/ada.py": (FIXTURES / "loops" / "right" / "classes__own_errors.py").read_text(encoding="utf-8"),
        "class/bob.py": wrong,
        "class/cy.py": (FIXTURES / "cheats" / "delegate_import.py").read_text(encoding="utf-8"),
        "class/dee.py": "def agent_loop(:\n",
    }
    workbook = json.loads((SOURCE / "01_basics.ipynb").read_text(encoding="utf-8"))
    files["repos/ada/01_basics.ipynb"] = json.dumps(workbook, indent=1)
    for cell in workbook["cells"]:
        if cell["cell_type"] == "code":
            source = "".join(cell["source"])
            cell["source"] = source.replace("return compact_json(result)", "return __import__('json').dumps(result)")
    files["repos/bob/01_basics.ipynb"] = json.dumps(workbook, indent=1)
    for name, text in files.items():
        (here / name).parent.mkdir(parents=True, exist_ok=True)
        (here / name).write_text(text, encoding="utf-8")
    (here / "home").mkdir()
    return here


def test_the_doc_has_examples_to_run() -> None:
    assert len(examples()) >= 5


@pytest.mark.parametrize(("command", "lines"), examples(), ids=[c for c, _ in examples()])
def test_each_example_prints_what_the_doc_shows(folder: Path, command: str, lines: list[str]) -> None:
    argv = command.split()
    assert argv[:3] == ["python", "-m", "agentlab"], command
    env = {**os.environ, "HOME": str(folder / "home")}
    done = subprocess.run([sys.executable, *argv[1:]], cwd=folder, env=env, capture_output=True, text=True, timeout=300)
    printed = (done.stdout + done.stderr).splitlines()
    if argv[3] == "grade":
        assert sorted(printed) == sorted(lines)
    else:
        assert printed == lines
