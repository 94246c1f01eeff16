"""Student versions of the workbooks: each solution cut out and replaced by a stub, as nbgrader does it.

    python -m agentlab student            # notebooks/exercises/*.ipynb -> notebooks/exercises/student/
    python -m agentlab student --check    # exit 1 if a committed student version is stale; write nothing

The source workbooks hold their solutions between nbgrader's markers,

    ### BEGIN SOLUTION
    ...
    ### END SOLUTION

so a teacher who uses nbgrader can take them as they are. Without nbgrader, this
module makes the same student versions: each marked region becomes
`# YOUR CODE HERE` / `raise NotImplementedError()` at the region's indentation
(`YOUR ANSWER HERE` in a markdown cell), and every output and execution count
is cleared. Only the standard library is used; the output is byte-stable (the
JSON layout Jupyter itself writes), so a test can tell a stale copy.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from agentlab.errors import AgentError

CODE_STUB = ("# YOUR CODE HERE", "raise NotImplementedError()")
TEXT_STUB = ("YOUR ANSWER HERE",)
_BEGIN = re.compile(r"^(\s*)(#+|//+)?\s*BEGIN SOLUTION\s*$")
_END = re.compile(r"^\s*(#+|//+)?\s*END SOLUTION\s*$")

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "notebooks" / "exercises"
STUDENT = SOURCE / "student"


class WorkbookError(AgentError):
    """A source workbook cannot be turned into a student version (unbalanced markers, a region in a given cell)."""


def strip_solutions(source: str, stub: tuple[str, ...] = CODE_STUB, where: str = "a cell") -> str:
    """`source` with each BEGIN/END SOLUTION region replaced by `stub`, indented like the BEGIN line."""
    out: list[str] = []
    indent: str | None = None
    for number, line in enumerate(source.splitlines(), 1):
        begin, end = _BEGIN.match(line), _END.match(line)
        if begin:
            if indent is not None:
                raise WorkbookError(f"{where}, line {number}: BEGIN SOLUTION inside another solution region")
            indent = begin.group(1)
            out.extend(indent + text for text in stub)
        elif end:
            if indent is None:
                raise WorkbookError(f"{where}, line {number}: END SOLUTION without a BEGIN SOLUTION before it")
            indent = None
        elif indent is None:
            out.append(line)
    if indent is not None:
        raise WorkbookError(f"{where}: BEGIN SOLUTION without an END SOLUTION after it")
    return "\n".join(out)


def has_solution(source: str) -> bool:
    """True if `source` has a solution marker left in it."""
    return any(_BEGIN.match(line) or _END.match(line) for line in source.splitlines())


def _text(source: str | list[str]) -> str:
    return "".join(source) if isinstance(source, list) else source


def student_notebook(notebook: dict[str, Any], name: str = "the notebook") -> dict[str, Any]:
    """The student version of a source workbook (a notebook as parsed JSON); the source is not changed."""
    cells = []
    for number, cell in enumerate(notebook.get("cells", [])):
        cell = dict(cell)
        source = _text(cell.get("source", ""))
        where = f"{name}, cell {number}"
        if has_solution(source):
            if not cell.get("metadata", {}).get("nbgrader", {}).get("solution", False):
                raise WorkbookError(
                    f"{where} has a solution region but is not an nbgrader solution cell: set its metadata "
                    '"nbgrader": {"solution": true, ...}, or nbgrader will refuse it'
                )
            stub = CODE_STUB if cell.get("cell_type") == "code" else TEXT_STUB
            source = strip_solutions(source, stub, where)
        cell["source"] = source.splitlines(keepends=True)  # the list of lines Jupyter writes
        if cell.get("cell_type") == "code":
            cell["outputs"], cell["execution_count"] = [], None
        cells.append(cell)
    metadata = dict(notebook.get("metadata", {}))
    language = metadata.pop("language_info", {})  # what the last run saw (a Python version): not the students' concern
    metadata["language_info"] = {"name": language.get("name", "python")}
    return {**notebook, "metadata": metadata, "cells": cells}


def render(notebook: dict[str, Any]) -> str:
    """A notebook as the JSON text Jupyter writes: one-space indent, sorted keys, a final newline."""
    return json.dumps(notebook, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def expected_versions(source_dir: Path = SOURCE) -> dict[str, str]:
    """File name -> text of the student version of every workbook in `source_dir`."""
    versions = {}
    for path in sorted(source_dir.glob("*.ipynb")):
        try:
            notebook = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as error:
            raise WorkbookError(f"cannot read the workbook {path}: {error}") from error
        versions[path.name] = render(student_notebook(notebook, path.name))
    if not versions:
        raise WorkbookError(f"no workbooks (*.ipynb) in {source_dir}")
    return versions


def stale(source_dir: Path = SOURCE, student_dir: Path = STUDENT) -> list[str]:
    """What is out of date in `student_dir`: missing, changed or extra student versions (empty if none)."""
    expected = expected_versions(source_dir)
    problems = []
    for name, text in expected.items():
        path = student_dir / name
        if not path.exists():
            problems.append(f"{name}: missing")
        elif path.read_text(encoding="utf-8") != text:
            problems.append(f"{name}: out of date")
    extra = sorted(path.name for path in student_dir.glob("*.ipynb") if path.name not in expected)
    return problems + [f"{name}: has no source workbook" for name in extra]


def write(source_dir: Path = SOURCE, student_dir: Path = STUDENT) -> list[Path]:
    """Write the student version of every workbook; return the paths written (unchanged files are left alone)."""
    student_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in expected_versions(source_dir).items():
        path = student_dir / name
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
            written.append(path)
    return written


__all__ = [
    "CODE_STUB",
    "WorkbookError",
    "expected_versions",
    "has_solution",
    "render",
    "stale",
    "strip_solutions",
    "student_notebook",
    "write",
]
