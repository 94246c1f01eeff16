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
order, so a notebook runs the same code path deterministically, with nobody at it.

`start` runs the agent on a worker thread with an event loop of its own, so
that the notebook stays free to deliver your clicks while the run waits for
them; `await agent_loop(...)` in a cell would keep the kernel busy, and a
click could not arrive until the deadline had passed. `start` returns once the
run waits for its first answer (or has ended), so the cell shows a settled
desk. In a browser (Pyodide, no threads) the run is a task on the kernel's own
loop instead, and `start` returns at once: the desk fills in as the run goes.
A saved notebook shows a snapshot instead of the widget: a card still
unanswered when the cell ran says so, and how to get the buttons, rather than
"waiting" for a click that cannot come.

`change_html` (the before/after table, in change_view.py) is plain
standard-library code; only `ApprovalDesk` needs ipywidgets, imported when a
desk is made.

The desk's words (its buttons, title, verdicts) are said in the learner's language when shown (`agentlab.i18n`).
A denial's reason is not: it goes to the model, as the policy gave it.
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

from agentlab import callees
from agentlab.abort import AbortSignal
from agentlab.callees import in_worker_thread
from agentlab.errors import ConfigError
from agentlab.i18n import _, ngettext
from agentlab.lab import _look as look
from agentlab.lab.trace import explanation, render_html
from agentlab.loop import AgentResult, agent_loop
from agentlab.sync import agent_loop_sync, run_detached
from agentlab.tools import Approval, ToolCall
from agentlab.writes.change_view import change_html
from agentlab.writes.store import Change, Store

# In English; `_` translates them where shown. EXPIRED is also the reason the model reads: that one stays English.
WAITING = "… waiting for Approve or Deny"  # no emoji: a machine without an emoji font shows a box
EXPIRED = "no answer: the run stopped before anyone answered"
# What a saved notebook (no kernel, no buttons) shows for a card that was still waiting when its cell ran.
UNANSWERED = "a snapshot, saved before anyone answered: run this cell to get the Approve and Deny buttons"

# Inline styles (agentlab/lab/_look.py says why): a saved desk looks the same in a notebook JupyterLab does not trust.
_DESK = look.attr(f"{look.SANS};max-width:62em;line-height:1.35")
_TITLE_CSS = look.attr(f"{look.MUTED};margin-bottom:4px")
_VERDICT = {"ok": look.GREEN, "bad": look.RED, "wait": look.AMBER}


# -- the desk ---------------------------------------------------------------------------


class _Card:
    """One proposed write on the desk: its before/after, Approve and Deny, a reason, and the verdict."""

    def __init__(self, widgets: Any, change: Change) -> None:
        self.change = change
        self.waiting = True  # until a click, the script or the run's stop settles it
        self.verdict = _(WAITING)  # what the card says, in the language in force when it was said
        self.answered: asyncio.Future[Approval] | None = None
        self.approve = widgets.Button(description=_("Approve"), button_style="success", icon="check")
        self.deny = widgets.Button(description=_("Deny"), button_style="danger", icon="times")
        self.reason = widgets.Text(placeholder=_("reason for a denial (the model reads it)"))
        self.shown = widgets.HTML(_verdict_html(self.verdict))
        self.approve.on_click(lambda _: self.answer(Approval(True)))
        self.deny.on_click(lambda _: self.answer(Approval(False, self.reason.value.strip())))
        self.box = widgets.VBox(
            [widgets.HTML(change_html(change)), widgets.HBox([self.approve, self.deny, self.reason]), self.shown]
        )

    def answer(self, approval: Approval) -> None:
        """A click (or the script): settle the waiting policy once; later clicks do nothing."""
        if self.answered is None or self.answered.done() or not self.waiting:
            return
        if approval.allowed:
            self.close(_("✓ approved"))
        else:
            self.close(_("✗ denied: {reason}").format(reason=approval.reason) if approval.reason else _("✗ denied"))
        future, loop = self.answered, self.answered.get_loop()
        loop.call_soon_threadsafe(lambda: None if future.done() else future.set_result(approval))

    def close(self, verdict: str) -> None:
        self.waiting = False
        self.verdict = verdict
        self.shown.value = _verdict_html(verdict)
        for widget in (self.approve, self.deny, self.reason):
            widget.disabled = True

    def snapshot(self) -> str:
        """The card for a saved notebook: its change, and its verdict (an unanswered card says how to answer)."""
        return f"{change_html(self.change)}{_verdict_html(self.saved_verdict)}"

    @property
    def saved_verdict(self) -> str:
        return _(UNANSWERED) if self.waiting else self.verdict


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
            f"<div class='agentlab-desk'{_DESK}><div class='title'{_TITLE_CSS}>{html.escape(_(_TITLE))}</div></div>"
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
                card.close(_(EXPIRED))
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

        def landed(outcome: Any) -> None:  # the run's verdict, shown on the desk
            self.outcome = outcome
            self._status.value = _status_html(outcome)
            self._settled.set()
            done.set_result(outcome)

        if not callees.THREADS:  # a browser's Pyodide: a task on the kernel's loop; the desk fills in as it goes
            run_detached(lambda: agent_loop(input, model, tools, **options), landed, "agentlab approval desk")
            return done

        def fly() -> None:
            try:
                outcome: Any = agent_loop_sync(input, model, tools, **options)
            except BaseException as error:
                outcome = error
            landed(outcome)

        threading.Thread(target=fly, name="agentlab approval desk", daemon=True).start()
        self._settled.wait()
        return done

    def __str__(self) -> str:
        return self._text(saved=False)

    def _text(self, *, saved: bool) -> str:
        with self._lock:
            cards = list(self.cards)
        n = len(cards)
        lines = [ngettext("approval desk: {n} proposed write", "approval desk: {n} proposed writes", n).format(n=n)]
        for card in cards:
            call = card.change.call
            verdict = card.saved_verdict if saved else card.verdict
            args = json.dumps(call.args, ensure_ascii=False)
            lines.append(
                "  "
                + _("{name} {args} (call {call_id}): {verdict}").format(
                    name=call.name, args=args, call_id=call.id, verdict=verdict
                )
            )
        return "\n".join(lines)

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        """The live widget, plus a static snapshot for GitHub, nbviewer and a saved notebook.

        The snapshot is the desk as it was when the cell ran: a card still waiting then says it is a
        snapshot and how to get the buttons, and the run's "in progress" line is left out (its trace
        appears on the live desk once someone answers).
        """
        bundle = dict(self.box._repr_mimebundle_(**kwargs) or {})
        with self._lock:
            cards = "".join(card.snapshot() for card in self.cards)
            waiting = any(card.waiting for card in self.cards)
        status = "" if waiting and self.outcome is None else self._status.value
        title = html.escape(_(_TITLE))
        bundle["text/html"] = (
            f"<div class='agentlab-desk'{_DESK}><div class='title'{_TITLE_CSS}>{title}</div>{cards}</div>{status}"
        )
        bundle["text/plain"] = self._text(saved=True)
        return bundle


_TITLE = "approval desk · each write the model proposes waits here for Approve or Deny"


def _status_html(outcome: AgentResult | BaseException | None) -> str:
    if outcome is None:
        return f"<div class='agentlab-desk'{_DESK}>{_verdict_html(_('… the run is in progress'))}</div>"
    if isinstance(outcome, AgentResult) or hasattr(outcome, "history"):
        return render_html(outcome)
    explained = explanation(outcome)  # "" in English
    said = f"✗ {outcome!r}" + (f" {explained}" if explained else "")
    return f"<div class='agentlab-desk'{_DESK}>{_verdict_html(said)}</div>"


def _ipywidgets() -> Any:
    try:
        import ipywidgets
    except ImportError as error:
        raise ConfigError(
            "the approval desk needs ipywidgets: pip install ipywidgets (make lab installs it); "
            "without it, pass any function as approve=..."
        ) from error
    return ipywidgets


__all__ = ["EXPIRED", "UNANSWERED", "WAITING", "ApprovalDesk", "change_html"]
