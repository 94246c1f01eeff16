"""A proposed write's before and after, as HTML: what the approval desk shows, and a `Change` in a notebook.

Plain standard-library code. It imports neither the store nor the desk, so that both can use it:
`Store.preview` returns a `Change` whose `_repr_html_` draws itself with it, and the desk shows it on each card.
Its words are said in the learner's language (`agentlab.i18n`); the rows' tables, columns and values are data.
"""

from __future__ import annotations

import html
import json
from typing import TYPE_CHECKING, Any

from agentlab.i18n import _
from agentlab.lab import _look as look

if TYPE_CHECKING:  # for the annotations only: store.py imports this module when a Change is shown
    from agentlab.writes.store import Change, RowChange

# Inline styles (agentlab/lab/_look.py says why): a saved change looks the same in a notebook JupyterLab does not trust.
# A changed cell is marked by a translucent amber under the theme's own text colour, so it reads in both themes.
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


def change_html(change: Change) -> str:
    """A proposed write as HTML: the call, then each row it touches before and after, changes marked."""
    e = html.escape
    call = change.call
    args = json.dumps(call.args, ensure_ascii=False)
    shown_id = e(_("call {call_id}").format(call_id=call.id))
    parts = [f"<div class='head'{_HEAD}>{e(call.name)}({e(args)}) <span class='id'{_MUTED}>{shown_id}</span></div>"]
    if change.replay:
        replay = _(
            "Its idempotency key {key} has run before: the store would return its first result and change nothing."
        )
        parts.append(f"<div class='note'{_NOTE}>{e(replay.format(key=repr(change.key)))}</div>")
    elif not any(row.changed for row in change.rows):
        parts.append(f"<div class='note'{_NOTE}>{e(_('It would change nothing.'))}</div>")
    parts += [_row_html(row) for row in change.rows]
    returned = f"<span class='muted'{_MUTED}>{e(_('the tool would return'))}</span> {e(_json(change.result))}"
    parts.append(f"<div class='note'{_NOTE}>{returned}</div>")
    return f"<div class='agentlab-change'{_CHANGE}>{''.join(parts)}</div>"


def _row_html(row: RowChange) -> str:
    e = html.escape
    columns = list((row.after or row.before or {}).keys())
    changed = set(row.changed)
    label = _("new row") if row.before is None else _("removed") if row.after is None else ""
    caption = f"<div>{e(row.table)} {e(str(row.key))} <span class='muted'{_MUTED}>{e(label)}</span></div>"
    head = f"<tr{_ROW}><th{_TH}></th>" + "".join(f"<th{_TH}>{e(c)}</th>" for c in columns) + "</tr>"
    lines = []
    for when, values, after in ((_("before"), row.before, False), (_("after"), row.after, True)):
        if values is None:
            cells = f"<td colspan='{len(columns)}' class='muted'{_TH}>{e(_('(no row)'))}</td>"
        else:
            cells = "".join(
                f"<td class='changed'{_CHANGED}>{e(_json(values[c]))}</td>"
                if after and c in changed
                else f"<td class=''{_TD}>{e(_json(values[c]))}</td>"
                for c in columns
            )
        lines.append(f"<tr{_ROW}><th{_TH}>{e(when)}</th>{cells}</tr>")
    return f"{caption}<table{_TABLE}>{head}{''.join(lines)}</table>"


def _json(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


__all__ = ["change_html"]
