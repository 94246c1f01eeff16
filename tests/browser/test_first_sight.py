"""What a learner sees first: every notebook as opened (untrusted), and after running, in the light and dark theme.

JupyterLab does not trust a notebook it opens from disk: it strips `<style>` from the saved outputs and keeps only
the inline styles its CSS filter allows. So here each agentlab output (trace, playground, approval desk, checker
report) must show its styles as opened: a bordered box, left-aligned unstriped table cells, gauges drawn as bars,
and text that reads on its background (contrast at least 3:1) in both themes, at a laptop's 1280 x 800. After a
run, the same, and a playground's two control groups sit side by side.

    make test-browser      # screenshots: <folder>/first-sight-<notebook>-<theme>-opened.png, <notebook>-ran-dark.png
"""

from __future__ import annotations

from pathlib import Path

import pytest
from lab_harness import THEMES, Chromium, LabServer, notebook_page, set_theme
from test_jupyterlab import discover_notebooks, shot_name

# What a shot scrolls to first: the playground or the approval desk, the outputs with the most to show.
FIRST_LOOK = ".jp-Notebook .agentlab-playground, .jp-Notebook .agentlab-desk"


def notebooks_with_outputs() -> list[Path]:
    return [path for path in discover_notebooks() if "exercises" not in path.parts]  # learners' copies: no outputs


@pytest.mark.browser
@pytest.mark.parametrize("notebook", notebooks_with_outputs(), ids=lambda path: path.as_posix())
def test_saved_outputs_look_right_as_opened(
    notebook: Path, lab: LabServer, chromium: Chromium, shots_dir: Path
) -> None:
    """As opened, untrusted, in the light theme, then switched to the dark one in the same page (as a learner does)."""
    set_theme(lab, THEMES["light"])
    name = f"first-sight-{shot_name(notebook)}"
    try:
        with notebook_page(chromium.browser, name, lab.root / notebook, shots_dir) as page:
            page.open(lab.url(notebook))
            page.wait_widgets_rendered()
            for theme in THEMES:
                if theme != "light":
                    page.switch_theme(THEMES[theme])
                assert page.page.evaluate("() => document.body.dataset.jpThemeName") == THEMES[theme]
                found = page.look()
                shot = page.screenshot(f"{theme}-opened")
                first = page.page.locator(FIRST_LOOK).first
                if not first.count():
                    first = page.page.locator(".jp-Notebook .agentlab-trace, .jp-Notebook .agentlab-check").first
                if first.count():
                    first.scroll_into_view_if_needed()
                    page.screenshot(f"{theme}-opened-first-output")
                    page.page.locator(".jp-NotebookPanel .jp-Cell").first.scroll_into_view_if_needed()
                assert not found, f"{notebook} as opened ({theme}, {shot}):\n" + "\n".join(found)
    finally:
        set_theme(lab, THEMES["light"])
        lab.shut_down_kernels()


# After running, in the dark theme: the main suite's run of each notebook switches to it at the end
# (test_jupyterlab.look_in_the_dark), so that a notebook runs once for both themes.
