"""The playground: a scenario with a control per limit, re-run live, its trace shown below.

    from agentlab.lab.widgets import playground
    playground("budgets")                     # a notebook cell: controls, Stop, status and trace
    pg = playground("budgets", max_calls=5)   # start from other settings
    pg.controls["max_turns"].value = 3        # what a learner's slider does
    await pg.settled(); pg.status             # '✗ TurnBudgetError: turn budget exhausted: ...'

How it stays responsive. Every run happens on a worker thread with an event
loop of its own, never on the kernel's. A control's callback only aborts the
run in flight (through the AbortController whose signal that run was given)
and starts the next one, so it returns at once: a slow or blocking model never
freezes the notebook, dragging a slider never piles runs up, and it works the
same whether or not the host pumps the kernel's event loop between cells. A run
writes its outcome into the HTML widget `view` when it ends, unless a newer run
has replaced it. (ipywidgets allows setting a widget's value from a thread.)
In a browser (Pyodide, no threads) each run is a task on the kernel's own
event loop instead: Stop and the sliders work the same, but a plain callee
that blocks holds the page until it returns.

The view is written by `render_view`, a pure function of the outcome, so what
a learner sees, the tests assert and nbval compares is the same text; nothing
is printed into Output widgets.

Every label, status line and title goes through `agentlab.i18n` when it is made (Polish when the language is pl);
the settings keys (`max_turns=6`), a scenario's key and the loop's error messages stay as they are, and an error's
status line gets one sentence in the learner's language after the message (`trace.explanation`).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import html
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import ipywidgets as widgets

from agentlab import callees
from agentlab.abort import AbortController
from agentlab.errors import AbortError, ConfigError
from agentlab.i18n import _
from agentlab.lab import _look as look
from agentlab.lab.naive import NaiveCrash, NaiveLoop, NaiveRun
from agentlab.lab.scenarios import LIMIT_NAMES, Scenario, get_scenario, run_scenario
from agentlab.lab.trace import clip, explanation, render_html, render_text
from agentlab.loop import AgentResult
from agentlab.sync import run_detached

Outcome = AgentResult | BaseException

# The smallest maximum and the step of each limit's slider; a start value
# beyond the maximum widens the slider to twice that value.
_LIMIT_RANGES: dict[str, tuple[int, int]] = {
    "max_turns": (12, 1),
    "max_calls": (16, 1),
    "timeout_ms": (2000, 10),
    "max_chars": (2000, 1),
}
# A run still going after this long shows "running" (and enables Stop); quicker runs just
# swap their result in, so dragging a slider over a fast scenario does not flicker.
RUNNING_AFTER_S = 0.15
# The reasons a playground aborts a run with: error messages, so they stay English (status_line explains them).
STOPPED = "aborted: the Stop button was pressed"
REPLACED = "aborted: a newer run replaced this one"
# Shown to a learner: in English here, translated by `_` where shown.
AGENTLAB, NAIVE = "agentlab's loop", "the naive loop"
SNAPSHOT = "A snapshot of the last run, saved with the notebook: run the cell (Shift+Enter) to get the controls."


def playground(scenario: Scenario | str, naive: NaiveLoop | None = None, **settings: Any) -> Playground:
    """A live playground for `scenario` (a Scenario or a key of `SCENARIOS`), starting from `settings`.

    `settings` may set any limit (max_turns, max_calls, timeout_ms, max_chars)
    and any of the scenario's knobs. With `naive` (the notebook's loop without
    the rule), a toggle runs the same scenario through it instead of agent_loop.
    The scenario runs once before this returns, so the cell's output shows a
    finished run.
    """
    return Playground(scenario, naive=naive, **settings)


@dataclass
class _Flight:
    """One run in flight: its settings, the controller that stops it, and its outcome when it ends."""

    settings: dict[str, int]
    naive: bool = False  # run through the notebook's naive loop, not agent_loop
    controller: AbortController = field(default_factory=AbortController)
    done: concurrent.futures.Future[Outcome] = field(default_factory=concurrent.futures.Future)


class Playground:
    """Controls for a scenario's limits and knobs, a Stop button, and a view of the last run.

    `controls` maps each setting's name to its widget, `stop` aborts the run in
    flight, `view` shows the status line above the trace. `status` and
    `outcome` describe the last finished run; `await settled()` waits for the
    run in flight. `box` is the whole widget.
    """

    def __init__(self, scenario: Scenario | str, naive: NaiveLoop | None = None, **settings: Any) -> None:
        self.scenario = scenario if isinstance(scenario, Scenario) else get_scenario(scenario)
        if naive is not None and not callable(naive):
            raise ConfigError(f"naive must be a loop function naive(question, model, tools), got {naive!r}")
        self.naive = naive
        start = self.scenario.defaults()
        unknown = sorted(set(settings) - set(start))
        if unknown:
            raise ConfigError(
                f"the playground {self.scenario.key!r} has no setting {', '.join(map(repr, unknown))}; "
                f"its settings are: {', '.join(start)}"
            )
        start.update({name: self._checked(name, value) for name, value in settings.items()})
        self.controls: dict[str, widgets.ValueWidget] = {name: self._control(name, start[name]) for name in start}
        self.stop = widgets.Button(
            description=_("Stop"),
            icon="stop",
            tooltip=_("abort the run in flight through its abort signal"),
            disabled=True,
            layout=widgets.Layout(width="8em"),
        )
        self.view = widgets.HTML()
        # Which loop runs the scenario: only a playground given the notebook's naive loop has the toggle.
        self.loop = widgets.ToggleButtons(
            options=[(_(AGENTLAB), False), (_(NAIVE), True)],
            value=False,
            tooltips=[
                _("agent_loop, with every rule"),
                _("the notebook's loop without the rule, on the same scenario"),
            ],
            style={"button_width": "12em"},
        )
        self.box = widgets.VBox(
            [
                *([self.loop] if naive is not None else []),
                widgets.HBox(
                    [
                        self._column(_("the loop's limits"), [*LIMIT_NAMES, *self.scenario.loop_knobs]),
                        self._column(
                            _("the scenario"),
                            [knob.name for knob in self.scenario.knobs if knob.name not in self.scenario.loop_knobs],
                            self.stop,
                        ),
                    ],
                    layout=widgets.Layout(flex_flow="row wrap", align_items="flex-start"),
                ),
                self.view,
            ]
        )
        self.status = ""
        self.outcome: Outcome | None = None
        self._shown: dict[str, int] = {}  # the settings of the run `outcome` came from
        self._shown_naive = False  # and whether the naive loop ran it
        self._lock = threading.Lock()
        self._flight: _Flight | None = None
        first = self._start()
        if callees.THREADS:  # the first run ends before anything is displayed (in a browser it shows as it ends)
            first.done.result()
        for control in (*self.controls.values(), self.loop):
            control.observe(self._on_change, names="value")
        self.stop.on_click(self._on_stop)

    # -- what a notebook and a test use -----------------------------------------

    def settings(self) -> dict[str, int]:
        """The controls' current values, by setting name."""
        return {name: control.value for name, control in self.controls.items()}

    async def settled(self) -> None:
        """Wait until no run is in flight, so `status`, `outcome` and `view` show the latest settings."""
        while (flight := self._in_flight()) is not None:
            await asyncio.wrap_future(flight.done)

    def close(self) -> None:
        """Abort the run in flight and close every widget of the playground."""
        flight = self._in_flight()
        if flight is not None:
            flight.controller.abort(AbortError("aborted: the playground was closed"))
        for widget in (*self.controls.values(), self.loop, self.stop, self.view, self.box):
            widget.close()

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        """The live widget, plus a static snapshot of the last run for GitHub, nbviewer and nbval."""
        live = self.box._repr_mimebundle_  # None once the widget is closed: then only the snapshot
        bundle = dict(live(**kwargs) or {}) if callable(live) else {}
        with self._lock:
            outcome, shown, naive = self.outcome, dict(self._shown), self._shown_naive
        loop = self._loop_label(naive)
        bundle["text/html"] = render_view(self.scenario, shown, outcome, loop=loop, snapshot=True)
        bundle["text/plain"] = f"{_(SNAPSHOT)}\n{render_plain(self.scenario, shown, outcome, loop=loop)}"
        return bundle

    # -- running -------------------------------------------------------------------

    def _start(self) -> _Flight:
        """Start a run with the current settings; abort the one in flight, whose outcome is dropped."""
        flight = _Flight(self.settings(), naive=self.naive is not None and self.loop.value)
        flight.done.set_running_or_notify_cancel()  # nobody may cancel it: the worker always settles it
        with self._lock:
            previous, self._flight = self._flight, flight
        if previous is not None:
            previous.controller.abort(AbortError(REPLACED))
        name = f"agentlab playground {self.scenario.key}"
        run_detached(lambda: self._fly(flight), lambda outcome: self._land(flight, outcome), name)
        return flight

    async def _fly(self, flight: _Flight) -> Outcome:
        """One run of the scenario with the flight's settings (on a loop of its own, or the kernel's)."""
        running = asyncio.get_running_loop().call_later(RUNNING_AFTER_S, self._show_running, flight)
        naive = self.naive if flight.naive else None
        try:
            return await run_scenario(self.scenario, naive, signal=flight.controller.signal, **flight.settings)
        finally:
            running.cancel()

    def _land(self, flight: _Flight, outcome: Outcome) -> None:
        """Show the run's outcome, unless a newer run has replaced it; `done` is always settled."""
        with self._lock:
            if self._flight is flight:
                self._flight = None
                self.outcome, self.status, self._shown = outcome, status_line(outcome), flight.settings
                self._shown_naive = flight.naive
                self._write_view(running=False)
        flight.done.set_result(outcome)

    def _show_running(self, flight: _Flight) -> None:
        with self._lock:
            if self._flight is flight:
                self._write_view(running=True)

    def _write_view(self, *, running: bool) -> None:
        """Render the view and the Stop button's state (called with the lock held)."""
        loop = self._loop_label(self._shown_naive)
        self.view.value = render_view(self.scenario, self._shown, self.outcome, running=running, loop=loop)
        self.stop.disabled = not running
        self.stop.button_style = "danger" if running else ""  # red while it can stop something, grey when not

    def _loop_label(self, naive: bool) -> str:
        """Which loop ran the shown run, for a playground that has the toggle ("" for one that has not)."""
        if self.naive is None:
            return ""
        return _(NAIVE) if naive else _(AGENTLAB)

    def _in_flight(self) -> _Flight | None:
        with self._lock:
            return self._flight

    def _on_change(self, change: Mapping[str, Any]) -> None:
        self._start()

    def _on_stop(self, button: widgets.Button) -> None:
        flight = self._in_flight()
        if flight is not None:
            flight.controller.abort(AbortError(STOPPED))

    # -- building the controls -------------------------------------------------------

    def _checked(self, name: str, value: Any) -> int:
        """A start value for a control: a knob within its range, a limit a whole number >= 0."""
        for knob in self.scenario.knobs:
            if knob.name == name:
                return knob.check(value)
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ConfigError(f"{name} must be a whole number >= 0 for the playground's slider, got {value!r}")
        return value

    def _control(self, name: str, value: int) -> widgets.ValueWidget:
        # The two columns (60em in all) sit side by side in a notebook on a 1280 px laptop screen. The loop's
        # limits have short labels (9em holds "write_grace_ms"); the scenario's need 16em ("reuse id c1 on turn
        # (0: never)"), and its wider column leaves a dropdown room for its longest choice.
        if name in LIMIT_NAMES or name in self.scenario.loop_knobs:
            style, layout = {"description_width": "9em"}, widgets.Layout(width="23em")
        else:
            style, layout = {"description_width": "16em"}, widgets.Layout(width="37em")
        knob = next((knob for knob in self.scenario.knobs if knob.name == name), None)
        if knob is None:
            least, step = _LIMIT_RANGES[name]
            return widgets.IntSlider(
                value=value,
                min=0,
                max=max(least, 2 * value),
                step=step,
                description=name,
                style=style,
                layout=layout,
            )
        if knob.choices:
            options = [(knob.describe(index), index) for index in range(len(knob.choices))]
            return widgets.Dropdown(
                options=options, value=value, description=knob.shown_label(), style=style, layout=layout
            )
        return widgets.IntSlider(
            value=value,
            min=knob.minimum,
            max=knob.maximum,
            step=knob.step,
            description=knob.shown_label(),
            style=style,
            layout=layout,
        )

    def _column(self, caption: str, names: Any, *extra: widgets.Widget) -> widgets.VBox:
        header = widgets.HTML(f"<b>{html.escape(caption)}</b>")
        return widgets.VBox([header, *(self.controls[name] for name in names), *extra])


# -- rendering: pure functions of an outcome --------------------------------------------


def status_line(outcome: Outcome | None) -> str:
    """One line for a finished run: the answer, or the error's type and message.

    In a language other than English an error's line is followed by a second, its `explanation` (the message
    itself stays English: its contract phrase is what the exercise's tests match).
    """
    if outcome is None:
        return _("not run yet")
    if isinstance(outcome, NaiveRun):  # no ✓: a naive loop's answer is only what it happened to say
        return _("the naive loop answered: {text}").format(text=clip(outcome.text, 200))
    if isinstance(outcome, NaiveCrash):
        return _("✗ the naive loop failed: {error}").format(error=outcome)
    if isinstance(outcome, AgentResult):
        return _("✓ answered: {text}").format(text=clip(outcome.text, 200))
    explained = explanation(outcome)  # "" in English: the line is the error's own, as it was
    return f"✗ {type(outcome).__name__}: {outcome}" + (f"\n{explained}" if explained else "")


def describe_settings(scenario: Scenario, settings: Mapping[str, int], loop: str = "") -> str:
    """The settings of a run as `name=value` pairs; a knob with choices shows its choice; `loop` leads if given."""
    knobs = {knob.name: knob for knob in scenario.knobs}
    parts = [loop] if loop else []
    for name, value in settings.items():
        knob = knobs.get(name)
        parts.append(f"{name}={knob.describe(value) if knob is not None else value}")
    return " · ".join(parts)


# Inline styles (agentlab/lab/_look.py says why). The HTML widget's own line height doubles the spacing of plain
# divs; each line sets its own.
_LINE = "margin:2px 0;line-height:1.35"
_STATUS = {"ok": look.GREEN, "bad": look.RED, "running": look.AMBER}


def render_view(
    scenario: Scenario,
    settings: Mapping[str, int],
    outcome: Outcome | None,
    running: bool = False,
    *,
    loop: str = "",
    snapshot: bool = False,
) -> str:
    """The playground's view: a title, the status line, the settings, and the trace of the last run.

    While a run is in flight the status says so and the last trace stays, faded. `loop` names the loop that ran
    it (a playground with the naive toggle); a `snapshot` (what a saved notebook shows) says how to get the
    controls.
    """
    e = html.escape
    if running:
        status, kind = _("… running (Stop aborts it)"), "running"
    elif isinstance(outcome, NaiveRun):
        status, kind = status_line(outcome), "running"  # amber: an answer nothing checked
    else:
        status, kind = status_line(outcome), "ok" if isinstance(outcome, AgentResult) else "bad"
    described = describe_settings(scenario, settings, loop)
    note = f"<div class='snapshot'{look.attr(f'{look.MUTED};{_LINE};font-style:italic')}>{e(_(SNAPSHOT))}</div>"
    trace = render_html(outcome, headline=False) if outcome is not None else ""
    status_css = f"font-weight:bold;{_LINE};white-space:pre-wrap;overflow-wrap:break-word;color:{_STATUS[kind]}"
    return (
        f"<div class='agentlab-playground'{look.attr(f'{look.SANS};max-width:62em;line-height:1.35')}>"
        f"{note if snapshot else ''}"
        f"<div class='title'{look.attr(f'{look.MUTED};{_LINE}')}>{e(_('playground'))} · {e(scenario.key)} · "
        f"{e(_(scenario.title))}</div>"
        f"<div class='status {kind}'{look.attr(status_css)}>{e(status)}</div>"
        f"<div class='{'stale' if running else 'last'}'{look.attr('opacity:.45' if running else 'opacity:1')}>"
        f"<div class='settings'{look.attr(f'{look.MUTED};{_LINE}')}>{e(described)}</div>"
        f"{trace}</div></div>"
    )


def render_plain(scenario: Scenario, settings: Mapping[str, int], outcome: Outcome | None, loop: str = "") -> str:
    """The last run as plain text: the settings, then its trace."""
    trace = render_text(outcome) if outcome is not None else status_line(None)
    if isinstance(outcome, NaiveRun | NaiveCrash):  # a naive run's headline says which loop ran it
        trace = "\n".join([status_line(outcome), *trace.splitlines()[1:]])
    return f"{_('playground')} {scenario.key}: {describe_settings(scenario, settings, loop)}\n{trace}"


__all__ = ["Playground", "describe_settings", "playground", "render_plain", "render_view", "status_line"]
