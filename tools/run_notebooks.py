"""Execute the notebooks in place, from a fresh kernel each, the way they are committed.

    .venv/bin/python tools/run_notebooks.py                       # every notebook nbval tests
    .venv/bin/python tools/run_notebooks.py notebooks/04_budgets.ipynb

nbval (`make test`) re-runs every notebook and compares each cell's outputs
with the ones saved in the file, so the saved outputs must come from a clean
run of the current code. This script makes that run: a new kernel on this
environment's Python per notebook, cells top to bottom, working directory
the notebook's folder. It fails on the first cell that raises, unless the cell
is tagged `raises-exception`. It then removes what must not be committed: the
saved widget state (the live widgets re-create themselves when the cell runs)
with the outputs' references to it, and per-cell timing.

Why drop the references (`application/vnd.jupyter.widget-view+json`) too:
without the state they can only fail. JupyterLab would show "Error displaying
widget: model not found" where the playground's static HTML snapshot of its
last run belongs; without them, JupyterLab, GitHub and nbviewer all show the
snapshot until the cell is run again. nbval never compares them (their model
ids are random), so the check loses nothing.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

import nbformat
from jupyter_client.manager import AsyncKernelManager
from nbclient import NotebookClient
from nbval.kernel import CURRENT_ENV_KERNEL_NAME, NbvalKernelspecManager
from traitlets import default

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
# Students' working copies: theirs to run, never executed or tested here.
STUDENT_WORK = (NOTEBOOKS / "exercises", NOTEBOOKS / "pl" / "exercises")  # the learners' copies: no outputs to save
WORKBOOKS = ROOT / "teachers" / "source"  # the solved workbooks: nbval runs them
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
KERNELSPEC = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}
CELL_TIMEOUT_S = 60


class ThisPythonKernel(AsyncKernelManager):
    """A kernel on this very Python (the .venv), whatever kernelspecs the machine has, as nbval runs them."""

    @default("kernel_spec_manager")
    def _this_python_only(self) -> NbvalKernelspecManager:
        return NbvalKernelspecManager()


def tested_notebooks() -> list[Path]:
    """Every notebook that nbval re-executes: all of notebooks/, except students' copies and checkpoints."""
    return sorted(
        path
        for path in [*NOTEBOOKS.rglob("*.ipynb"), *WORKBOOKS.rglob("*.ipynb")]
        if not set(STUDENT_WORK) & set(path.parents) and ".ipynb_checkpoints" not in path.parts
    )


def strip_volatile(notebook: nbformat.NotebookNode) -> None:
    """Remove widget state and the outputs' references to it, and timing; pin the kernelspec to plain python3."""
    notebook.metadata.pop("widgets", None)
    notebook.metadata["kernelspec"] = dict(KERNELSPEC)
    for cell in notebook.cells:
        cell.metadata.pop("execution", None)
        cell.metadata.pop("widgets", None)
        for output in cell.get("outputs", []):
            output.get("data", {}).pop(WIDGET_VIEW, None)


def execute(path: Path) -> float:
    """Run one notebook in place from a fresh kernel; return the seconds it took."""
    notebook = nbformat.read(path, as_version=4)
    client = NotebookClient(
        notebook,
        kernel_name=CURRENT_ENV_KERNEL_NAME,
        kernel_manager_class=ThisPythonKernel,
        timeout=CELL_TIMEOUT_S,
        store_widget_state=False,
        record_timing=False,
        resources={"metadata": {"path": str(path.parent)}},
    )
    started = time.perf_counter()
    client.execute(stderr=subprocess.DEVNULL)  # the kernel's own log lines are noise here, as under nbval
    elapsed = time.perf_counter() - started
    strip_volatile(notebook)
    nbformat.validate(notebook)
    nbformat.write(notebook, path)
    return elapsed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Execute notebooks in place from a fresh kernel, for nbval.")
    parser.add_argument("notebooks", nargs="*", type=Path, help="default: every notebook nbval tests")
    options = parser.parse_args(argv)
    paths = [path.resolve() for path in options.notebooks] or tested_notebooks()
    for path in paths:
        print(f"{path.relative_to(ROOT)}: {execute(path):.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
