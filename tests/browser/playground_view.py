"""One live playground in the browser, moved the way a learner moves it, and what its view should then show.

A move is done with the real controls: a slider's handle by keyboard, a
number typed into a slider's readout, an option picked from a drop-down, the
Stop button clicked. What the view must show afterwards is not written down
here: the same scenario is run in this process with the same settings, and
`agentlab.lab.widgets.render_view` gives the expected status line and trace (the
scenarios are deterministic). The tests add what each limit should produce
(which error, which gauge tripped) on top, so a view that merely agrees with
a broken renderer still fails.
"""

from __future__ import annotations

import asyncio
import re
import threading
import time
from dataclasses import dataclass
from typing import Any

from lab_harness import HarnessError, wait_for

from agentlab.lab.scenarios import Scenario, get_scenario, run_scenario
from agentlab.lab.widgets import render_view

SETTLE_S = 30

# The visible text of an element, without its <style> blocks; the same for an HTML string.
_TEXT_JS = """
element => {
  const copy = element.cloneNode(true);
  copy.querySelectorAll('style').forEach(style => style.remove());
  return copy.textContent.replace(/\\s+/g, ' ').trim();
}
"""
_HTML_TEXT_JS = """
html => {
  const holder = document.createElement('div');
  holder.innerHTML = html;
  const view = holder.querySelector('.agentlab-playground') || holder;
  view.querySelectorAll('style').forEach(style => style.remove());
  return view.textContent.replace(/\\s+/g, ' ').trim();
}
"""


def _steady(text: str) -> str:
    """A view's text without the time its run measured ("time: 5 ms of 2000 ms"), which no two runs share."""
    return re.sub(r"time: \d+ ms of ", "time: … ms of ", text)


def expected_outcome(scenario: Scenario, settings: dict[str, int]) -> Any:
    """The outcome of one run of `scenario` with `settings`, on a thread with its own event loop."""
    box: dict[str, Any] = {}

    def run() -> None:
        box["outcome"] = asyncio.run(run_scenario(scenario, **settings))

    worker = threading.Thread(target=run, name="browser-test expected run")
    worker.start()
    worker.join()
    return box["outcome"]


@dataclass
class PlaygroundView:
    """The output of the cell that shows `playground(key)`, in an open notebook page."""

    page: Any
    key: str

    @property
    def scenario(self) -> Scenario:
        return get_scenario(self.key)

    @property
    def output(self) -> Any:
        title = self.page.locator(".agentlab-playground .title", has_text=f"playground · {self.key} ·")
        return self.page.locator(".jp-OutputArea-output").filter(has=title).first

    def present(self) -> bool:
        return self.output.count() > 0

    # -- the controls -------------------------------------------------------------------------

    def _label(self, name: str) -> str:
        """The text a learner reads next to a setting: a limit's name, or a knob's label."""
        knob = next((knob for knob in self.scenario.knobs if knob.name == name), None)
        return knob.label if knob else name

    def control(self, name: str) -> Any:
        label = self.page.locator("label.widget-label", has_text=re.compile(f"^{re.escape(self._label(name))}$"))
        control = self.output.locator(".widget-inline-hbox").filter(has=label)
        if control.count() != 1:
            raise HarnessError(f"playground {self.key}: expected one control labelled {self._label(name)!r}")
        return control

    @property
    def toggle(self) -> Any:
        """The "agentlab's loop / the naive loop" toggle (none unless the notebook gave a naive loop)."""
        return self.output.locator(".widget-toggle-buttons")

    def loop_shown(self) -> str:
        """Which loop the toggle has chosen, as the view names it ("" for a playground with no toggle)."""
        if not self.toggle.count():
            return ""
        return self.toggle.locator("button.mod-active").inner_text().strip()

    def choose_loop(self, label: str) -> None:
        self.toggle.locator("button", has_text=label).click()

    def value(self, name: str) -> int:
        """What the control shows now: a slider's readout, or the index of the drop-down's choice."""
        control = self.control(name)
        select = control.locator("select")
        if select.count():
            return int(select.evaluate("select => select.selectedIndex"))
        # A slider's readout is briefly empty while the widget re-renders (seen once under load): wait for its number.
        readout = control.locator(".widget-readout")
        wait_for(f"{name}'s readout", lambda: readout.inner_text().strip().lstrip("-").isdigit(), SETTLE_S)
        return int(readout.inner_text().strip())

    def settings(self) -> dict[str, int]:
        return {name: self.value(name) for name in self.scenario.defaults()}

    def press(self, name: str, *keys: str) -> None:
        """Focus a slider's handle and press keys on it, as a keyboard user moves a slider."""
        handle = self.control(name).locator(".noUi-handle")
        handle.focus()
        for key in keys:
            handle.press(key)

    def type_into_readout(self, name: str, value: int) -> None:
        """Click a slider's readout, replace the number with `value`, press Enter."""
        readout = self.control(name).locator(".widget-readout")
        readout.click()
        self.page.keyboard.press("ControlOrMeta+a")
        self.page.keyboard.type(str(value))
        self.page.keyboard.press("Enter")

    def choose(self, name: str, index: int) -> None:
        """Pick the drop-down's option number `index` (the knob's choice of that index)."""
        self.control(name).locator("select").select_option(index=index)

    @property
    def stop_button(self) -> Any:
        return self.output.locator("button.widget-button", has_text="Stop")

    # -- the view ---------------------------------------------------------------------------

    @property
    def view(self) -> Any:
        return self.output.locator(".agentlab-playground")

    def status(self) -> str:
        return self.view.locator(".status").inner_text().strip()

    def view_text(self) -> str:
        return self.view.evaluate(_TEXT_JS)

    def tripped_gauges(self) -> list[str]:
        return [text.split(":")[0].strip() for text in self.view.locator(".gauge.tripped").all_inner_texts()]

    def rows(self, kind: str) -> int:
        """How many trace rows of a kind (user, call, result, final, rejected, error) the view shows."""
        return self.view.locator(f".agentlab-trace tr.{kind}").count()

    def wait_running(self) -> None:
        wait_for(f"playground {self.key} to show a run in flight", lambda: "running" in self.status(), SETTLE_S)

    def wait_settled_as_expected(self, settings: dict[str, int] | None = None) -> str:
        """Wait until the controls show `settings` (if given) and the view shows exactly what that run gives.

        Returns the status line. The expected view comes from running the
        scenario here with the settings the controls show.
        """
        if settings is not None:
            wait_for(
                f"playground {self.key}'s controls to show {settings}",
                lambda: self.settings() == settings,
                SETTLE_S,
            )
        shown = self.settings()
        outcome = expected_outcome(self.scenario, shown)
        view = render_view(self.scenario, shown, outcome, loop=self.loop_shown())
        expected = _steady(self.page.evaluate(_HTML_TEXT_JS, view))
        started = time.monotonic()
        try:
            wait_for(
                f"playground {self.key}'s view to match a run with {shown}",
                lambda: _steady(self.view_text()) == expected,
                SETTLE_S,
                0.2,
            )
        except HarnessError:
            raise HarnessError(
                f"playground {self.key} after {time.monotonic() - started:.1f} s shows:\n  {self.view_text()}\n"
                f"but a run with {shown} gives:\n  {expected}"
            ) from None
        return self.status()
