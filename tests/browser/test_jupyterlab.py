"""Every notebook, opened and run in JupyterLab in a real Chromium; its playground moved by hand.

nbval proves the Python side; this proves what a learner gets: the kernel
starts, Run All Cells (from the menu) executes every cell with no traceback
or stderr, the widgets render, and a playground's controls change the run.
An AgentError that a cell displays on purpose is a trace (HTML), not an
error output, and is fine; a genuine traceback fails the test.

    make test-browser          # prints the screenshots' folder at the start and the end

Each notebook gets a screenshot after Run All, and each playground move one
of the playground; a failure says which screenshot shows it.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from pathlib import Path

import nbformat
import pytest
from lab_harness import NOTEBOOKS, THEMES, Chromium, LabServer, NotebookPage, notebook_page, set_theme, wait_for
from playground_view import PlaygroundView

from agentlab.lab.scenarios import SCENARIOS


def discover_notebooks() -> list[Path]:
    """Every notebook under notebooks/ (lessons, the learners' workbooks), found when the tests are collected."""
    return sorted(
        path.relative_to(NOTEBOOKS) for path in NOTEBOOKS.rglob("*.ipynb") if ".ipynb_checkpoints" not in path.parts
    )


def shot_name(notebook: Path) -> str:
    return notebook.with_suffix("").as_posix().replace("/", "__")


# -- moving each playground by hand ----------------------------------------------------------

Shot = Callable[[str], Path]


def drive_budgets(view: PlaygroundView, shot: Shot) -> None:
    """One lookup too many trips the tool budget; one turn too few the turn budget."""
    for name, value in {"calls_per_turn": 2, "turns_before_answer": 3, "max_turns": 4, "max_calls": 6}.items():
        view.type_into_readout(name, value)
    assert view.wait_settled_as_expected().startswith("✓ answered"), shot("answers")
    view.press("max_calls", "ArrowLeft")  # 6 → 5: the third turn's two lookups would make 6
    status = view.wait_settled_as_expected({**view.settings(), "max_calls": 5})
    assert status.startswith("✗ ToolBudgetError") and view.tripped_gauges() == ["calls"], shot("tool-budget")
    view.type_into_readout("max_calls", 16)
    view.type_into_readout("max_turns", 3)  # the answer comes in turn 4
    status = view.wait_settled_as_expected({**view.settings(), "max_calls": 16, "max_turns": 3})
    assert status.startswith("✗ TurnBudgetError") and view.tripped_gauges() == ["turns"], shot("turn-budget")
    shot("turn-budget")


def drive_call_ids(view: PlaygroundView, shot: Shot) -> None:
    """One lookup a turn: three turns of calls, each result tied to its id; then too few turns."""
    view.type_into_readout("books", 3)
    view.type_into_readout("per_turn", 1)
    status = view.wait_settled_as_expected({**view.settings(), "books": 3, "per_turn": 1})
    assert status.startswith("✓ answered") and view.rows("call") == 3 == view.rows("result"), shot("one-per-turn")
    assert all(f"c{n}" in status for n in (1, 2, 3)), shot("one-per-turn")
    turns = view.value("max_turns")
    view.press("max_turns", *["ArrowLeft"] * (turns - 3))  # 3 lookups + the answer need 4 turns
    status = view.wait_settled_as_expected({**view.settings(), "max_turns": 3})
    assert status.startswith("✗ TurnBudgetError"), shot("turn-budget")
    shot("turn-budget")


def drive_tool_names(view: PlaygroundView, shot: Shot) -> None:
    """A registered name runs; an inherited one is refused with its whole batch."""
    names = view.scenario.knobs[0].choices
    view.choose("name", names.index("lookup"))
    assert view.wait_settled_as_expected().startswith("✓ answered"), shot("lookup")
    view.choose("name", names.index("__class__"))
    status = view.wait_settled_as_expected()
    assert status.startswith("✗ UnknownToolError") and "__class__" in status, shot("inherited-name")
    whole_batch = view.value("good_calls_before") + 1  # the good lookups before it are refused with it
    assert view.rows("rejected") == whole_batch and view.rows("result") == 0, shot("inherited-name")
    before = view.value("good_calls_before")
    view.press("good_calls_before", "ArrowRight")
    status = view.wait_settled_as_expected({**view.settings(), "good_calls_before": min(before + 1, 2)})
    assert status.startswith("✗ UnknownToolError") and view.rows("result") == 0, shot("good-calls-first")
    shot("good-calls-first")
    # The toggle: the same scenario through the notebook's naive loop, which looks names up on an object.
    view.choose_loop("the naive loop")
    wait_for("the naive loop's run", lambda: view.status().startswith("✗ the naive loop failed"), 30)
    assert view.view_text().count("the naive loop ·") == 1, shot("naive-loop")
    shot("naive-loop")
    view.choose_loop("agentlab's loop")
    assert view.wait_settled_as_expected().startswith("✗ UnknownToolError"), shot("back-to-agentlab")


def drive_tool_args(view: PlaygroundView, shot: Shot) -> None:
    """Valid args run; an extra key is refused before anything runs; no calls left trips the budget."""
    labels = view.scenario.knobs[0].choices
    view.choose("args", 0)
    assert view.wait_settled_as_expected().startswith("✓ answered"), shot("valid")
    view.choose("args", next(i for i, label in enumerate(labels) if "extra key" in label))
    status = view.wait_settled_as_expected()
    assert status.startswith("✗ ToolArgsError") and view.rows("result") == 0, shot("extra-key")
    view.choose("args", 0)
    view.press("max_calls", "Home")  # no tool run allowed at all
    status = view.wait_settled_as_expected({**view.settings(), "args": 0, "max_calls": 0})
    assert status.startswith("✗ ToolBudgetError"), shot("no-calls")
    shot("no-calls")


def drive_duplicate_ids(view: PlaygroundView, shot: Shot) -> None:
    """Fresh ids answer; c1 twice in one batch runs nothing; c1 again on turn 2 is refused."""
    view.type_into_readout("turns", 3)
    view.type_into_readout("reuse_id_on_turn", 0)
    assert view.wait_settled_as_expected({**view.settings(), "turns": 3, "reuse_id_on_turn": 0}).startswith(
        "✓ answered"
    ), shot("fresh-ids")
    view.press("reuse_id_on_turn", "ArrowRight")
    status = view.wait_settled_as_expected({**view.settings(), "reuse_id_on_turn": 1})
    assert status.startswith("✗ DuplicateCallIdError") and view.rows("result") == 0, shot("reuse-in-batch")
    view.press("reuse_id_on_turn", "ArrowRight")
    status = view.wait_settled_as_expected({**view.settings(), "reuse_id_on_turn": 2})
    assert status.startswith("✗ DuplicateCallIdError") and view.rows("result") == 1, shot("reuse-on-turn-2")
    shot("reuse-on-turn-2")


def drive_deadline(view: PlaygroundView, shot: Shot) -> None:
    """Time enough answers; a slow model, then a blocking one, stop at the deadline and no later."""
    view.choose("blocking", 0)
    view.type_into_readout("model_delay_ms", 250)
    view.type_into_readout("timeout_ms", 2000)
    status = view.wait_settled_as_expected({**view.settings(), "blocking": 0, "model_delay_ms": 250})
    assert status.startswith("✓ answered"), shot("in-time")
    view.type_into_readout("model_delay_ms", 1500)  # two turns of 1.5 s against 2 s
    status = view.wait_settled_as_expected({**view.settings(), "model_delay_ms": 1500})
    assert status.startswith("✗ DeadlineError") and "time" in view.tripped_gauges(), shot("slow-model")
    started = time.monotonic()
    view.choose("blocking", 1)
    view.wait_running()
    wait_for("the blocking run to end", lambda: "running" not in view.status(), 10)
    took = time.monotonic() - started
    status = view.wait_settled_as_expected({**view.settings(), "blocking": 1})
    assert status.startswith("✗ DeadlineError") and took < 2 + 3, shot("blocking-model")
    shot("blocking-model")


def drive_limits(view: PlaygroundView, shot: Shot) -> None:
    """A tool result too big trips the context budget; a long answer the output budget; Stop stops."""
    for name, value in {"model_delay_ms": 0, "answer_size": 120, "result_size": 400, "max_chars": 800}.items():
        view.type_into_readout(name, value)
    assert view.wait_settled_as_expected().startswith("✓ answered"), shot("fits")
    view.press("result_size", "End")  # 3000 characters into an 800-character history
    status = view.wait_settled_as_expected({**view.settings(), "result_size": 3000})
    assert status.startswith("✗ ContextBudgetError") and view.tripped_gauges() == ["chars"], shot("context-budget")
    view.type_into_readout("result_size", 400)
    view.type_into_readout("answer_size", 1000)
    status = view.wait_settled_as_expected({**view.settings(), "result_size": 400, "answer_size": 1000})
    assert status.startswith("✗ OutputBudgetError"), shot("output-budget")
    view.type_into_readout("answer_size", 120)
    view.type_into_readout("model_delay_ms", 5000)  # 5 s a turn: this run would take 10 s
    view.wait_running()
    assert view.stop_button.is_enabled(), shot("slow-run")
    shot("slow-run")
    clicked = time.monotonic()
    view.stop_button.click()
    wait_for("Stop to end the run", lambda: "running" not in view.status(), 10)
    took = time.monotonic() - clicked
    status = view.status()
    assert status == "✗ AbortError: aborted: the Stop button was pressed" and took < 3, shot("stopped")
    assert view.stop_button.is_disabled(), shot("stopped")
    shot("stopped")


def drive_weather(view: PlaygroundView, shot: Shot) -> None:
    """The demo model answers; each boundary case is refused with its own error; one turn is too few."""
    cases = view.scenario.knobs[0].choices
    view.choose("case", 0)
    view.type_into_readout("max_turns", 5)
    assert view.wait_settled_as_expected({**view.settings(), "case": 0, "max_turns": 5}).startswith("✓ answered"), shot(
        "demo"
    )
    expected = {"unknown-tool": "UnknownToolError", "invalid-city": "ToolArgsError", "same-call-twice": "RepeatedCall"}
    for case, error in expected.items():
        view.choose("case", cases.index(case))
        status = view.wait_settled_as_expected({**view.settings(), "case": cases.index(case)})
        assert status.startswith(f"✗ {error}"), shot(case)
    view.choose("case", 0)
    view.press("max_turns", *["ArrowLeft"] * 4)  # 5 → 1: the demo model needs two turns
    status = view.wait_settled_as_expected({**view.settings(), "case": 0, "max_turns": 1})
    assert status.startswith("✗ TurnBudgetError") and view.tripped_gauges() == ["turns"], shot("one-turn")
    shot("one-turn")


def drive_real_model(view: PlaygroundView, shot: Shot) -> None:
    """Each fault of the scripted provider meets its check, through the real SDK; the token budget holds."""
    view.choose("wire_format", 0)
    view.choose("answer", 1)
    status = view.wait_settled_as_expected({**view.settings(), "wire_format": 0, "answer": 1})
    assert status.startswith("✗ ModelOutputError") and "not JSON" in status, shot("not-json")
    view.choose("answer", 0)  # a good call: the lookup runs, then the answer
    status = view.wait_settled_as_expected({**view.settings(), "answer": 0})
    assert status.startswith("✓ answered") and view.rows("result") == 1, shot("good-call")
    view.type_into_readout("max_tokens", 430)  # the run spends 436 tokens
    status = view.wait_settled_as_expected({**view.settings(), "max_tokens": 430})
    assert status.startswith("✗ TokenBudgetError") and view.tripped_gauges() == ["tokens"], shot("tokens")
    view.type_into_readout("max_tokens", 1000)
    view.choose("wire_format", 2)  # Anthropic Messages: the same fault, the same refusal
    view.choose("answer", 3)
    status = view.wait_settled_as_expected({**view.settings(), "max_tokens": 1000, "wire_format": 2, "answer": 3})
    assert status.startswith("✗ UnknownToolError") and view.rows("result") == 0, shot("invented-name")
    view.type_into_readout("timeout_ms", 300)
    view.choose("answer", 5)  # the server stalls for a minute: the deadline ends the run
    status = view.wait_settled_as_expected({**view.settings(), "timeout_ms": 300, "answer": 5})
    assert status.startswith("✗ DeadlineError") and view.tripped_gauges() == ["time"], shot("stall")
    shot("stall")


def drive_recovery(view: PlaygroundView, shot: Shot) -> None:
    """Two slips with one refusal allowed end the run; two allowed, it recovers; 0 is the exercise's contract."""
    view.type_into_readout("max_refusals", 1)
    view.type_into_readout("slips", 2)
    view.choose("slip", 0)
    status = view.wait_settled_as_expected({**view.settings(), "max_refusals": 1, "slips": 2, "slip": 0})
    assert status.startswith("✗ UnknownToolError") and view.rows("refused") == 1, shot("budget-spent")
    view.press("max_refusals", "ArrowRight")  # 1 → 2: both slips go back to the model
    status = view.wait_settled_as_expected({**view.settings(), "max_refusals": 2})
    assert status.startswith("✓ answered") and view.rows("refused") == 2, shot("recovered")
    view.choose("slip", 2)  # a call with no id, beside a good one: both answered, the good one not run
    status = view.wait_settled_as_expected({**view.settings(), "slip": 2})
    assert status.startswith("✓ answered") and view.rows("not_run") == 2 == view.rows("refused"), shot("no-id")
    view.press("max_refusals", "ArrowLeft", "ArrowLeft")  # 2 → 0: the first slip ends the run
    status = view.wait_settled_as_expected({**view.settings(), "max_refusals": 0})
    assert status.startswith("✗ ModelOutputError") and view.rows("refused") == 0, shot("zero")
    shot("zero")


def drive_approval(view: PlaygroundView, shot: Shot) -> None:
    """The default policy denies the overreach; approving everything lets it through; no policy runs nothing."""
    view.choose("policy", 2)
    view.type_into_readout("copies", 4)
    status = view.wait_settled_as_expected({**view.settings(), "policy": 2, "copies": 4})
    assert status.startswith("✓ answered: Sorry") and view.rows("result") == 2, shot("cancel-denied")
    assert "✗ denied: nothing ran" in view.view_text(), shot("cancel-denied")
    view.choose("policy", 1)  # approve every write: Alan's reservation is cancelled for Linus
    status = view.wait_settled_as_expected({**view.settings(), "policy": 1})
    assert status.startswith("✓ answered: Done, Linus: I cancelled") and view.rows("result") == 3, shot("approve-all")
    view.choose("policy", 0)  # no policy at all: the first batch is refused whole
    status = view.wait_settled_as_expected({**view.settings(), "policy": 0})
    assert status.startswith("✗ ApprovalError") and view.rows("result") == 0, shot("no-policy")
    shot("no-policy")


def drive_write_budget(view: PlaygroundView, shot: Shot) -> None:
    """Six writes against four trips the write budget before the third batch runs; six fit exactly."""
    for name, value in {"writes_per_turn": 2, "turns": 3, "max_writes": 4}.items():
        view.type_into_readout(name, value)
    status = view.wait_settled_as_expected({**view.settings(), "writes_per_turn": 2, "turns": 3, "max_writes": 4})
    assert status.startswith("✗ WriteBudgetError") and view.tripped_gauges() == ["writes"], shot("over-budget")
    assert view.rows("result") == 4 and view.rows("rejected") == 2, shot("over-budget")
    view.press("max_writes", "ArrowRight", "ArrowRight")  # 4 → 6: exactly enough
    status = view.wait_settled_as_expected({**view.settings(), "max_writes": 6})
    assert status == "✓ answered: 6 reservations made, in 3 turns of 2", shot("fits")
    shot("fits")


def drive_at_most_once(view: PlaygroundView, shot: Shot) -> None:
    """The application's key replays the first result; the store's default key writes twice; one id twice is refused."""
    view.type_into_readout("times", 2)
    view.choose("ids", 0)
    view.choose("key", 0)
    status = view.wait_settled_as_expected({**view.settings(), "times": 2, "ids": 0, "key": 0})
    assert "w1: reservation 3" in status and "w2: reservation 3" in status, shot("replayed")
    view.choose("key", 1)
    status = view.wait_settled_as_expected({**view.settings(), "key": 1})
    assert "w1: reservation 3" in status and "w2: reservation 4" in status, shot("two-reservations")
    view.choose("ids", 1)
    status = view.wait_settled_as_expected({**view.settings(), "ids": 1})
    assert status.startswith("✗ DuplicateCallIdError") and view.rows("result") == 1, shot("same-id")
    shot("same-id")


def drive_whole_or_nothing(view: PlaygroundView, shot: Shot) -> None:
    """A deposit taken in before_commit: the deadline rolls the write back and the charge stands, found by the
    check; with time enough it commits; a decline rolls back. Through the outbox, the write commits first."""
    for name, value in {"card_ms": 1000, "timeout_ms": 500, "write_grace_ms": 1000}.items():
        view.type_into_readout(name, value)
    view.choose("deposit", 0)
    view.choose("card_service", 0)
    settings = {"card_ms": 1000, "timeout_ms": 500, "write_grace_ms": 1000, "deposit": 0, "card_service": 0}
    status = view.wait_settled_as_expected({**view.settings(), **settings})
    text = view.view_text()
    assert status.startswith("✗ DeadlineError") and "↺ rolled back" in text, shot("rolled-back")
    assert "taken outside the database" in text, shot("rolled-back")
    view.type_into_readout("timeout_ms", 2000)
    status = view.wait_settled_as_expected({**view.settings(), "timeout_ms": 2000})
    assert status == "✓ answered: Eve: reservation 3 (2 left on hand); deposit taken inside the transaction", shot(
        "committed"
    )
    view.choose("card_service", 1)
    status = view.wait_settled_as_expected({**view.settings(), "card_service": 1})
    assert status.startswith("✗ ToolError") and "nothing of it was applied" in status, shot("declined")
    view.choose("card_service", 0)
    view.type_into_readout("timeout_ms", 500)
    view.choose("deposit", 2)  # the outbox: the write commits at once, the deposit goes after the commit
    status = view.wait_settled_as_expected({**view.settings(), "card_service": 0, "timeout_ms": 500, "deposit": 2})
    assert status.startswith("✗ DeadlineError") and "taken after the commit" in view.view_text(), shot("outbox")
    shot("outbox")


DRIVERS: dict[str, Callable[[PlaygroundView, Shot], None]] = {
    "budgets": drive_budgets,
    "call_ids": drive_call_ids,
    "tool_names": drive_tool_names,
    "tool_args": drive_tool_args,
    "duplicate_ids": drive_duplicate_ids,
    "deadline": drive_deadline,
    "limits": drive_limits,
    "weather": drive_weather,
    "real_model": drive_real_model,
    "approval": drive_approval,
    "write_budget": drive_write_budget,
    "at_most_once": drive_at_most_once,
    "whole_or_nothing": drive_whole_or_nothing,
    "recovery": drive_recovery,
}
DRIVEN: set[str] = set()  # the playgrounds (and "desk") driven in this session
RAN: set[Path] = set()  # the notebooks that ran clean in this session
RIGHT_ALIGNED: dict[str, list[str]] = {}  # agentlab tables JupyterLab aligns right, by notebook


def drive_desk(page: NotebookPage) -> None:
    """A live approval desk (09a_approval's, 09c_at_most_once's): Deny with a reason, run the cell again,
    Approve, run it once more.

    The denial's reason must reach the model (its answer quotes it) and
    nothing is reserved; the approval writes the reservation. The third card
    says the write is a replay exactly where the tools make the key from Linus's order, the same in every
    run (09c); with the store's default key (09a) each run is a new write.
    """
    waiting = page.page.evaluate(
        """() => Array.from(document.querySelectorAll('.jp-NotebookPanel .jp-Notebook .jp-Cell')).flatMap(
             (cell, index) => Array.from(cell.querySelectorAll('button.widget-button'))
               .some(button => !button.disabled && button.textContent.includes('Approve')) ? [index] : [])"""
    )
    assert len(waiting) == 1, f"expected one cell with a desk waiting for Approve or Deny, found cells {waiting}"
    index = waiting[0]
    cell = page.page.locator(".jp-NotebookPanel .jp-Notebook .jp-Cell").nth(index)
    live = cell.locator(".jp-OutputArea-output")

    def shot(label: str) -> Path:
        path = page.shots / f"{page.name}-desk-{label}.png"
        cell.scroll_into_view_if_needed()
        cell.screenshot(path=str(path))
        return path

    reason = "not today: checking the Deny button"
    live.locator(".widget-text input").fill(reason)
    shot("waiting")
    live.locator("button.widget-button", has_text="Deny").click()
    verdict = cell.locator(".widget-html-content > .agentlab-verdict").first  # the card's, not the run's status
    wait_for("the card to say denied", lambda: verdict.inner_text().strip() == f"✗ denied: {reason}", 20)
    trace = cell.locator(".agentlab-trace")
    wait_for("the run's trace under the card", lambda: trace.count() == 1, 20)
    answer = trace.inner_text()
    assert "✓ answered" in answer and f'"reason":"{reason}"' in answer and "nothing ran" in answer, shot("denied")
    assert cell.locator("button.widget-button:not([disabled])").count() == 0, shot("denied")
    shot("denied")

    page.select_cell(index)  # then Run > Run Selected Cell
    page.menu("Run", "runmenu:run")
    approve = cell.locator("button.widget-button:not([disabled])", has_text="Approve")
    wait_for("a new card waiting for an answer", lambda: approve.count() == 1, 30)
    approve.click()
    wait_for("the card to say approved", lambda: verdict.inner_text().strip().startswith("✓ approved"), 20)
    wait_for("the run's trace under the card", lambda: trace.count() == 1, 20)
    answer = trace.inner_text()
    assert "✓ answered" in answer and '"reservation":' in answer and "writes: 1 / " in answer, shot("approved")
    shot("approved")

    page.select_cell(index)  # once more: the same key is a replay now, as the notebook says
    page.menu("Run", "runmenu:run")
    wait_for("a third card waiting for an answer", lambda: approve.count() == 1, 30)
    card = cell.locator(".agentlab-change").first
    keyed = "key=order_12" in cell.locator(".jp-InputArea").inner_text()
    assert ("has run before" in card.inner_text()) == keyed, shot("replay" if keyed else "new-write")
    shot("replay" if keyed else "new-write")


def test_every_scenario_has_a_driver() -> None:
    assert set(DRIVERS) == set(SCENARIOS), "add a drive_<key> function for each new scenario"


# -- every notebook --------------------------------------------------------------------------


@pytest.mark.browser
@pytest.mark.parametrize("notebook", discover_notebooks(), ids=lambda path: path.as_posix())
def test_notebook_runs_clean_in_jupyterlab(notebook: Path, lab: LabServer, chromium: Chromium, shots_dir: Path) -> None:
    name = shot_name(notebook)
    try:
        with notebook_page(chromium.browser, name, lab.root / notebook, shots_dir) as page:
            try:
                run_and_check(page, lab.url(notebook))
                if is_polish(notebook):  # the English twin's run drives the same playgrounds: here, the words
                    check_polish(page)
                else:
                    for key, driver in DRIVERS.items():
                        view = PlaygroundView(page.page, key)
                        if view.present():
                            drive(view, driver, page)
                            DRIVEN.add(key)
                    if page.page.locator(".agentlab-desk").count():
                        drive_desk(page)
                        DRIVEN.add("desk")
                if "exercises" not in notebook.parts:
                    look_in_the_dark(page, notebook)
                RAN.add(notebook)
            except Exception as error:
                failure = page.screenshot("FAILED")
                raise AssertionError(
                    f"{notebook}: {error}\nscreenshot: {failure}\nserver log:\n{lab.log_tail(15)}"
                ) from error
    finally:
        set_theme(lab, THEMES["light"])
        lab.shut_down_kernels()  # after the page is closed, so that it does not start a new one


# The playground's two groups of controls (the loop's limits, the scenario) on one row.
SIDE_BY_SIDE_JS = r"""
() => Array.from(document.querySelectorAll('.jp-Notebook .widget-hbox')).filter(
  row => row.querySelectorAll(':scope > .widget-vbox').length === 2).map(row => {
    const [a, b] = row.querySelectorAll(':scope > .widget-vbox');
    return Math.abs(a.getBoundingClientRect().top - b.getBoundingClientRect().top) < 2;
  })
"""


def is_polish(notebook: Path) -> bool:
    return notebook.parts[0] == "pl"


# What the English UI says where the Polish must say it in Polish: a playground's or trace's words, the desk's.
ENGLISH_UI = re.compile(r"✓ answered|✗ stopped in turn|playground · |\bturns: \d|Run the cell \(Shift\+Enter\)")


def check_polish(page: NotebookPage) -> None:
    """A Polish notebook after Run All: its agentlab views (playgrounds, traces, the desk) speak Polish."""
    views = page.page.locator(".jp-Notebook .agentlab-playground, .jp-Notebook .agentlab-trace, .agentlab-desk")
    texts = [text for text in views.all_inner_texts() if text.strip()]
    english = [match.group(0) for text in texts for match in [ENGLISH_UI.search(text)] if match]
    assert not english, f"English left in the Polish notebook's views: {english}"


def look_in_the_dark(page: NotebookPage, notebook: Path) -> None:
    """After the run, Settings > Theme > dark in the same page: the outputs read there too, controls side by side."""
    page.switch_theme(THEMES["dark"])
    found = page.look()
    rows = page.page.evaluate(SIDE_BY_SIDE_JS)
    playground = page.page.locator(".jp-Notebook .agentlab-playground, .jp-Notebook .agentlab-desk").first
    if playground.count():
        playground.scroll_into_view_if_needed()
    shot = page.screenshot("ran-dark")
    assert not found, f"{notebook} after running (dark, {shot}):\n" + "\n".join(found)
    assert all(rows), f"{notebook}: a playground's two control groups do not sit side by side at 1280 px"


def run_and_check(page: NotebookPage, url: str) -> None:
    """Open, Run All from the menu, wait for every cell, and fail on any error output; screenshot it."""
    page.open(url)
    page.wait_widgets_rendered()
    saved = page.problems(page.cells(), saved=True)
    assert not saved, "as opened, before running:\n" + "\n".join(saved)
    page.run_all()
    cells = page.wait_all_executed()
    page.wait_widgets_rendered()
    cells = page.cells()
    problems = page.problems(cells)
    first_widget = page.page.locator(".jp-OutputArea-output .jupyter-widgets").first
    if first_widget.count():
        first_widget.scroll_into_view_if_needed()
    page.screenshot()
    looks = page.look()
    assert not looks, "after running:\n" + "\n".join(looks)
    misaligned = page.right_aligned_tables()
    if misaligned:
        RIGHT_ALIGNED[page.name] = misaligned
    assert not problems, "\n".join(problems)
    assert not page.console_errors, f"uncaught errors in the page: {page.console_errors}"


def drive(view: PlaygroundView, driver: Callable[[PlaygroundView, Shot], None], page: NotebookPage) -> None:
    """Move one playground by hand; each `shot(label)` saves a picture of it and returns its path."""
    assert view.output.locator(".widget-slider, .widget-dropdown").count() > 0, (
        f"playground {view.key} shows no live controls (the widget did not render, only its static snapshot)"
    )
    view.output.scroll_into_view_if_needed()
    view.wait_settled_as_expected()

    def shot(label: str) -> Path:
        path = page.shots / f"{page.name}-{view.key}-{re.sub(r'[^a-z0-9-]+', '-', label.lower())}.png"
        view.output.scroll_into_view_if_needed()
        view.output.screenshot(path=str(path))
        return path

    driver(view, shot)


@pytest.mark.browser
def test_a_traceback_fails_but_a_displayed_agent_error_does_not(
    lab: LabServer, chromium: Chromium, shots_dir: Path
) -> None:
    """The harness itself: a raised error and the cells JupyterLab then skips are problems; a shown trace is not."""
    notebook = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_code_cell("from agentlab import AgentError\n\ndisplay(AgentError('shown on purpose'))"),
            nbformat.v4.new_code_cell("raise ValueError('a genuine traceback')"),
            nbformat.v4.new_code_cell("print('never runs')"),
        ],
        metadata={"kernelspec": {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}},
    )
    path = Path("harness_self_check.ipynb")
    nbformat.write(notebook, lab.root / path)  # into the server's throwaway copy only
    try:
        with notebook_page(chromium.browser, "harness_self_check", lab.root / path, shots_dir) as page:
            page.open(lab.url(path))
            page.run_all()
            problems = page.problems(page.wait_all_executed())
            page.screenshot()
    finally:
        lab.shut_down_kernels()
    assert [problem.split("\n")[0] for problem in problems] == [
        "cell 2 did not execute (prompt [ ]:)",
        "cell 1 shows an error or stderr output:",
    ]
    assert "ValueError: a genuine traceback" in problems[1]


# -- after every notebook --------------------------------------------------------------------------


def _after_every_notebook() -> None:
    missing = set(discover_notebooks()) - RAN
    if missing:
        pytest.skip(f"needs every notebook to have run clean in this session; not: {sorted(map(str, missing))}")


@pytest.mark.browser
def test_every_playground_and_the_approval_desk_were_driven() -> None:
    _after_every_notebook()
    wanted = set(DRIVERS) | {"desk"}
    assert wanted == DRIVEN, f"no notebook shows a live {sorted(wanted - DRIVEN)}: which notebook lost it?"


@pytest.mark.browser
def test_agentlab_tables_read_left_aligned_in_jupyterlab() -> None:
    """JupyterLab right-aligns output table cells with a rule more specific than a plain class selector."""
    _after_every_notebook()
    assert not RIGHT_ALIGNED, "\n".join(f"{name}: {', '.join(found)}" for name, found in RIGHT_ALIGNED.items())
