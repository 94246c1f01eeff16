"""The trace view: every turn, call and result, where a run stopped, gauges, and output nbval can compare."""

from __future__ import annotations

import asyncio
import html
import re

import pytest

from agentlab import AbortController, AgentError, AgentResult, Tool, agent_loop
from agentlab.lab.examples import lookup_tools
from agentlab.lab.fakes import KeepsCalling, NeverAnswers, Scripted, call, calls, final
from agentlab.lab.scenarios import get_scenario, run_scenario
from agentlab.lab.trace import Step, gauges, render_html, render_text, steps
from agentlab.lab.widgets import playground, render_view
from agentlab.loop import context_size


async def outcome_of(run) -> AgentResult | BaseException:
    try:
        return await run
    except BaseException as error:
        return error


async def test_each_call_and_each_result_tied_to_its_call_id() -> None:
    model = Scripted(calls(call("lookup", {"id": "A"}, "c1"), call("lookup", {"id": "Z"}, "c2")), final("done"))
    result = await agent_loop("question", model, lookup_tools())
    assert steps(result) == [
        Step("user", 0, "question"),
        Step("call", 1, '{"id":"A"}', "c1", "lookup"),
        Step("call", 1, '{"id":"Z"}', "c2", "lookup"),
        Step("result", 1, result.history[2]["content"], "c1", "lookup"),
        Step("result", 1, '{"id":"Z","found":false}', "c2", "lookup"),
        Step("final", 2, "done"),
    ]
    text = render_text(result)
    assert text.splitlines()[0] == "✓ answered: done"
    assert '  turn 1   call c2: lookup({"id":"Z"})' in text
    assert '             → c2: {"id":"Z","found":false}' in text
    chars = sum(context_size(message) for message in result.history)
    assert text.splitlines()[-1] == f"  used: turns 2 / 6 · calls 2 / 8 · chars {chars} / 50000 · time within 5000 ms"


@pytest.mark.parametrize(
    ("key", "settings", "where"),
    [
        ("budgets", {"max_turns": 3}, "before turn 4"),
        ("limits", {"result_size": 900}, "before turn 2"),
        ("budgets", {"max_calls": 5}, "in turn 3, refusing the model's proposal"),
        ("limits", {"answer_size": 900}, "in turn 2, refusing the model's proposal"),
        ("deadline", {"timeout_ms": 100}, "in turn 1, while the model was deciding"),
    ],
)
async def test_the_step_where_a_limit_tripped_is_marked(key: str, settings: dict, where: str) -> None:
    error = await run_scenario(key, **settings)
    last = steps(error)[-1]
    assert last.kind == "error" and last.where == where
    assert f"✗ stopped {where} — {type(error).__name__}: {error}" in render_text(error)
    assert html.escape(f"✗ stopped {where}") in render_html(error)
    assert [g.name for g in gauges(error) if g.tripped] == [
        error.limit.removeprefix("max_").replace("timeout_ms", "time")
    ]


async def test_a_tool_that_hangs_is_where_the_deadline_struck() -> None:
    async def hang(value):
        await asyncio.Event().wait()

    tools = {"hang": Tool(validate=lambda args: None, run=hang)}
    error = await outcome_of(agent_loop("q", Scripted(calls(call("hang", {}, "c1"))), tools, timeout_ms=300))
    assert steps(error)[-1].where == "in turn 1, during call c1"
    assert "time limit of 300 ms reached ✗" in render_text(error)


async def test_a_model_that_raises_is_shown_with_its_error() -> None:
    async def broken(messages, signal):
        raise RuntimeError("the model fell over")

    error = await outcome_of(agent_loop("q", broken, {}))
    text = render_text(error)
    assert text.splitlines()[0] == "✗ stopped: ModelError"
    assert "✗ stopped in turn 1, while the model was deciding — ModelError: the model raised RuntimeError" in text


async def test_refused_calls_are_marked_as_never_run() -> None:
    error = await run_scenario("tool_names")
    refused = [s for s in steps(error) if s.kind == "rejected"]
    knob = next(knob for knob in get_scenario("tool_names").knobs if knob.name == "name")
    name = knob.choices[knob.default]  # the name the scenario proposes by default (toString, __class__, ...)
    assert [(s.call_id, s.name) for s in refused] == [("c1", "lookup"), ("c2", name)]
    assert f"refused call c2: {name}" in render_text(error) and "(nothing of it ran)" in render_text(error)
    assert "calls 0 / 8" in render_text(error)


@pytest.mark.parametrize(
    ("sent", "shown"),
    [({}, "(no id)"), ({"id": None}, "(no id)"), ({"id": ""}, "(empty id)"), ({"id": 7}, "(id 7, not a string)")],
)
async def test_a_refused_call_without_a_usable_id_says_so(sent, shown) -> None:
    bad = {"name": "lookup", "args": {"id": "A"}} | sent
    error = await outcome_of(agent_loop("q", Scripted({"kind": "tools", "calls": [bad]}), lookup_tools()))
    assert f"refused call {shown}: lookup" in render_text(error) and "call None" not in render_text(error)
    assert f"{html.escape(shown)}</span>" in render_html(error)
    returned = await agent_loop(
        "q", Scripted({"kind": "tools", "calls": [bad]}, final("ok")), lookup_tools(), max_refusals=1
    )
    assert "call refused-1-1: lookup" in render_text(returned)  # returned to the model: the id the loop used


async def test_a_refused_final_answer_and_the_output_gauge() -> None:
    error = await run_scenario("limits", answer_size=900)
    assert "refused final answer (900 chars)" in render_text(error)
    assert "chars 512 / 800 (final text 900) ✗" in render_text(error)


async def test_the_tool_budget_gauge_counts_the_refused_batch() -> None:
    error = await outcome_of(agent_loop("q", KeepsCalling(batch=3), lookup_tools(), max_calls=4))
    assert "calls 3 / 4 (+3 refused) ✗" in render_text(error)


async def test_writes_get_a_gauge_when_a_run_writes() -> None:
    tools = {"save": Tool(validate=lambda args: None, run=lambda value: {"saved": True}, writes=True)}
    model = Scripted(calls(call("save", {}, "w1")), final("saved"))
    result = await agent_loop("q", model, tools, approve=lambda call: True)
    assert "writes 1 / 4" in render_text(result)
    assert "writes" not in render_text(await agent_loop("q", Scripted(final("hi")), {}))


async def test_an_abort_with_any_reason_renders() -> None:
    controller = AbortController()
    controller.abort(RuntimeError("stop"))
    error = await outcome_of(agent_loop("q", NeverAnswers(), {}, signal=controller.signal))
    assert render_text(error) == "✗ stopped: RuntimeError\n  ✗ RuntimeError: stop"
    assert "RuntimeError: stop" in render_html(error)


async def test_html_is_escaped_deterministic_once_masked_and_styled_inline(masked) -> None:
    model = Scripted(calls(call("<b>bold</b>", {"x": "<script>"}, "<i>1</i>")))
    error = await outcome_of(agent_loop("<q>", model, lookup_tools()))
    first = masked(render_html(error))
    assert first == masked(render_html(await outcome_of(agent_loop("<q>", Scripted(*model.script), lookup_tools()))))
    assert "<script>" not in first and "&lt;script&gt;" in first and "<b>bold" not in first
    assert not re.search(r"0x[0-9a-f]{6,}|elapsed_ms|\d+\.\d+ ?ms", first)  # no addresses, no raw measured times
    # JupyterLab strips <style> from a notebook it does not trust, and var(...) and inherit from style attributes
    assert "<style" not in first and "var(" not in first and "inherit" not in first
    assert "style='" in first and "text-align:left" in first


async def test_the_time_gauge_shows_how_close_a_run_came(masked) -> None:
    result = await agent_loop("q", Scripted(final("hi")), {}, timeout_ms=2000)
    page = render_html(result)
    assert re.search(r"time: \d+ ms of 2000 ms", page) and "time: <elapsed> ms of 2000 ms" in masked(page)
    slow = await outcome_of(agent_loop("q", NeverAnswers(), {}, timeout_ms=50))
    assert re.search(r"class='fill' data-elapsed style='width:100%[^']*#e5534b", render_html(slow))


async def test_results_and_errors_show_themselves_in_jupyter() -> None:
    result = await agent_loop("q", Scripted(final("hi")), {})
    assert result._repr_html_() == render_html(result)
    error = await outcome_of(agent_loop("q", KeepsCalling(), lookup_tools(), max_turns=1))
    assert isinstance(error, AgentError) and error._repr_html_() == render_html(error)
    assert "class='gauge tripped'" in render_html(error)
    assert "<div class='head" not in render_html(error, headline=False)


# What JupyterLab's CSS filter keeps of a style attribute (its sanitizer's lists): `overflow-wrap: anywhere` and
# `word-break: break-word` would be dropped; `word-break: break-all` breaks any word at the line's end.
_BREAKS_WORDS = re.compile(r"word-break:\s*break-all|overflow-wrap:\s*anywhere|word-break:\s*break-word")


async def test_a_long_line_wraps_at_spaces_in_the_trace_and_the_status_line() -> None:
    error = await run_scenario("budgets", max_calls=5)
    message = f"{type(error).__name__}: {error}"
    assert len(message) > 140 and "nothing of this batch ran" in message  # longer than a line at 1280 px
    page = render_html(error)
    pg = playground("budgets", max_calls=5)
    await pg.settled()
    view = render_view(pg.scenario, pg.settings(), pg.outcome)
    for shown, where in ((page, "the trace"), (view, "the playground")):
        styles = re.findall(r"style='([^']*)'", shown)
        assert not [s for s in styles if _BREAKS_WORDS.search(s)], f"{where} breaks words mid-way"
    # the cell the error's long line is in: wraps (pre-wrap) at spaces, a word split only if longer than a line
    cell = re.search(r"<td style='([^']*)'><span class='mark'[^>]*>✗ stopped", page)
    assert cell and "white-space:pre-wrap" in cell.group(1) and "overflow-wrap:break-word" in cell.group(1)
    assert "nowrap" not in cell.group(1)
    status = re.search(r"<div class='status bad' style='([^']*)'>", view)
    assert status and "white-space:pre-wrap" in status.group(1) and "overflow-wrap:break-word" in status.group(1)
