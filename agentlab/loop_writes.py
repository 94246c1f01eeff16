"""The loop's write path: tools that change data (`Tool(..., writes=True)`).

Notebooks 01-08 never meet it: skip this file until notebook 09a. The loop in
`agentlab/loop.py` hands every write to a `WritePath` at three points:

1. `check`, with the rest of the batch's checks: a batch with writes needs an
   approval policy, and must fit what is left of `max_writes`; otherwise
   nothing of the batch runs.
2. `run`, in place of running the tool: the policy is asked first; a denial
   goes back to the model as the call's result; an approved write runs like
   any tool, one at a time, and never after the deadline or an abort.
3. `settle`, when the run is stopped (deadline, abort) while a write runs:
   the write gets `write_grace_ms` more to commit or roll back, so that the
   history can say which, or, if it is still running, that its outcome is
   unknown. The one case where a run ends later than its deadline.
"""

from __future__ import annotations

import asyncio
from typing import Any

from agentlab.callees import Callee, passes_through
from agentlab.errors import ApprovalError, DeadlineError, ToolError, WriteBudgetError, number_text, plural
from agentlab.jsonc import compact_json, copy_json
from agentlab.tools import Approval, ToolCall
from agentlab.untrusted import describe, show


class WritePath:
    """The writes of one run; `run` is that run (agentlab.loop._Run), whose checks and history it uses."""

    def __init__(self, run: Any, approve: Any, max_writes: int, grace_ms: float) -> None:
        self.run = run
        self.approve = Callee(approve, 2, "approval") if approve is not None else None
        self.max_writes = max_writes
        self.grace_ms = grace_ms
        self.in_flight: Any = None  # the checked call of the write that is running, if any

    def check(self, batch: list[Any], decision: Any) -> None:
        """Writes need an approval policy, and must fit what is left of `max_writes`."""
        writes = [call for call in batch if call.tool.writes]
        if not writes:
            return
        if self.approve is None:
            first = writes[0]
            raise self.run.fail(
                ApprovalError,
                f"approval required: {first.name} (call {first.id!r}) changes data, and no approve "
                f"policy was given; pass approve=... to agent_loop to allow or deny each write. "
                f"Nothing of this batch ran",
                rejected=decision,
            )
        left = self.max_writes - self.run.usage.writes
        if len(writes) > left:
            raise self.run.fail(
                WriteBudgetError,
                f"write budget exhausted: the model asked for {plural(len(writes), 'write')} but {left} of "
                f"max_writes={self.max_writes} remain; nothing of this batch ran. Raise max_writes, "
                f"or make the model write less",
                value=self.max_writes,
                rejected=decision,
            )

    async def run_write(self, call: Any) -> str:
        """Ask the approval policy, then run the write; a denial goes back to the model as the result."""
        approval = await self.ask(call)
        if not approval.allowed:
            denial = {"denied": True, "reason": approval.reason or "the write was not approved"}
            return compact_json(denial)
        self.run.check_not_stopped()  # waiting for approval took time
        self.run.usage.writes += 1
        self.in_flight = call
        try:
            return await self.run.run_tool(call)
        except ToolError as error:
            if self.run.controller.signal.aborted:  # stopped mid-write: record what the tool reported
                outcome = _outcome(error.__cause__ or error)
                self.run.append({"role": "tool", "call_id": call.id, "content": compact_json(outcome)})
            raise
        finally:
            self.in_flight = None

    async def ask(self, call: Any) -> Approval:
        """The policy sees the call (with a copy of its checked args); it answers True, False or an Approval."""
        shown = ToolCall(call.id, call.name, copy_json(call.args))
        try:
            answer = await self.approve(shown, self.run.controller.signal)  # type: ignore[misc]
        except BaseException as error:
            if passes_through(error):
                raise
            message = (
                f"approval failed: the approve policy raised {describe(error)} for {call.name} "
                f"(call {call.id!r}); nothing was written"
            )
            raise self.run.fail(ApprovalError, message) from error
        if type(answer) is bool:
            return Approval(answer)
        if isinstance(answer, Approval):  # read as plain data: a subclass, or a field set by hand, could lie
            fields = object.__getattribute__(answer, "__dict__")
            fields = fields if type(fields) is dict else {}
            allowed, reason = fields.get("allowed"), fields.get("reason")
            if type(allowed) is bool and isinstance(reason, str):
                return Approval(allowed, str.__str__(reason))
        raise self.run.fail(
            ApprovalError,
            f"approval failed: the approve policy answered {show(answer)} for {call.name} "
            f"(call {call.id!r}); it must answer True, False or Approval(allowed, reason) with allowed a "
            f"bool and reason a string. Nothing was written",
        )

    async def settle(self, task: asyncio.Task[Any], error: BaseException) -> None:
        """The run was stopped while a write ran: give it the grace, then record what is known of it."""
        try:
            await asyncio.wait([task], timeout=self.grace_ms / 1000)
        except asyncio.CancelledError:  # our caller gave up on us during the grace: the task is abandoned too
            self.run.give_up(task)
            raise
        if isinstance(error, DeadlineError) and error.value == self.run.timeout_ms:  # ours: say why it is late
            error.args = (
                f"{error.message}. A write was running: it was given up to "
                f"write_grace_ms={number_text(self.grace_ms)} more to commit or roll back",
            )
        if self.in_flight is not None:  # still running after the grace: nobody can say what it did
            unsettled = {"outcome": "unknown", "note": "the write was still running when the run stopped"}
            self.run.append({"role": "tool", "call_id": self.in_flight.id, "content": compact_json(unsettled)})


def _outcome(error: BaseException) -> dict[str, Any]:
    """What the history records of a write that failed after a stop: what the tool reported, no more.

    A tool says it rolled back by raising an exception with `rolled_back = True`
    (the store's `WriteRolledBack` does); anything else may have committed first.
    """
    if getattr(error, "rolled_back", None) is True:
        return {"rolled_back": True, "error": describe(error)}
    return {"outcome": "unknown", "error": describe(error)}


__all__ = ["WritePath"]
