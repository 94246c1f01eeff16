"""A trace of a finished run: what the model proposed, what ran, what came back, and where it stopped.

`render_text(run)` is for terminals (the CLI demo); `render_html(run)` is what
`AgentResult` and `AgentError` show in Jupyter. Both take an `AgentResult` or
an exception (usually an `AgentError`) and read the same `steps` and
`gauges`, so they always agree.

Output is deterministic, because nbval compares it: no ids but the model's
own call ids, no memory addresses, and time shown only against its limit
("within 5000 ms"), never as a measured number.

Every word a learner reads goes through `agentlab.i18n` when it is shown (Polish when the language is pl); the
loop's error messages stay as they are, and `explanation(error)` adds one sentence in the learner's language
after them (none in English).
"""

from __future__ import annotations

import html
import json
from dataclasses import dataclass
from typing import Any

from agentlab.errors import BudgetError, DeadlineError, OutputBudgetError, ToolBudgetError
from agentlab.i18n import _, language, ngettext
from agentlab.lab import _look as look

CLIP = 160


@dataclass(frozen=True)
class Step:
    """One line of a trace. `kind` is user, call, result, refused, not_run, final, rejected or error.

    `refused` and `not_run` are the loop's answers to a batch it refused and returned to the model
    (`max_refusals`): the refused call's, with the refusal as `text`, and its batch-mates'.
    A call, a result (of any of these three kinds) and a rejected call carry the `call_id` and the tool `name`;
    the error says `where` the run stopped ("before turn 5", "in turn 2, during call c3").
    """

    kind: str
    turn: int
    text: str
    call_id: str = ""
    name: str = ""
    where: str = ""
    tokens: str = ""  # a real model's tokens for the turn, on its first step ("120 in, 15 out tokens")


@dataclass(frozen=True)
class Gauge:
    """One budget: how much was used of how much was allowed, and whether it tripped."""

    name: str
    used: float | None
    limit: float | None
    tripped: bool
    label: str


def clip(text: str, limit: int = CLIP) -> str:
    """Shorten long text for display, saying how much was cut."""
    if len(text) <= limit:
        return text
    cut = len(text) - limit
    return text[:limit] + ngettext("… (+{n} chars)", "… (+{n} chars)", cut).format(n=cut)


def _json(value: Any) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    except (TypeError, ValueError):
        return repr(value)


def steps(run: Any) -> list[Step]:
    """The steps of a run (an AgentResult or an exception), in order; an error's last step says where it stopped."""
    out: list[Step] = []
    turn = 0
    names: dict[str, str] = {}  # call id -> tool name, to label each result with its call
    pending: list[str] = []  # calls of the last batch with no result yet
    for message in getattr(run, "history", None) or []:
        if message.get("role") == "user":
            out.append(Step("user", turn, str(message.get("content", ""))))
        elif "calls" in message:
            turn += 1
            pending = []
            tokens = _tokens(message)
            for call in message["calls"]:
                call_id, name = str(call.get("id")), str(call.get("name"))
                names[call_id] = name
                pending.append(call_id)
                out.append(Step("call", turn, _json(call.get("args")), call_id, name, tokens=tokens))
                tokens = ""
        elif message.get("role") == "tool":
            call_id = _proposed_id(message.get("call_id"))  # a naive loop's result may have none
            if call_id in pending and not _stopped_mid_write(str(message.get("content", ""))):
                pending.remove(call_id)
            kind, text = _returned(str(message.get("content", "")))
            out.append(Step(kind, turn, text, call_id, names.get(call_id, "")))
        elif message.get("role") == "assistant":
            turn += 1
            out.append(Step("final", turn, str(message.get("content", "")), tokens=_tokens(message)))
    if isinstance(run, BaseException):
        out.extend(_stop_steps(run, turn, pending))
    return out


def _proposed_id(call_id: Any) -> str:
    """The id a refused proposal sent, as shown. The loop recorded none (the run stopped), so no stand-in: a
    missing, empty or non-string id says so, rather than "None" or nothing at all."""
    if isinstance(call_id, str) and call_id:
        return call_id
    if call_id is None:
        return _("(no id)")
    if call_id == "":
        return _("(empty id)")
    return _("(id {id}, not a string)").format(id=_json(call_id))


def _tokens(message: dict[str, Any]) -> str:
    usage = message.get("usage")
    if not isinstance(usage, dict):
        return ""
    return _("{input} in, {output} out tokens").format(
        input=usage.get("input_tokens"), output=usage.get("output_tokens")
    )


def _stop_steps(error: BaseException, turns_in_history: int, pending: list[str]) -> list[Step]:
    """The refused proposal (if any) and the error, with where the run stopped."""
    usage = getattr(error, "usage", None)
    turns = getattr(usage, "turns", None)
    rejected = getattr(error, "rejected", None)
    out: list[Step] = []
    turn = max(turns_in_history, turns or 0)
    if isinstance(rejected, dict) and isinstance(rejected.get("calls"), list):
        for call in rejected["calls"]:
            if isinstance(call, dict):
                shown = _proposed_id(call.get("id"))
                out.append(Step("rejected", turn, _json(call.get("args")), shown, str(call.get("name"))))
            else:
                out.append(Step("rejected", turn, _json(call)))
    elif isinstance(rejected, dict) and rejected.get("kind") == "final" and isinstance(rejected.get("text"), str):
        out.append(Step("rejected", turn, rejected["text"], name="final"))
    elif rejected is not None:
        out.append(Step("rejected", turn, _json(rejected)))
    if isinstance(getattr(error, "where", None), str):  # an error that knows where it stopped (a naive loop's)
        where = error.where
    elif turns is None:
        where = ""
    elif rejected is not None:
        where = _("in turn {turn}, refusing the model's proposal").format(turn=turn)
    elif pending:
        where = _("in turn {turn}, during call {call_id}").format(turn=turn, call_id=pending[0])
    elif turns > turns_in_history:
        where = _("in turn {turn}, while the model was deciding").format(turn=turn)
    else:
        where = _("before turn {turn}").format(turn=turn + 1)
    out.append(Step("error", turn, f"{type(error).__name__}: {error}", where=where))
    return out


def gauges(run: Any) -> list[Gauge]:
    """Used against allowed for turns, calls, characters and time, the tripped one marked.

    Time's label stays coarse ("within 2000 ms"): a text trace is the same on every run. The HTML gauge shows the
    time measured, which a notebook's saved copy masks (tests/nbval_sanitize.cfg).
    """
    usage, limits = getattr(run, "usage", None), getattr(run, "limits", None)
    if usage is None or limits is None:
        return []
    tripped = run.limit if isinstance(run, BudgetError) else ""
    calls = f"{usage.calls} / {limits.max_calls}"
    rejected = getattr(run, "rejected", None)
    if isinstance(run, ToolBudgetError) and isinstance(rejected, dict) and isinstance(rejected.get("calls"), list):
        refused = len(rejected["calls"])
        calls += _(" (+{n} refused)").format(n=refused)
    chars = f"{usage.chars} / {limits.max_chars}"
    if isinstance(run, OutputBudgetError) and isinstance(rejected, dict) and isinstance(rejected.get("text"), str):
        chars += _(" (final text {n})").format(n=len(rejected["text"]))
    over_time = isinstance(run, DeadlineError) or usage.elapsed_ms > limits.timeout_ms  # (a naive loop's overrun)
    timeout = f"{limits.timeout_ms:g} ms"
    out = [
        Gauge("turns", usage.turns, limits.max_turns, tripped == "max_turns", f"{usage.turns} / {limits.max_turns}"),
        Gauge("calls", usage.calls, limits.max_calls, tripped == "max_calls", calls),
        Gauge("chars", usage.chars, limits.max_chars, tripped == "max_chars", chars),
        Gauge(
            "time",
            usage.elapsed_ms,
            limits.timeout_ms,
            over_time,
            _("limit of {timeout} reached").format(timeout=timeout)
            if over_time
            else _("within {timeout}").format(timeout=timeout),
        ),
    ]
    tokens, max_tokens = getattr(usage, "tokens", 0), getattr(limits, "max_tokens", None)
    if tokens or max_tokens is not None:
        label = f"{tokens} / {max_tokens}" if max_tokens is not None else _("{tokens} (no limit)").format(tokens=tokens)
        out.append(Gauge("tokens", tokens, max_tokens, tripped == "max_tokens", label))
    refusals, max_refusals = getattr(usage, "refusals", 0), getattr(limits, "max_refusals", 0)
    if refusals or max_refusals:
        out.append(Gauge("refusals", refusals, max_refusals, False, f"{refusals} / {max_refusals}"))
    writes, max_writes = getattr(usage, "writes", 0), getattr(limits, "max_writes", 0)
    if writes or tripped == "max_writes":
        out.append(Gauge("writes", writes, max_writes, tripped == "max_writes", f"{writes} / {max_writes}"))
    return out


def write_outcome(content: str) -> str:
    """A label for a write's result that is not a plain success: denied, rolled back or unknown ("" otherwise).

    These are the loop's own records (loop_writes.py, `run_write` and `settle`), so a reader sees at once that nothing
    was applied, or that only the store can tell.
    """
    value = _record(content)
    if value.get("rolled_back") is True:
        return _("↺ rolled back: nothing of it was applied")
    if value.get("outcome") == "unknown" and "error" in value:
        return _("? outcome unknown: it failed after the stop, maybe after its commit; ask the store")
    if value.get("outcome") == "unknown":
        return _("? outcome unknown: still running when the run stopped; ask the store")
    if value.get("denied") is True:
        return _("✗ denied: nothing ran")
    return ""


def _record(content: str) -> dict[str, Any]:
    """A tool result's content as a dict, or {} if it is not a JSON object."""
    if not content.startswith("{"):
        return {}
    try:
        value = json.loads(content)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _returned(content: str) -> tuple[str, str]:
    """A tool message's kind and text: the loop's answer to a refused batch (loop_refusals.py), or a result."""
    value = _record(content)
    for kind in ("refused", "not_run"):
        if set(value) == {kind} and isinstance(value[kind], str):
            return kind, value[kind]
    return "result", content


def _stopped_mid_write(content: str) -> bool:
    """The loop's record of a write cut short by the stop: the run stopped during that call."""
    value = _record(content)
    return value.get("rolled_back") is True or value.get("outcome") == "unknown"


def _headline(run: Any) -> str:
    if isinstance(run, BaseException):
        return _("✗ stopped: {error}").format(error=type(run).__name__)
    return _("✓ answered: {text}").format(text=clip(getattr(run, "text", ""), 80))


def explanation(error: BaseException) -> str:
    """One sentence, in the learner's language, on what the rule behind `error` did ("" in English).

    The error's own message stays English (its contract phrase is what tests match); a learner reading another
    language gets this after it. The sentence is the nearest class's that has one: a subclass of ToolError
    reads as a ToolError; an error of no agentlab class gets none.
    """
    if language() == "en":
        return ""
    said = _explanations()
    for kind in type(error).__mro__:
        if kind.__name__ in said:
            return said[kind.__name__]
    return ""


def _explanations() -> dict[str, str]:
    """What each error class means, in a learner's terms, translated now (the language may have changed)."""
    return {
        "ConfigError": _(
            "A setting, an argument or a tool is unusable as given: the application's code must change, not the model."
        ),
        "ModelOutputError": _("The model's decision, or one of its calls, has the wrong shape; nothing of it ran."),
        "ModelError": _("The model raised an exception instead of answering; the original error is its __cause__."),
        "UnknownToolError": _(
            "The model asked for a tool whose name is not exactly a key of tools; nothing of this batch ran."
        ),
        "ToolArgsError": _("The tool's validate did not accept the args; nothing of this batch ran."),
        "DuplicateCallIdError": _("The model reused a call id already used in this run; nothing of this batch ran."),
        "RepeatedCallError": _(
            "With forbid_repeats, the model asked again for a tool with the same args; nothing of this batch ran."
        ),
        "ToolError": _(
            "A tool raised an exception or returned a result that is not JSON; the run stopped at that call."
        ),
        "ApprovalError": _(
            "A write had no approval policy to ask, or the policy gave no valid answer; that write did not run."
        ),
        "TurnBudgetError": _("The model needed more turns than max_turns allows; the loop did not call it again."),
        "ToolBudgetError": _("The model asked for more calls than max_calls allows; nothing of this batch ran."),
        "WriteBudgetError": _("The model asked for more writes than max_writes has left; nothing of this batch ran."),
        "DeadlineError": _(
            "The run went past its deadline (timeout_ms); the loop stopped waiting for the model and the tools."
        ),
        "ContextBudgetError": _(
            "The history grew past max_chars before a model call; the loop did not send it to the model."
        ),
        "TokenBudgetError": _("The tokens the model reported reached max_tokens; the loop went no further."),
        "OutputBudgetError": _("The final answer is longer than max_chars allows; the loop did not return it."),
        "StuckCalleeError": _(
            "Too many worker threads are stuck in plain (sync) callees that earlier runs gave up on; no other started."
        ),
        "AbortError": _(
            "The abort signal stopped the run (Stop, a newer run or the caller); nothing new started after it."
        ),
    }


# -- text ------------------------------------------------------------------------


def render_text(run: Any) -> str:
    """A plain-text trace for terminals."""
    lines = [_headline(run)]
    for step in steps(run):
        where = _turn_label(step.turn) if step.turn else ""
        if step.kind == "user":
            lines.append(f"  {_('user'):<8} {clip(step.text)}")
        elif step.kind == "call":
            spent = f"  ({step.tokens})" if step.tokens else ""
            call = _("call {call_id}: {name}({args})").format(
                call_id=step.call_id, name=step.name, args=clip(step.text)
            )
            lines.append(f"  {where:<8} {call}{spent}")
        elif step.kind == "result":
            label = write_outcome(step.text)
            lines.append(f"  {'':<8}   → {step.call_id}: {label + ' — ' if label else ''}{clip(step.text)}")
        elif step.kind in RETURNED:
            lines.append(f"  {'':<8}   → {step.call_id}: {_(RETURNED[step.kind])} — {clip(step.text)}")
        elif step.kind == "final":
            spent = f"  ({step.tokens})" if step.tokens else ""
            lines.append(f"  {where:<8} {_('final')}: {clip(step.text)}{spent}")
        elif step.kind == "rejected":
            lines.append(f"  {where:<8} {_proposal(step)}  ({_consequence(step)})")
        else:
            stopped = _("✗ stopped {where}").format(where=step.where)
            lines.append(f"  {stopped} — {step.text}" if step.where else f"  ✗ {step.text}")
            if isinstance(run, BaseException) and explanation(run):
                lines.append(f"    {explanation(run)}")
    marks = [f"{_(g.name)} {g.label}{' ✗' if g.tripped else ''}" for g in gauges(run)]
    if marks:
        lines.append("  " + _("used: {gauges}").format(gauges=" · ".join(marks)))
    return "\n".join(lines)


# How the trace labels the loop's answers to a refused batch, apart from results (in English: `_` translates them).
RETURNED = {
    "refused": "✗ refused, returned to the model",
    "not_run": "– not run",
}
# The gauges' names, as `gauges` gives them and `_` translates them where shown.
GAUGE_NAMES = ("turns", "calls", "chars", "time", "tokens", "refusals", "writes")


def _turn_label(turn: int) -> str:
    return _("turn {turn}").format(turn=turn)


def _is_final(step: Step) -> bool:
    return step.name == "final" and not step.call_id


def _consequence(step: Step) -> str:
    return _("not returned") if _is_final(step) else _("nothing of it ran")


def _final_answer(step: Step, text: str) -> str:
    """A refused final answer's length and text (clipped, maybe escaped), as the HTML trace shows it after "refused"."""
    n = len(step.text)
    return ngettext("final answer ({n} chars): {text}", "final answer ({n} chars): {text}", n).format(n=n, text=text)


def _proposal(step: Step) -> str:
    """A refused proposal as one phrase, "refused" and what: a call, a final answer, or the raw decision.

    One phrase each (not "refused" + a phrase), so that a language whose verb takes another case can say it.
    """
    text = clip(step.text)
    if _is_final(step):
        n = len(step.text)
        return ngettext(
            "refused final answer ({n} chars): {text}", "refused final answer ({n} chars): {text}", n
        ).format(n=n, text=text)
    if step.name:
        return _("refused call {call_id}: {name}({args})").format(call_id=step.call_id, name=step.name, args=text)
    return _("refused {decision}").format(decision=text)


# -- HTML ------------------------------------------------------------------------

# Inline styles (agentlab/lab/_look.py says why): a saved trace looks the same in a notebook JupyterLab does not trust.
_ID = look.attr(look.MUTED)
_NAME = look.attr("font-weight:bold")
_MARK = look.attr(f"color:{look.RED};font-weight:bold")


def _call_html(call_id: str, name: str, args: str) -> str:
    e = html.escape
    return f"<span class='id'{_ID}>{e(call_id)}</span> <span class='name'{_NAME}>{e(name)}</span>({e(clip(args))})"


def _row(step: Step, first_of_turn: bool, message: bool = True, explained: str = "") -> str:
    e = html.escape
    turn = e(_turn_label(step.turn)) if step.turn and first_of_turn else ""
    if step.kind == "user":
        cells = (e(_("user")), e(clip(step.text)))
    elif step.kind == "call":
        cells = (turn, _call_html(step.call_id, step.name, step.text) + _tokens_html(step))
    elif step.kind == "result":
        name = f" <span class='muted'{_ID}>{e(step.name)}</span>" if step.name else ""
        label = write_outcome(step.text)
        label = f"<span class='mark'{_MARK}>{e(label)}</span> " if label else ""
        cells = ("", f"→ <span class='id'{_ID}>{e(step.call_id)}</span>{name} {label}{e(clip(step.text))}")
    elif step.kind in RETURNED:
        label = f"<span class='mark'{_MARK}>{e(_(RETURNED[step.kind]))}</span>"
        text = f"<span class='muted'{_ID}>{e(clip(step.text))}</span>"
        cells = ("", f"→ <span class='id'{_ID}>{e(step.call_id)}</span> {label} {text}")
    elif step.kind == "final":
        cells = (turn, f"<span class='name'{_NAME}>{e(_('final'))}</span>: {e(clip(step.text))}{_tokens_html(step)}")
    elif step.kind == "rejected":
        if _is_final(step):
            what = _final_answer(step, e(clip(step.text)))
        else:
            what = _call_html(step.call_id, step.name, step.text) if step.name else e(clip(step.text))
        consequence = f"<span class='muted'{_ID}>— {e(_consequence(step))}</span>"
        cells = (turn, f"<span class='mark'{_MARK}>{e(_('refused'))}</span> {what} {consequence}")
    else:
        where = (
            f"<span class='mark'{_MARK}>{e(_('✗ stopped {where}').format(where=step.where))}</span>"
            if step.where
            else ""
        )
        text = e(step.text) if message else ""
        if text and explained:
            text += f"<br><span class='explained'>{e(explained)}</span>"
        here = f"<span class='mark'{_MARK}>{e(_('✗ here'))}</span>"
        cells = (here, f"{where}<br>{text}" if where and text else where or text)
    classes = f"{step.kind} first" if first_of_turn else step.kind
    cell = look.CELL
    if step.kind in ("rejected", "error"):
        cell += ";" + look.BAD_BACKGROUND
    if step.kind == "error":
        cell += ";font-weight:bold"
    if first_of_turn:
        cell += f";border-top:1px solid {look.LINE}"
    turn = cells[0] if step.kind == "error" else f"<span{_ID}>{cells[0]}</span>" if cells[0] else ""
    return (
        f"<tr class='{classes}'{look.attr(look.ROW)}>"
        f"<td class='turn'{look.attr(f'{cell};white-space:nowrap;width:6.5em')}>{turn}</td>"
        f"<td{look.attr(cell)}>{cells[1]}</td></tr>"
    )


def _tokens_html(step: Step) -> str:
    return f" <span class='muted'{_ID}>({html.escape(step.tokens)})</span>" if step.tokens else ""


def _share(gauge: Gauge) -> int:
    """How much of the bar to fill: the share used, full only when the whole budget was used (or time ran out)."""
    if gauge.used is None or not gauge.limit:
        return 100 if gauge.tripped else 0
    return max(0, min(100, round(100 * gauge.used / gauge.limit)))


def _gauge(gauge: Gauge) -> str:
    share = _share(gauge)
    # red: the gauge that stopped the run; amber: a budget used to the full but not over; blue: room left.
    colour = look.RED if gauge.tripped else look.AMBER if share >= 100 else look.BLUE
    track = "rgba(229,83,75,.35)" if gauge.tripped else look.LINE  # a tripped budget shows its overflow as red track
    mark = " ✗" if gauge.tripped else ""
    text = f"color:{look.RED};font-weight:bold" if gauge.tripped else ""
    # the time gauge's share is measured, so it differs from run to run: data-elapsed lets nbval mask it
    elapsed = " data-elapsed" if gauge.name == "time" else ""
    label = gauge.label
    if gauge.name == "time" and not gauge.tripped and gauge.used is not None:
        label = _("{used} ms of {limit} ms").format(used=f"{gauge.used:.0f}", limit=f"{gauge.limit:g}")
    return (
        f"<div class='gauge{' tripped' if gauge.tripped else ''}'{look.attr(f'min-width:10em;{text}')}>"
        f"<div>{html.escape(_(gauge.name))}: {html.escape(label)}{mark}</div>"
        f"<div class='bar'{look.attr(f'height:6px;background:{track};border-radius:3px;overflow:hidden')}>"
        f"<div class='fill'{elapsed} style='width:{share}%;height:6px;background:{colour}'></div></div></div>"
    )


def render_html(run: Any, *, headline: bool = True) -> str:
    """An HTML trace for Jupyter: each turn, each call and its result, where it stopped, and the budget gauges.

    `headline=False` leaves out the first line (answered / stopped) and the error's message, for views that show
    both in a status line of their own (the playground): the trace then says where it stopped, not twice why.
    """
    ok = not isinstance(run, BaseException)
    head_style = look.attr(f"font-weight:bold;margin-bottom:6px;color:{look.GREEN if ok else look.RED}")
    head = f"<div class='head {'ok' if ok else 'bad'}'{head_style}>{html.escape(_headline(run))}</div>"
    rows, last_turn = [], -1
    explained = explanation(run) if isinstance(run, BaseException) else ""
    for step in steps(run):
        first = bool(rows) and step.kind not in ("result", *RETURNED) and step.turn != last_turn
        rows.append(_row(step, first, message=headline, explained=explained))
        last_turn = step.turn
    meters = "".join(_gauge(g) for g in gauges(run))
    return (
        f"<div class='agentlab-trace'{look.attr(f'{look.MONO};{look.BOX}')}>{head if headline else ''}"
        f"<table{look.attr(look.TABLE)}>{''.join(rows)}</table>"
        f"<div class='gauges'{look.attr('display:flex;gap:14px;flex-wrap:wrap;margin-top:8px')}>{meters}</div></div>"
    )


__all__ = ["Gauge", "Step", "clip", "explanation", "gauges", "render_html", "render_text", "steps", "write_outcome"]
