"""An approval desk: a person (or a script) approves or denies each write the model proposes.

    desk = ApprovalDesk(store)                              # you decide, with the buttons
    desk.start(question, model, store.tools(), timeout_ms=120_000)
    desk                                                    # a notebook cell shows the desk

    desk = ApprovalDesk(store, script=[True, Approval(False, "one per customer")])  # decided by a script
    result = await agent_loop(question, model, store.tools(), approve=store.audited(desk))

    desk = ApprovalDesk(store, key=order_key)    # tools made with store.tools(key=order_key): the same key

The desk is an `approve` policy for `agent_loop`. For each proposed write it
shows a card: the call, and the rows it would change, before and after,
worked out on the real database and rolled back (`Store.preview`); then it
waits for Approve or Deny (with an optional reason, which the model receives).
Waiting counts against the run's deadline, like any policy: nobody's coffee
break can hold a run. A scripted desk presses the same buttons itself, in
order, so a notebook runs the same code path deterministically under nbval.

`start` runs the agent on a worker thread with an event loop of its own, so
that the notebook stays free to deliver your clicks while the run waits for
them; `await agent_loop(...)` in a cell would keep the kernel busy, and a
click could not arrive until the deadline had passed. `start` returns once the
run waits for its first answer (or has ended), so the cell shows a settled
desk.

`change_html` (the before/after table) is plain standard-library code; only
`ApprovalDesk` needs ipywidgets, imported when a desk is made.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import html
import json
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from agentlab import _look as look
from agentlab.abort import AbortSignal
from agentlab.callees import in_worker_thread
from agentlab.errors import ConfigError
from agentlab.loop import AgentResult
from agentlab.store import Change, RowChange, Store
from agentlab.sync import agent_loop_sync
from agentlab.tools import Approval, ToolCall
from agentlab.trace import render_html

WAITING = "… waiting for Approve or Deny"  # no emoji: a machine without an emoji font shows a box
EXPIRED = "no answer: the run stopped before anyone answered"

# Inline styles (agentlab/_look.py says why): a saved desk looks the same in a notebook JupyterLab does not trust.
# A changed cell is marked by a translucent amber under the theme's own text colour, so it reads in both themes.
_DESK = look.attr(f"{look.SANS};max-width:62em;line-height:1.35")
_TITLE_CSS = look.attr(f"{look.MUTED};margin-bottom:4px")
_CHANGE = look.attr(f"{look.MONO};{look.BOX}")
_HEAD = look.attr("font-weight:bold;margin-bottom:4px")
_MUTED = look.attr(f"{look.MUTED};font-weight:normal")
_NOTE = look.attr("margin:4px 0")
_TABLE = look.attr("border-collapse:collapse;margin:4px 0 8px 0;background:transparent")
_ROW = look.attr(look.ROW)
_CELL = f"padding:2px 8px;text-align:left;vertical-align:top;border:none;border-bottom:1px solid {look.LINE}"
_TH = look.attr(f"{_CELL};font-weight:normal;{look.MUTED}")
_TD = look.attr(_CELL)
_CHANGED = look.attr(f"{_CELL};{look.CHANGED_BACKGROUND};font-weight:bold")
_VERDICT = {"ok": look.GREEN, "bad": look.RED, "wait": look.AMBER}


# -- the before/after of a proposed write: plain HTML -----------------------------------


def change_html(change: Change) -> str:
    """A proposed write as HTML: the call, then each row it touches before and after, changes marked."""
    e = html.escape
    call = change.call
    args = json.dumps(call.args, ensure_ascii=False)
    parts = [
        f"<div class='head'{_HEAD}>{e(call.name)}({e(args)}) <span class='id'{_MUTED}>call {e(call.id)}</span></div>"
    ]
    if change.replay:
        parts.append(
            f"<div class='note'{_NOTE}>Its idempotency key {e(repr(change.key))} has run before: the store would "
            "return its first result and change nothing.</div>"
        )
    elif not any(row.changed for row in change.rows):
        parts.append(f"<div class='note'{_NOTE}>It would change nothing.</div>")
    parts += [_row_html(row) for row in change.rows]
    returned = f"<span class='muted'{_MUTED}>the tool would return</span> {e(_json(change.result))}"
    parts.append(f"<div class='note'{_NOTE}>{returned}</div>")
    return f"<div class='agentlab-change'{_CHANGE}>{''.join(parts)}</div>"


def _row_html(row: RowChange) -> str:
    e = html.escape
    columns = list((row.after or row.before or {}).keys())
    changed = set(row.changed)
    label = "new row" if row.before is None else "removed" if row.after is None else ""
    caption = f"<div>{e(row.table)} {e(str(row.key))} <span class='muted'{_MUTED}>{label}</span></div>"
    head = f"<tr{_ROW}><th{_TH}></th>" + "".join(f"<th{_TH}>{e(c)}</th>" for c in columns) + "</tr>"
    lines = []
    for when, values in (("before", row.before), ("after", row.after)):
        if values is None:
            cells = f"<td colspan='{len(columns)}' class='muted'{_TH}>(no row)</td>"
        else:
            cells = "".join(
                f"<td class='changed'{_CHANGED}>{e(_json(values[c]))}</td>"
                if when == "after" and c in changed
                else f"<td class=''{_TD}>{e(_json(values[c]))}</td>"
                for c in columns
            )
        lines.append(f"<tr{_ROW}><th{_TH}>{when}</th>{cells}</tr>")
    return f"{caption}<table{_TABLE}>{head}{''.join(lines)}</table>"


def _json(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


# -- the desk ---------------------------------------------------------------------------


class _Card:
    """One proposed write on the desk: its before/after, Approve and Deny, a reason, and the verdict."""

    def __init__(self, widgets: Any, change: Change) -> None:
        self.change = change
        self.verdict = WAITING
        self.answered: asyncio.Future[Approval] | None = None
        self.approve = widgets.Button(description="Approve", button_style="success", icon="check")
        self.deny = widgets.Button(description="Deny", button_style="danger", icon="times")
        self.reason = widgets.Text(placeholder="reason for a denial (the model reads it)")
        self.shown = widgets.HTML(_verdict_html(self.verdict))
        self.approve.on_click(lambda _: self.answer(Approval(True)))
        self.deny.on_click(lambda _: self.answer(Approval(False, self.reason.value.strip())))
        self.box = widgets.VBox(
            [widgets.HTML(change_html(change)), widgets.HBox([self.approve, self.deny, self.reason]), self.shown]
        )

    def answer(self, approval: Approval) -> None:
        """A click (or the script): settle the waiting policy once; later clicks do nothing."""
        if self.answered is None or self.answered.done() or self.verdict != WAITING:
            return
        self.close("✓ approved" if approval.allowed else f"✗ denied{': ' + approval.reason if approval.reason else ''}")
        future, loop = self.answered, self.answered.get_loop()
        loop.call_soon_threadsafe(lambda: None if future.done() else future.set_result(approval))

    def close(self, verdict: str) -> None:
        self.verdict = verdict
        self.shown.value = _verdict_html(verdict)
        for widget in (self.approve, self.deny, self.reason):
            widget.disabled = True

    def snapshot(self) -> str:
        return f"{change_html(self.change)}{_verdict_html(self.verdict)}"


def _verdict_html(verdict: str) -> str:
    kind = "ok" if verdict.startswith("✓") else "bad" if verdict.startswith("✗") else "wait"
    css = look.attr(f"{look.SANS};font-weight:bold;margin:2px 0 10px 0;color:{_VERDICT[kind]}")
    return f"<div class='agentlab-verdict {kind}'{css}>{html.escape(verdict)}</div>"


class ApprovalDesk:
    """An `approve` policy with a face: each proposed write as a card with its before/after and Approve/Deny.

    `script` answers in order instead of a person (True, False or an
    `Approval` with a reason), by pressing the card's own buttons; a write
    beyond the script is an error. `key` is the function given to
    `store.tools(key=...)`, if any: a card says "replay" exactly when the
    write would replay, so it must look up the key the write will use.
    `cards` keeps every card, `box` is the widget, `outcome` the result (or
    error) of the last `start`ed run.
    """

    def __init__(
        self,
        store: Store,
        *,
        script: Sequence[bool | Approval] | None = None,
        key: Callable[[ToolCall], str] | None = None,
    ) -> None:
        if not isinstance(store, Store):
            raise ConfigError(f"ApprovalDesk needs the Store whose writes it shows, not {type(store).__name__}")
        if key is not None and not callable(key):
            raise ConfigError("key must be the function given to store.tools(key=...), which makes a write's key")
        self.key = key
        if script is not None and not all(isinstance(answer, (bool, Approval)) for answer in script):
            raise ConfigError("each answer of a desk's script must be True, False or Approval(allowed, reason)")
        self._widgets = _ipywidgets()
        self.store = store
        self.script = None if script is None else list(script)
        self.cards: list[_Card] = []
        self.outcome: AgentResult | BaseException | None = None
        self._lock = threading.Lock()
        self._settled = threading.Event()
        self._status = self._widgets.HTML("")
        self._cards = self._widgets.VBox([])
        title = self._widgets.HTML(
            f"<div class='agentlab-desk'{_DESK}><div class='title'{_TITLE_CSS}>{_TITLE}</div></div>"
        )
        self.box = self._widgets.VBox([title, self._cards, self._status])

    async def __call__(self, call: ToolCall, signal: AbortSignal) -> Approval:
        """Show the proposed write, then wait for an answer, or for the run to stop."""
        change = await in_worker_thread(functools.partial(self.store.preview, key=self.key), (call, signal), "preview")
        card = _Card(self._widgets, change)
        card.answered = asyncio.get_running_loop().create_future()
        with self._lock:
            self.cards.append(card)
            self._cards.children = (*self._cards.children, card.box)
            scripted = None if self.script is None else self._next_answer(call)
        if scripted is not None:
            if not scripted.allowed:
                card.reason.value = scripted.reason
            (card.approve if scripted.allowed else card.deny).click()
        else:
            self._settled.set()  # a person's turn: `start` may return now
        stopped = asyncio.ensure_future(signal.wait())
        try:
            await asyncio.wait([card.answered, stopped], return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopped.cancel()
            if not card.answered.done():
                card.close(EXPIRED)
        return card.answered.result() if card.answered.done() else Approval(False, EXPIRED)

    def _next_answer(self, call: ToolCall) -> Approval:
        if not self.script:
            raise ConfigError(
                f"the desk's script has run out of answers: {call.name} (call {call.id!r}) is write number "
                f"{len(self.cards)}; give the script one answer per proposed write"
            )
        answer = self.script.pop(0)
        return answer if isinstance(answer, Approval) else Approval(answer)

    def start(self, input: str, model: Any, tools: Mapping[str, Any], **options: Any) -> concurrent.futures.Future:
        """Run `agent_loop` on a worker thread with this desk as its (audited) approval policy.

        Returns a future of the outcome, once the run waits for a person's
        first answer or has ended. Every answer goes into the store's audit
        log; pass `approve=` to use another policy. The outcome's trace
        appears under the cards when the run ends.
        """
        for name, tool in tools.items():
            made_with = getattr(getattr(tool, "run", None), "store_key", self.key)
            if made_with is not self.key:
                raise ConfigError(
                    f"tool {name!r} makes its idempotency keys with {made_with!r}, but this desk previews with "
                    f"{self.key!r}: give ApprovalDesk(store, key=...) the function given to store.tools(key=...)"
                )
        options.setdefault("approve", self.store.audited(self, key=self.key))
        done: concurrent.futures.Future[Any] = concurrent.futures.Future()
        self._settled.clear()
        self._status.value = _status_html(None)

        def fly() -> None:
            try:
                outcome: Any = agent_loop_sync(input, model, tools, **options)
            except BaseException as error:  # the run's verdict, shown on the desk
                outcome = error
            self.outcome = outcome
            self._status.value = _status_html(outcome)
            self._settled.set()
            done.set_result(outcome)

        threading.Thread(target=fly, name="agentlab approval desk", daemon=True).start()
        self._settled.wait()
        return done

    def __str__(self) -> str:
        with self._lock:
            cards = list(self.cards)
        lines = [f"approval desk: {len(cards)} proposed write{'' if len(cards) == 1 else 's'}"]
        for card in cards:
            call = card.change.call
            lines.append(f"  {call.name} {json.dumps(call.args, ensure_ascii=False)} (call {call.id}): {card.verdict}")
        return "\n".join(lines)

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        """The live widget, plus a static snapshot for GitHub, nbviewer and nbval."""
        bundle = dict(self.box._repr_mimebundle_(**kwargs) or {})
        with self._lock:
            cards = "".join(card.snapshot() for card in self.cards)
        status = self._status.value
        bundle["text/html"] = (
            f"<div class='agentlab-desk'{_DESK}><div class='title'{_TITLE_CSS}>{_TITLE}</div>{cards}</div>{status}"
        )
        bundle["text/plain"] = str(self)
        return bundle


_TITLE = "approval desk · each write the model proposes waits here for Approve or Deny"


def _status_html(outcome: AgentResult | BaseException | None) -> str:
    if outcome is None:
        return f"<div class='agentlab-desk'{_DESK}>{_verdict_html('… the run is in progress')}</div>"
    if isinstance(outcome, AgentResult) or hasattr(outcome, "history"):
        return render_html(outcome)
    return f"<div class='agentlab-desk'{_DESK}>{_verdict_html(f'✗ {outcome!r}')}</div>"


def _ipywidgets() -> Any:
    try:
        import ipywidgets
    except ImportError as error:
        raise ConfigError(
            "the approval desk needs ipywidgets: pip install ipywidgets (make lab installs it); "
            "without it, pass any function as approve=..."
        ) from error
    return ipywidgets


__all__ = ["EXPIRED", "WAITING", "ApprovalDesk", "change_html"]
