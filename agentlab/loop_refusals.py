"""The loop's recovery path: a refused batch given back to the model (notebook 11).

By default (`max_refusals=0`) the first refusal ends the run: `give_back`
raises it, and that is all notebooks 01-08 need from this file. With
`max_refusals > 0`, a refusal the model can fix (an unknown tool, invalid
args, a malformed call, a duplicate call id, a repeat under `forbid_repeats`:
`REFUSALS` in loop.py) goes back to it as the batch's results instead, and the
model gets another turn. The limits are not refusals: they still end the run.
"""

from __future__ import annotations

from typing import Any

from agentlab.errors import AgentError
from agentlab.jsonc import compact_json


class RefusalPath:
    """The refusals of one run; `run` is that run (agentlab.loop._Run), whose history and ids it uses."""

    def __init__(self, run: Any, max_refusals: int) -> None:
        self.run = run
        self.max_refusals = max_refusals

    def give_back(self, calls: list[Any], refusal: AgentError, spent: dict[str, Any]) -> None:
        """Give a refused batch back to the model, if `max_refusals` allows; otherwise raise it.

        The history gets the batch as proposed, then exactly one tool message
        per call: the refused call's says what was wrong, in the words of its
        error; the others, that they did not run. Nothing of the batch ran.

        A call whose id cannot carry a result (missing, not a string, empty,
        or used before) is recorded under an id the loop makes, "refused-<turn>-<n>"
        (n is the call's place in the batch), and its message is tied to that id;
        the refusal quotes the id the model sent. Every id of the batch then
        counts as used: one id, one tool message, for the whole run.
        """
        run = self.run
        if run.usage.refusals >= self.max_refusals:
            if self.max_refusals:
                n = self.max_refusals
                spent = "1 refused batch was" if n == 1 else f"{n} refused batches were"
                refusal.args = (
                    f"{refusal.message}. The refusal budget is spent: {spent} already "
                    f"returned to the model (max_refusals={self.max_refusals})",
                )
            raise refusal
        run.usage.refusals += 1
        recorded: list[dict[str, Any]] = []
        for number, call in enumerate(calls, 1):
            call_id = call.get("id") if isinstance(call, dict) else None
            if not isinstance(call_id, str) or not call_id or call_id in run.seen_ids:
                call_id = self.loop_made_id(number)
            run.seen_ids[call_id] = run.usage.turns
            name = call.get("name") if isinstance(call, dict) else None
            args = call.get("args") if isinstance(call, dict) else None
            name = name if isinstance(name, str) else ""
            args = args if isinstance(args, dict) else {}
            recorded.append({"id": call_id, "name": name, "args": args})
        run.append({"role": "assistant", "calls": recorded, **spent})
        refused_id = recorded[run.checking - 1]["id"]
        for number, call in enumerate(recorded, 1):
            if number == run.checking:
                content = {"refused": refusal.message}
            else:
                why = f"call {refused_id!r} of this batch was refused; nothing of this batch ran"
                content = {"not_run": why}
            run.append({"role": "tool", "call_id": call["id"], "content": compact_json(content)})

    def loop_made_id(self, number: int) -> str:
        """An id for a refused call whose own id cannot carry its result; never one used before.

        Letters, digits and dashes only, the ids every provider accepts.
        """
        turn, seen = self.run.usage.turns, self.run.seen_ids
        made, again = f"refused-{turn}-{number}", 0
        while made in seen:
            again += 1
            made = f"refused-{turn}-{number}-{again}"
        return made


__all__ = ["RefusalPath"]
