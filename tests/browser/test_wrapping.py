"""A trace's long lines wrap between words, at a laptop's 1280 x 800 with the file browser open.

JupyterLab breaks printed text (`.jp-OutputArea-output pre`: `word-break: break-all`) anywhere, mid-word; the
trace and the playground's status line are HTML, with `white-space: pre-wrap` and `overflow-wrap: break-word`
(agentlab/lab/_look.py), so they break at spaces and split a word only if it is longer than the whole line. This
saves a notebook whose outputs are a refused run's trace, with long lines, and a playground's view, opens it as a
learner does, and finds, letter by letter, every place a line wraps: each must be at a space.

    make test-browser      # the screenshot: <folder>/wrapping-long-lines.png
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from lab_harness import Chromium, LabServer, notebook_page, wait_for

NOTEBOOK = Path("wrapping_long_lines.ipynb")

# Writes the notebook: a trace whose last line (the error) is far longer than a line, then a playground's view.
MAKE_NOTEBOOK = r"""
import asyncio, sys
import nbformat
from agentlab.lab.scenarios import run_scenario
from agentlab.lab.trace import render_html
from agentlab.lab.widgets import playground, render_view

async def outputs():
    error = await run_scenario("budgets", max_calls=5)
    pg = playground("budgets", max_calls=5)
    await pg.settled()
    return render_html(error), render_view(pg.scenario, pg.settings(), pg.outcome)

trace, view = asyncio.run(outputs())
cell = nbformat.v4.new_code_cell("# a refused run and a playground, as saved", execution_count=1)
cell.outputs = [nbformat.v4.new_output("display_data", {"text/html": h, "text/plain": "."}) for h in (trace, view)]
nbformat.write(nbformat.v4.new_notebook(cells=[cell]), sys.argv[1])
"""

# Every wrap inside an agentlab output: the characters either side of each place where the next letter starts on
# a lower line than the one before it. A wrap between words has a space (or a dash) on one side.
_WRAPS_JS = r"""
() => {
  const wraps = [];
  for (const root of document.querySelectorAll('.jp-Notebook .agentlab-trace, .jp-Notebook .agentlab-playground')) {
    const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      const text = node.textContent;
      let top = null;
      for (let i = 0; i < text.length; i++) {
        const range = document.createRange();
        range.setStart(node, i);
        range.setEnd(node, i + 1);
        const rects = range.getClientRects();
        if (!rects.length) continue;
        const here = rects[rects.length - 1].top;
        if (top !== null && here > top + 2 && text[i - 1] !== '\n') {
          wraps.push({before: text.slice(Math.max(0, i - 12), i), after: text.slice(i, i + 12)});
        }
        top = here;
      }
    }
  }
  return wraps;
}
"""


@pytest.mark.browser
def test_a_traces_long_lines_wrap_between_words(lab: LabServer, chromium: Chromium, shots_dir: Path) -> None:
    subprocess.run([sys.executable, "-c", MAKE_NOTEBOOK, str(lab.root / NOTEBOOK)], check=True, timeout=120)
    with notebook_page(chromium.browser, "wrapping-long-lines", lab.root / NOTEBOOK, shots_dir) as page:
        page.open(lab.url(NOTEBOOK))
        wait_for("the file browser", lambda: page.page.locator(".jp-FileBrowser").first.is_visible(), 30)
        wait_for("the trace", lambda: page.page.locator(".jp-Notebook .agentlab-trace").count() == 2, 30)
        shot = page.screenshot()
        wraps = page.page.evaluate(_WRAPS_JS)
    assert wraps, f"no line wrapped at all (see {shot}): the test's long lines are not long enough to prove anything"
    mid_word = [w for w in wraps if not (w["before"][-1:] in " -—/" or w["after"][:1] in " -—")]
    found = "; ".join(f"{w['before']}|{w['after']}" for w in mid_word)
    assert not mid_word, f"lines broken mid-word (see {shot}): {found}"
