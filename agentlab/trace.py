"""A trace of a finished run: what the model proposed, what ran, what came back.

`render_text(run)` is for terminals (the CLI demo); `render_html(run)` is what
`AgentResult` and `AgentError` show in Jupyter. Both take an `AgentResult` or
an `AgentError` and read the same list of `Step`s, so they always agree.

Output is deterministic, because nbval compares it: no ids but the model's
own call ids, no memory addresses, and time shown only against its limit
("within 5000 ms"), never as a measured number.
"""

from __future__ import annotations

import html
import json
from dataclasses import dataclass
from typing import Any

from agentlab.errors import AgentError, BudgetError, DeadlineError

CLIP = 160


@dataclass(frozen=True)
class Step:
    """One line of a trace. `kind` is user, call, result, final, rejected or error."""

    kind: str
    turn: int
    text: str
    call_id: str = ""
    name: str = ""


@dataclass(frozen=True)
class Gauge:
    """One budget: how much was used of how much was allowed."""

    name: str
    used: float | None
    limit: float | None
    tripped: bool
    label: str


def clip(text: str, limit: int = CLIP) -> str:
    """Shorten long text for display, saying how much was cut."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… (+{len(text) - limit} chars)"


def _json(value: Any) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    except (TypeError, ValueError):
        return repr(value)


def steps(run: Any) -> list[Step]:
    """The steps of a run (an AgentResult or an AgentError), in order."""
    out: list[Step] = []
    turn = 0
    for message in getattr(run, "history", []) or []:
        if message.get("role") == "user":
            out.append(Step("user", turn, str(message.get("content", ""))))
        elif "calls" in message:
            turn += 1
            for call in message["calls"]:
                out.append(Step("call", turn, _json(call.get("args")), str(call.get("id")), str(call.get("name"))))
        elif message.get("role") == "tool":
            out.append(Step("result", turn, str(message.get("content", "")), str(message.get("call_id"))))
        elif message.get("role") == "assistant":
            turn += 1
            out.append(Step("final", turn, str(message.get("content", ""))))
    if isinstance(run, BaseException):
        usage = getattr(run, "usage", None)
        turn = max(turn, getattr(usage, "turns", turn) or turn)
        rejected = getattr(run, "rejected", None)
        if isinstance(rejected, dict) and isinstance(rejected.get("calls"), list):
            for call in rejected["calls"]:
                if isinstance(call, dict):
                    args = _json(call.get("args"))
                    out.append(Step("rejected", turn, args, str(call.get("id")), str(call.get("name"))))
                else:
                    out.append(Step("rejected", turn, _json(call)))
        elif rejected is not None:
            out.append(Step("rejected", turn, _json(rejected)))
        out.append(Step("error", turn, f"{type(run).__name__}: {run}"))
    return out


def gauges(run: Any) -> list[Gauge]:
    """Used against allowed for turns, calls, characters and time (time only coarsely)."""
    usage, limits = getattr(run, "usage", None), getattr(run, "limits", None)
    if usage is None or limits is None:
        return []
    tripped = getattr(run, "limit", "") if isinstance(run, BudgetError) else ""
    over_time = isinstance(run, DeadlineError)
    timeout = f"{limits.timeout_ms:g} ms"
    return [
        Gauge("turns", usage.turns, limits.max_turns, tripped == "max_turns", f"{usage.turns} / {limits.max_turns}"),
        Gauge("calls", usage.calls, limits.max_calls, tripped == "max_calls", f"{usage.calls} / {limits.max_calls}"),
        Gauge("chars", usage.chars, limits.max_chars, tripped == "max_chars", f"{usage.chars} / {limits.max_chars}"),
        Gauge(
            "time",
            None,
            limits.timeout_ms,
            over_time,
            f"limit of {timeout} reached" if over_time else f"within {timeout}",
        ),
    ]


def _headline(run: Any) -> str:
    if isinstance(run, AgentError):
        return f"✗ stopped: {type(run).__name__}"
    return f"✓ answered: {clip(getattr(run, 'text', ''), 80)}"


# -- text ------------------------------------------------------------------------


def render_text(run: Any) -> str:
    """A plain-text trace for terminals."""
    lines = [_headline(run)]
    for step in steps(run):
        where = f"turn {step.turn}" if step.turn else ""
        if step.kind == "user":
            lines.append(f"  {'user':<8} {clip(step.text)}")
        elif step.kind == "call":
            lines.append(f"  {where:<8} call {step.call_id}: {step.name}({clip(step.text)})")
        elif step.kind == "result":
            lines.append(f"  {'':<8}   → {step.call_id}: {clip(step.text)}")
        elif step.kind == "final":
            lines.append(f"  {where:<8} final: {clip(step.text)}")
        elif step.kind == "rejected":
            proposal = f"call {step.call_id}: {step.name}({clip(step.text)})" if step.name else clip(step.text)
            lines.append(f"  {where:<8} refused {proposal}  (nothing of it ran)")
        else:
            lines.append(f"  ✗ {step.text}")
    marks = [f"{g.name} {g.label}{' ✗' if g.tripped else ''}" for g in gauges(run)]
    if marks:
        lines.append("  used: " + " · ".join(marks))
    return "\n".join(lines)


# -- HTML ------------------------------------------------------------------------

# JupyterLab's theme variables, with fallbacks for GitHub and nbviewer, so the
# trace reads well in light and dark themes alike.
_STYLE = """
<style>
.agentlab-trace{font-family:var(--jp-code-font-family,monospace);font-size:var(--jp-code-font-size,13px);
  color:var(--jp-ui-font-color1,#1f2328);border:1px solid var(--jp-border-color2,#d0d7de);
  border-radius:6px;padding:8px 10px;max-width:60em}
.agentlab-trace .head{font-weight:bold;margin-bottom:6px}
.agentlab-trace .ok{color:var(--jp-success-color1,#1a7f37)}
.agentlab-trace .bad{color:var(--jp-error-color1,#cf222e)}
.agentlab-trace table{border-collapse:collapse;width:100%}
.agentlab-trace td{padding:2px 6px;vertical-align:top;text-align:left;white-space:pre-wrap;word-break:break-word}
.agentlab-trace td.turn{color:var(--jp-ui-font-color2,#57606a);white-space:nowrap;width:4.5em}
.agentlab-trace tr.rejected td,.agentlab-trace tr.error td{background:var(--jp-error-color3,#ffebe9);
  color:var(--jp-error-color0,#82071e)}
.agentlab-trace .id{color:var(--jp-ui-font-color2,#57606a)}
.agentlab-trace .gauges{display:flex;gap:14px;flex-wrap:wrap;margin-top:8px}
.agentlab-trace .gauge{min-width:9em}
.agentlab-trace .bar{height:6px;background:var(--jp-layout-color3,#d0d7de);border-radius:3px;overflow:hidden}
.agentlab-trace .fill{height:6px;background:var(--jp-brand-color1,#0969da)}
.agentlab-trace .gauge.tripped .fill{background:var(--jp-error-color1,#cf222e)}
</style>
"""


def _row(step: Step) -> str:
    e = html.escape
    turn = e(f"turn {step.turn}") if step.turn else ""
    if step.kind == "user":
        cells = ("user", f"{e(clip(step.text))}")
    elif step.kind == "call":
        cells = (turn, f"<span class='id'>{e(step.call_id)}</span> {e(step.name)}({e(clip(step.text))})")
    elif step.kind == "result":
        cells = ("", f"→ <span class='id'>{e(step.call_id)}</span> {e(clip(step.text))}")
    elif step.kind == "final":
        cells = (turn, f"final: {e(clip(step.text))}")
    elif step.kind == "rejected":
        what = (
            f"<span class='id'>{e(step.call_id)}</span> {e(step.name)}({e(clip(step.text))})"
            if step.name
            else e(clip(step.text))
        )
        cells = (turn, f"refused {what} — nothing of it ran")
    else:
        cells = ("✗", e(step.text))
    return f"<tr class='{step.kind}'><td class='turn'>{cells[0]}</td><td>{cells[1]}</td></tr>"


def _gauge(gauge: Gauge) -> str:
    share = (
        100
        if gauge.tripped or gauge.used is None
        else min(100, round(100 * gauge.used / gauge.limit))
        if gauge.limit
        else 100
    )
    width = share if gauge.used is not None or gauge.tripped else 0
    tripped = " tripped" if gauge.tripped else ""
    return (
        f"<div class='gauge{tripped}'><div>{html.escape(gauge.name)}: {html.escape(gauge.label)}</div>"
        f"<div class='bar'><div class='fill' style='width:{width}%'></div></div></div>"
    )


def render_html(run: Any, *, headline: bool = True) -> str:
    """An HTML trace for Jupyter: steps, the refused proposal marked, and budget gauges.

    `headline=False` leaves out the first line (answered / stopped), for views that show a status of their own.
    """
    ok = not isinstance(run, AgentError)
    head = f"<div class='head {'ok' if ok else 'bad'}'>{html.escape(_headline(run))}</div>" if headline else ""
    rows = "".join(_row(step) for step in steps(run))
    meters = "".join(_gauge(g) for g in gauges(run))
    return f"{_STYLE}<div class='agentlab-trace'>{head}<table>{rows}</table><div class='gauges'>{meters}</div></div>"


__all__ = ["Gauge", "Step", "clip", "gauges", "render_html", "render_text", "steps"]
