"""The workbooks' model answer, read from the solved workbook itself: the whole loop a learner writes, in one place.

    from agentlab.lab.whole_loop import model_answer
    answer = model_answer()          # shows the code of the solved workbook's loop cells
    their_loop = answer.load()       # runs that code; its agent_loop, to check like any other

One source of truth: the code is not copied here. It is read, when shown, from
the cells tagged `agent-loop` of the last workbook before the writes, in the
teachers' solved sources (teachers/source/workbooks), with nbgrader's solution
markers taken out. So it needs the repository, not only the installed package.
"""

from __future__ import annotations

import html
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import agentlab
from agentlab.errors import ConfigError
from agentlab.lab import _look as look

WORKBOOKS = Path(agentlab.__file__).resolve().parent.parent / "teachers" / "source" / "workbooks"
LAST_BEFORE_WRITES = "limits"  # the workbook whose loop has every rule of the seven tests
_MARKERS = ("### BEGIN SOLUTION", "### END SOLUTION")


@dataclass(frozen=True)
class ModelAnswer:
    """The solved workbook's loop: its file, and its code without the solution markers."""

    source: Path
    code: str

    def load(self) -> Any:
        """Run the code in a fresh namespace and return its `agent_loop`."""
        namespace: dict[str, Any] = {"__name__": "model_answer"}
        exec(compile(self.code, str(self.source), "exec"), namespace)  # the teachers' own file, shown above
        return namespace["agent_loop"]

    def lines(self) -> int:
        return len(self.code.splitlines())

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, str]:
        where = f"teachers/source/workbooks/{self.source.name}"
        head = f"The workbooks' model answer: {self.lines()} lines, from {where}"
        pre = f"{look.MONO};font-size:12px;white-space:pre;overflow-x:auto;padding:6px 8px;margin:4px 0"
        pre += f";border:1px solid {look.LINE};border-radius:4px;background:transparent"
        return {
            "text/plain": f"{head}\n\n{self.code}",
            "text/html": f"<div{look.attr(f'{look.SANS};font-weight:bold')}>{html.escape(head)}</div>"
            f"<pre{look.attr(pre)}>{html.escape(self.code)}</pre>",
        }


# The browser edition's wheel carries the solved workbook here (lite/build.py), as there is no repository beside it.
BUNDLED = Path(__file__).resolve().parent / "model_answer"


def _solved(step: str) -> Path:
    if not WORKBOOKS.is_dir() and any(BUNDLED.glob(f"*_{step}.ipynb")):
        return sorted(BUNDLED.glob(f"*_{step}.ipynb"))[0]
    if not WORKBOOKS.is_dir():
        raise ConfigError(
            f"the model answer is read from the repository's teachers/source/workbooks, and {WORKBOOKS} is not "
            "there: open this notebook from a clone of the repository"
        )
    found = sorted(path for path in WORKBOOKS.glob(f"*_{step}.ipynb"))
    if not found:
        raise ConfigError(f"no solved workbook *_{step}.ipynb in {WORKBOOKS}")
    return found[0]


def model_answer(step: str = LAST_BEFORE_WRITES) -> ModelAnswer:
    """The loop of the solved workbook of `step`: its cells tagged `agent-loop`, solution markers removed."""
    path = _solved(step)
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    parts = []
    for cell in cells:
        if cell["cell_type"] == "code" and "agent-loop" in cell.get("metadata", {}).get("tags", []):
            source = "".join(cell["source"])
            kept = [line for line in source.splitlines() if line.strip() not in _MARKERS]
            parts.append("\n".join(kept).strip("\n"))
    if not parts:
        raise ConfigError(f"{path.name} has no cell tagged agent-loop")
    return ModelAnswer(path, "\n\n\n".join(parts) + "\n")


__all__ = ["ModelAnswer", "model_answer"]
