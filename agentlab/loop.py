"""The bounded agent loop: the model proposes; the application verifies and executes.

    result = await agent_loop("What is the weather in Pune?", model, tools)

The model is a function `model(messages, signal)` that returns a decision:

    {"kind": "final", "text": "..."}                                  # the answer
    {"kind": "tools", "calls": [{"id": ..., "name": ..., "args": {...}}, ...]}

Each decision is only a proposal. Before anything runs, the loop checks it
whole: the shape, the budgets, every call id, every tool name, every set of
args. Then it runs the calls, appends each result to the history tied to its
call id, and asks the model again. The loop, not the model, holds every limit:

    max_turns    model calls in one run
    max_calls    tool runs in one run
    timeout_ms   wall-clock time for the whole run, model and tools included
    max_chars    the size of the history (a stand-in for a context window),
                 and the size of the final text
    max_tokens   the tokens a real model reports spending (agentlab.models);
                 None, the default, sets no token limit
    signal       an AbortSignal: stop from outside, at any moment
    max_refusals refused batches returned to the model to correct (default 0:
                 the first refusal ends the run)

Tools that change data (`Tool(..., writes=True)`) need more: each write runs
only if the `approve` policy allows it, within `max_writes`, one at a time,
and never after the deadline or an abort. A write still running when the run
is stopped gets `write_grace_ms` more to commit or roll back, so that the
history can say which: the one case where the run ends later than its
deadline or its abort, by at most that grace (the error says so when it waited).

Reaching a limit exactly is allowed; the step past it fails with an
`AgentError` subclass that says which limit, and carries the history so far.

Read this file top to bottom: `agent_loop` sets up a `_Run`, `_Run.steps` is
the loop itself, and `_Run.race` is what makes the deadline and the abort
hold even against a model or a tool that ignores the signal or blocks.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import inspect
import itertools
import math
import operator
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from agentlab.abort import AbortController, AbortSignal
from agentlab.callees import Callee
from agentlab.errors import (
    AbortError,
    AgentError,
    ApprovalError,
    ConfigError,
    ContextBudgetError,
    DeadlineError,
    DuplicateCallIdError,
    ModelError,
    ModelOutputError,
    OutputBudgetError,
    RepeatedCallError,
    TokenBudgetError,
    ToolArgsError,
    ToolBudgetError,
    ToolError,
    TurnBudgetError,
    UnknownToolError,
    WriteBudgetError,
)
from agentlab.jsonc import NotJSONError, compact_json, copy_json, glimpse
from agentlab.tools import Approval, Tool, ToolCall

# How long the loop waits for an abandoned model or tool to acknowledge its
# cancellation (run its `finally`) before it gives up on it and raises anyway.
CANCEL_GRACE_MS = 10
# The default of `write_grace_ms`: how long a write that is running when the
# deadline or an abort fires gets to commit or roll back, so that the history
# can say which.
WRITE_GRACE_MS = 1000

# A batch of more calls than this, and more than max_calls has left, is refused before it is copied, and its
# error keeps only its first MAX_REFUSED_SHOWN calls: refusing a million costs what refusing a few does.
MAX_REFUSED_COPIED = 1000
MAX_REFUSED_SHOWN = 10

# The refusals a model can correct: with max_refusals > 0 they go back to it as the calls' results.
# A malformed decision, the budgets, the deadline, an abort and a failing tool still end the run.
REFUSALS = (UnknownToolError, ToolArgsError, DuplicateCallIdError, RepeatedCallError, ModelOutputError)

Message = dict[str, Any]


@dataclass
class Usage:
    """What a run spent: model calls, tool runs, history size, wall time, writes, refusals, tokens.

    Tokens are what a real model reports (the adapters of `agentlab.models`);
    fakes report none, and then the repr leaves them out.
    """

    turns: int = 0
    calls: int = 0
    chars: int = 0
    elapsed_ms: float = 0.0
    writes: int = 0
    refusals: int = 0
    input_tokens: int = 0
    output_tokens: int = 0

    @property
    def tokens(self) -> int:
        """Input and output tokens together: what `max_tokens` counts."""
        return self.input_tokens + self.output_tokens

    def __repr__(self) -> str:
        shown = [f for f in dataclasses.fields(self) if not f.name.endswith("_tokens") or getattr(self, f.name)]
        return f"Usage({', '.join(f'{f.name}={getattr(self, f.name)!r}' for f in shown)})"


@dataclass(frozen=True)
class Limits:
    """The limits a run was given, kept with its result so a trace can show used vs allowed."""

    max_turns: int
    max_calls: int
    timeout_ms: float
    max_chars: int
    max_writes: int = 0
    max_refusals: int = 0
    # Not a budget: how long past a stop a write in flight may settle. Left out of the repr, which shows budgets.
    write_grace_ms: float = field(default=WRITE_GRACE_MS, repr=False)
    max_tokens: int | None = None  # None: no token limit (and no place in the repr)

    def __repr__(self) -> str:
        shown = [f for f in dataclasses.fields(self) if f.repr and (f.name != "max_tokens" or self.max_tokens)]
        return f"Limits({', '.join(f'{f.name}={getattr(self, f.name)!r}' for f in shown)})"


@dataclass
class AgentResult:
    """A finished run: the final `text`, the whole `history`, the `usage` and the `limits`."""

    text: str
    history: list[Message]
    usage: Usage
    limits: Limits | None = None

    def _repr_html_(self) -> str:
        from agentlab.trace import render_html

        return render_html(self)


class Messages(Sequence[Message]):
    """What the model sees: the history as it was when the model was called.

    Read-only, and every message you read is a fresh copy, so nothing the
    model does to it reaches the loop's own history. Costs nothing to make,
    however long the history is: no message is copied until it is read.
    """

    __slots__ = ("_history", "_length")

    def __init__(self, history: list[Message], length: int) -> None:
        self._history, self._length = history, length

    def __len__(self) -> int:
        return self._length

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return [copy_message(self._history[i]) for i in range(self._length)[index]]
        return copy_message(self._history[range(self._length)[operator.index(index)]])

    def __iter__(self) -> Iterator[Message]:
        return (copy_message(self._history[i]) for i in range(self._length))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (Messages, list, tuple)):
            return list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Messages({list(self)!r})"


def copy_message(message: Message) -> Message:
    """A copy of one history message that shares nothing mutable with it."""
    copied = dict(message)
    if "calls" in copied:
        copied["calls"] = [
            {"id": call["id"], "name": call["name"], "args": copy_json(call["args"])} for call in copied["calls"]
        ]
    if "usage" in copied:  # a real model's tokens for the turn
        copied["usage"] = dict(copied["usage"])
    return copied


def context_size(message: Message) -> int:
    """Characters a message adds to the context: its content, or its calls as compact JSON."""
    if "calls" in message:
        return len(compact_json(message["calls"]))
    return len(message["content"])


@dataclass(slots=True)  # not frozen: a frozen dataclass costs a microsecond per call to build
class _Checked:
    """One call of a batch that passed every check and may now run."""

    id: str
    name: str
    args: dict[str, Any]  # the copy the history records
    value: Any  # what validate returned (or a second copy of args); what run gets
    tool: Tool


async def agent_loop(
    input: str,
    model: Callable[..., Any],
    tools: Mapping[str, Tool] | None = None,
    *,
    max_turns: int = 6,
    max_calls: int = 8,
    timeout_ms: float = 5000,
    max_chars: int = 50_000,
    signal: AbortSignal | None = None,
    forbid_repeats: bool = False,
    approve: Callable[..., Any] | None = None,
    max_writes: int = 4,
    write_grace_ms: float | None = None,
    max_tokens: int | None = None,
    max_refusals: int = 0,
) -> AgentResult:
    """Run `model` with `tools` on `input` until it answers or a limit stops it.

    Returns an `AgentResult`. Raises an `AgentError` subclass when a rule is
    enforced, or the signal's own reason when `signal` is aborted.
    `forbid_repeats=True` also refuses the same tool with the same args twice.
    `approve(call)` is asked before each write (a tool with `writes=True`) and
    answers True, False or an `Approval`; without it, no write runs.
    `write_grace_ms` (default `WRITE_GRACE_MS`) is how long past a stop the
    run waits for a write in flight to commit or roll back.
    `max_tokens` limits the tokens a real model reports spending in the run.

    `max_refusals` (default 0) is how many refused batches go back to the
    model instead of ending the run; see `_Run.return_refusal`. Only a mistake
    the model can fix is returned (an unknown tool, invalid args, a malformed
    call, a duplicate call id, a repeat under `forbid_repeats`); the limits
    still end the run. A refused batch costs a turn and history characters,
    but not `max_calls`, which counts tool runs: nothing of it ran.
    """
    limits = Limits(
        _count("max_turns", max_turns),
        _count("max_calls", max_calls),
        _duration("timeout_ms", timeout_ms),
        _count("max_chars", max_chars),
        _count("max_writes", max_writes),
        _count("max_refusals", max_refusals),
        WRITE_GRACE_MS if write_grace_ms is None else _duration("write_grace_ms", write_grace_ms),
        None if max_tokens is None else _count("max_tokens", max_tokens),
    )
    run = _Run(input, model, tools, limits, signal, forbid_repeats, approve)
    return await run.race()


class _Run:
    """The state of one run, and the checks that guard it."""

    def __init__(
        self,
        input: str,
        model: Callable[..., Any],
        tools: Mapping[str, Tool] | None,
        limits: Limits,
        signal: AbortSignal | None,
        forbid_repeats: bool,
        approve: Callable[..., Any] | None,
    ) -> None:
        if not isinstance(input, str):
            raise ConfigError(f"input must be a string (the user's message), not {type(input).__name__}")
        input = str.__str__(input)  # plain data: a subclass's __len__ could lie to the context budget
        if not callable(model):
            raise ConfigError(f"model must be a function model(messages, signal), not {type(model).__name__}")
        if signal is not None and not isinstance(signal, AbortSignal):
            raise ConfigError("signal must be an AbortSignal, such as AbortController().signal")
        if approve is not None and not callable(approve):
            raise ConfigError("approve must be a function approve(call) that answers True or False")
        self.limits = limits
        self.max_turns, self.max_calls, self.timeout_ms = limits.max_turns, limits.max_calls, limits.timeout_ms
        self.max_chars, self.max_writes = limits.max_chars, limits.max_writes
        self.max_refusals = limits.max_refusals
        self.forbid_repeats = bool(forbid_repeats)
        self.model = Callee(model, 2, "model")
        self.approve = Callee(approve, 2, "approval") if approve is not None else None
        self.tools = _registry(tools)
        self.writing: _Checked | None = None  # the write in flight, if any
        self.outside = signal
        self.controller = AbortController()  # the run's own signal, handed to model and tools
        self.history: list[Message] = []
        self.proposal: Any = None  # the loop's own copy of the decision it is checking
        self.checking = 0  # the number of the call of the batch being checked
        self.usage = Usage()
        self.seen_ids: dict[str, int] = {}  # call id -> the turn that used it
        self.seen_calls: set[tuple[str, str]] = set()  # (name, args as JSON), for forbid_repeats
        self.loop = asyncio.get_running_loop()
        self.started = self.loop.time()
        self.deadline = self.started + self.timeout_ms / 1000
        self.append({"role": "user", "content": input})

    # -- the loop itself ----------------------------------------------------

    async def steps(self) -> AgentResult:
        """Ask the model, check its proposal, run it, repeat."""
        while True:
            self.check_before_model_call()
            self.usage.turns += 1
            decision = await self.ask_model()
            kind, payload = self.check_decision(decision)
            spent = self.spend_tokens(self.proposal)  # a real model's tokens for this turn, against max_tokens
            if kind == "final":
                return self.finish(payload, decision, spent)
            try:
                batch = self.check_batch(payload, decision)  # the whole batch, before anything runs
            except REFUSALS as refusal:
                self.return_refusal(payload, refusal, spent)  # back to the model, within max_refusals; or raises it
                continue
            calls = [{"id": c.id, "name": c.name, "args": c.args} for c in batch]
            self.append({"role": "assistant", "calls": calls, **spent})
            for call in batch:
                self.check_not_stopped()
                self.usage.calls += 1
                content = await (self.run_write(call) if call.tool.writes else self.run_tool(call))
                self.append({"role": "tool", "call_id": call.id, "content": content})

    def check_before_model_call(self) -> None:
        """The signal, the deadline, the turn budget, then the context budget."""
        self.check_not_stopped()
        if self.usage.turns >= self.max_turns:
            raise self.fail(
                TurnBudgetError,
                f"turn budget exhausted: the model was called {_plural(self.usage.turns, 'time')} and "
                f"max_turns={self.max_turns}; raise max_turns, or make the model answer sooner",
                value=self.max_turns,
            )
        if self.usage.chars > self.max_chars:
            raise self.fail(
                ContextBudgetError,
                f"context budget exceeded: the history holds {self.usage.chars} characters and "
                f"max_chars={self.max_chars}; raise max_chars, or keep inputs and tool results shorter",
                value=self.max_chars,
            )
        if self.limits.max_tokens is not None and self.usage.tokens >= self.limits.max_tokens:
            raise self.token_budget_error()

    def spend_tokens(self, decision: Any) -> dict[str, Any]:
        """Count the tokens the model reported for this turn (`decision["usage"]`); past max_tokens, refuse it.

        Returns what the history's message for this turn records: `{"usage": {...}}`, or {} for a fake.
        """
        tokens = decision.get("usage") if isinstance(decision, dict) else None
        if tokens is None:
            return {}
        self.usage.input_tokens += tokens["input_tokens"]
        self.usage.output_tokens += tokens["output_tokens"]
        if self.limits.max_tokens is not None and self.usage.tokens > self.limits.max_tokens:
            raise self.token_budget_error(rejected=decision)
        return {"usage": dict(tokens)}

    def token_budget_error(self, **details: Any) -> AgentError:
        return self.fail(
            TokenBudgetError,
            f"token budget exhausted: the model has used {self.usage.tokens} tokens and "
            f"max_tokens={self.limits.max_tokens}; raise max_tokens, or keep the history and answers shorter",
            value=self.limits.max_tokens,
            **details,
        )

    def check_not_stopped(self) -> None:
        """Nothing starts after an abort or the deadline: no model call, no tool, no write."""
        if self.outside is not None and self.outside.aborted:
            raise self.aborted(self.outside.reason)
        if self.loop.time() >= self.deadline:
            raise self.deadline_error()
        if self.controller.signal.aborted:  # the caller cancelled the run, and this task ignored it
            raise self.controller.signal.reason  # type: ignore[misc]

    async def ask_model(self) -> Any:
        """Call the model with a read-only snapshot of the history."""
        snapshot = Messages(self.history, len(self.history))
        try:
            return await self.model(snapshot, self.controller.signal)
        except AgentError as error:  # an adapter's own verdict: keep it, add the history
            tokens = getattr(error, "tokens", None)
            if _token_counts(tokens):  # a real model's answer the adapter refused was still paid for
                self.usage.input_tokens += tokens["input_tokens"]
                self.usage.output_tokens += tokens["output_tokens"]
            raise self.attach(error) from error.__cause__
        except BaseException as error:
            if _passes_through(error):
                raise
            raise self.fail(ModelError, f"the model raised {_describe(error)}") from error

    def check_decision(self, decision: Any) -> tuple[str, Any]:
        """A decision is {"kind": "final", "text": str} or {"kind": "tools", "calls": [...]}.

        The trust boundary: the decision is first copied as plain JSON data,
        so from here on the loop works on its own copy, whatever the model
        later does to the objects it returned.
        """
        shape = 'expected {"kind": "final", "text": "..."} or {"kind": "tools", "calls": [...]}'
        proposed = _proposed_calls(decision)
        if proposed is not None and proposed > MAX_REFUSED_COPIED:  # refused on its length, before copying it
            self.check_batch_size(proposed, decision)
        try:
            decision = copy_json(decision)
        except NotJSONError as error:
            raise self.malformed(f"malformed decision: it is not JSON data: {error}", decision) from None
        except Exception as error:  # a hostile object that raises while being read
            raise self.malformed(f"malformed decision: reading it raised {_describe(error)}", decision) from None
        if not isinstance(decision, dict):
            raise self.malformed(f"malformed decision: {shape}, got {_describe_value(decision)}", decision)
        kind = decision.get("kind")
        wanted = {"final": "text", "tools": "calls"}.get(kind) if isinstance(kind, str) else None
        if wanted is None or set(decision) - {"usage"} != {"kind", wanted}:
            raise self.malformed(f"malformed decision: {shape}, got the keys {_keys(decision)}", decision)
        if "usage" in decision and not _token_counts(decision["usage"]):
            problem = f'"usage" must be {{"input_tokens": int, "output_tokens": int}}, got {decision["usage"]!r:.80}'
            raise self.malformed(f"malformed decision: {problem}", decision)
        payload = decision[wanted]
        if kind == "final" and not isinstance(payload, str):
            problem = f"the final text must be a string, got {_describe_value(payload)}"
            raise self.malformed(f"malformed decision: {problem}", decision)
        if kind == "tools" and (not isinstance(payload, list) or not payload):
            problem = f"a tools decision needs a non-empty list of calls, got {_describe_value(payload)}"
            raise self.malformed(f"malformed decision: {problem}", decision)
        self.proposal = decision  # the loop's own copy: an error may carry it as it is
        return kind, payload

    def check_batch_size(self, count: int, decision: Any) -> None:
        """A batch may not ask for more calls than max_calls has left."""
        left = self.max_calls - self.usage.calls
        if count > left:
            raise self.fail(
                ToolBudgetError,
                f"tool budget exhausted: the model asked for {_plural(count, 'tool call')} but {left} of "
                f"max_calls={self.max_calls} remain; nothing of this batch ran. Raise max_calls, "
                f"or make the model ask for fewer calls",
                value=self.max_calls,
                rejected=decision if decision is self.proposal else _first_calls(decision, MAX_REFUSED_SHOWN),
            )

    def check_batch(self, calls: Sequence[Any], decision: Any) -> list[_Checked]:
        """Check every call of the batch; any failure runs nothing of it."""
        self.check_batch_size(len(calls), decision)
        checked: list[_Checked] = []
        batch_ids: set[str] = set()
        batch_calls: set[tuple[str, str]] = set()
        for number, call in enumerate(calls, 1):
            self.checking = number  # the call a refusal is about
            call_id, name, args = self.check_call_shape(call, number, decision)
            if call_id in self.seen_ids or call_id in batch_ids:
                where = f"in turn {self.seen_ids[call_id]}" if call_id in self.seen_ids else "earlier in this batch"
                raise self.fail(
                    DuplicateCallIdError,
                    f"duplicate call id {call_id!r}: it was used {where}; every call of a run needs its own id "
                    f"so that each result is tied to one call. Nothing of this batch ran",
                    rejected=decision,
                )
            batch_ids.add(call_id)
            tool = self.tools.get(name)
            if tool is None:
                known = ", ".join(sorted(self.tools)) or "(none)"
                raise self.fail(
                    UnknownToolError,
                    f"unknown tool {name!r} (call {call_id!r}); the tools are: {known}. Nothing of this batch ran",
                    rejected=decision,
                )
            if self.forbid_repeats:
                key = (name, compact_json(_sorted_keys(args)))
                if key in self.seen_calls or key in batch_calls:
                    raise self.fail(
                        RepeatedCallError,
                        f"repeated tool call without progress: {name} was already called with {key[1]} "
                        f"(call {call_id!r}); nothing of this batch ran",
                        rejected=decision,
                    )
                batch_calls.add(key)
            checked.append(_Checked(call_id, name, args, self.validate(tool, name, call_id, args, decision), tool))
        self.check_writes(checked, decision)
        for call in checked:
            self.seen_ids[call.id] = self.usage.turns
        self.seen_calls |= batch_calls
        return checked

    def return_refusal(self, calls: list[Any], refusal: AgentError, spent: dict[str, Any]) -> None:
        """Give a refused batch back to the model, if `max_refusals` allows; otherwise raise the refusal.

        The history gets the batch as proposed, then exactly one tool message
        per call: the refused call's says what was wrong, in the words of its
        error; the others, that they did not run. Nothing of the batch ran.

        A call whose id cannot carry a result (missing, not a string, empty,
        or used before) is recorded under an id the loop makes, "refused-<turn>-<n>"
        (n is the call's place in the batch), and its message is tied to that id;
        the refusal quotes the id the model sent. Every id of the batch then
        counts as used: one id, one tool message, for the whole run.
        """
        if self.usage.refusals >= self.max_refusals:
            if self.max_refusals:
                spent = "1 refused batch was" if self.max_refusals == 1 else f"{self.max_refusals} refused batches were"
                refusal.args = (
                    f"{refusal.message}. The refusal budget is spent: {spent} already returned to the model "
                    f"(max_refusals={self.max_refusals})",
                )
            raise refusal
        self.usage.refusals += 1
        recorded: list[dict[str, Any]] = []
        for number, call in enumerate(calls, 1):
            call_id = call.get("id") if isinstance(call, dict) else None
            if not isinstance(call_id, str) or not call_id or call_id in self.seen_ids:
                call_id = self.loop_made_id(number)
            self.seen_ids[call_id] = self.usage.turns
            name = call.get("name") if isinstance(call, dict) else None
            args = call.get("args") if isinstance(call, dict) else None
            recorded.append(
                {
                    "id": call_id,
                    "name": name if isinstance(name, str) else "",
                    "args": args if isinstance(args, dict) else {},
                }
            )
        self.append({"role": "assistant", "calls": recorded, **spent})
        refused_id = recorded[self.checking - 1]["id"]
        for number, call in enumerate(recorded, 1):
            if number == self.checking:
                content = {"refused": refusal.message}
            else:
                content = {"not_run": f"call {refused_id!r} of this batch was refused; nothing of this batch ran"}
            self.append({"role": "tool", "call_id": call["id"], "content": compact_json(content)})

    def loop_made_id(self, number: int) -> str:
        """An id for a refused call whose own id cannot carry its result; never one the run has used.

        Letters, digits and dashes only, the ids every provider accepts.
        """
        made, again = f"refused-{self.usage.turns}-{number}", 0
        while made in self.seen_ids:
            again += 1
            made = f"refused-{self.usage.turns}-{number}-{again}"
        return made

    def check_writes(self, batch: list[_Checked], decision: Any) -> None:
        """Writes need an approval policy, and must fit what is left of `max_writes`."""
        writes = [call for call in batch if call.tool.writes]
        if not writes:
            return
        if self.approve is None:
            raise self.fail(
                ApprovalError,
                f"approval required: {writes[0].name} (call {writes[0].id!r}) changes data, and no approve policy "
                f"was given; pass approve=... to agent_loop to allow or deny each write. Nothing of this batch ran",
                rejected=decision,
            )
        left = self.max_writes - self.usage.writes
        if len(writes) > left:
            raise self.fail(
                WriteBudgetError,
                f"write budget exhausted: the model asked for {_plural(len(writes), 'write')} but {left} of "
                f"max_writes={self.max_writes} remain; nothing of this batch ran. Raise max_writes, "
                f"or make the model write less",
                value=self.max_writes,
                rejected=decision,
            )

    def check_call_shape(self, call: Any, number: int, decision: Any) -> tuple[str, str, dict[str, Any]]:
        """A call is {"id": non-empty str, "name": str, "args": dict}."""
        if not isinstance(call, dict) or set(call) != {"id", "name", "args"}:
            got = f"the keys {_keys(call)}" if isinstance(call, dict) else _describe_value(call)
            problem = f'expected {{"id": ..., "name": ..., "args": {{...}}}}, got {got}'
        elif not isinstance(call["id"], str) or not call["id"]:
            problem = f"the id must be a non-empty string, got {_describe_value(call['id'])}"
        elif not isinstance(call["name"], str):
            problem = f"the tool name must be a string, got {_describe_value(call['name'])}"
        elif not isinstance(call["args"], dict):
            problem = f"the args must be a dict, got {_describe_value(call['args'])}"
        else:
            return call["id"], call["name"], call["args"]
        raise self.malformed(f"malformed call #{number}: {problem}; nothing of this batch ran", decision)

    def validate(self, tool: Tool, name: str, call_id: str, args: dict[str, Any], decision: Any) -> Any:
        """Run the tool's own check on a second copy; what it returns is what `run` gets."""
        mine = copy_json(args)
        try:
            value = tool.validate(mine)
        except BaseException as error:
            if _passes_through(error):
                raise
            raise self.fail(
                ToolArgsError,
                f"invalid args for {name} (call {call_id!r}): {_readable(str, error)}; nothing of this batch ran",
                rejected=decision,
            ) from error
        if value is None:  # the common case, and the cheapest to tell
            return mine
        if inspect.isawaitable(value):
            if inspect.iscoroutine(value):
                value.close()
            raise self.fail(
                ConfigError, f"the validate of tool {name!r} returned an awaitable; it must be a plain function"
            )
        return value

    async def run_tool(self, call: _Checked) -> str:
        """Run one checked call; its result goes back as compact JSON."""
        runner = call.tool.runner
        context = (ToolCall(call.id, call.name, copy_json(call.args)),) if runner.takes >= 3 else ()
        try:
            result = await runner(call.value, self.controller.signal, *context)
        except BaseException as error:
            if _passes_through(error):
                raise
            raise self.fail(ToolError, f"tool {call.name} raised {_describe(error)} (call {call.id!r})") from error
        try:
            return compact_json(result)
        except NotJSONError as error:
            raise self.fail(
                ToolError,
                f"tool {call.name} returned a result that is not JSON (call {call.id!r}): {error}; "
                f"return dicts, lists, strings, numbers, booleans or None",
            ) from None

    async def run_write(self, call: _Checked) -> str:
        """Ask the approval policy, then run the write; a denial goes back to the model as the result."""
        approval = await self.ask_approval(call)
        if not approval.allowed:
            return compact_json({"denied": True, "reason": approval.reason or "the write was not approved"})
        self.check_not_stopped()  # waiting for approval took time
        self.usage.writes += 1
        self.writing = call
        try:
            return await self.run_tool(call)
        except ToolError as error:
            if self.controller.signal.aborted:  # stopped mid-write: record what the tool reported, no more
                outcome = _write_outcome(error.__cause__ or error)
                self.append({"role": "tool", "call_id": call.id, "content": compact_json(outcome)})
            raise
        finally:
            self.writing = None

    async def ask_approval(self, call: _Checked) -> Approval:
        """The policy sees the call (with a copy of its checked args); it answers True, False or an Approval."""
        try:
            answer = await self.approve(ToolCall(call.id, call.name, copy_json(call.args)), self.controller.signal)  # type: ignore[misc]
        except BaseException as error:
            if _passes_through(error):
                raise
            message = (
                f"approval failed: the approve policy raised {_describe(error)} for {call.name} (call {call.id!r})"
            )
            raise self.fail(ApprovalError, f"{message}; nothing was written") from error
        if type(answer) is bool:
            return Approval(answer)
        if isinstance(answer, Approval):  # read as plain data: a subclass, or a field set by hand, could lie
            fields = object.__getattribute__(answer, "__dict__")
            fields = fields if type(fields) is dict else {}
            allowed, reason = fields.get("allowed"), fields.get("reason")
            if type(allowed) is bool and isinstance(reason, str):
                return Approval(allowed, str.__str__(reason))
        raise self.fail(
            ApprovalError,
            f"approval failed: the approve policy answered {_describe_value(answer)} for {call.name} "
            f"(call {call.id!r}); it must answer True, False or Approval(allowed, reason) with allowed a bool "
            f"and reason a string. Nothing was written",
        )

    def finish(self, text: str, decision: Any, spent: dict[str, Any]) -> AgentResult:
        """The final answer, if it fits the output budget."""
        if len(text) > self.max_chars:
            raise self.fail(
                OutputBudgetError,
                f"output budget exceeded: the final text has {len(text)} characters and "
                f"max_chars={self.max_chars}; raise max_chars, or ask the model for a shorter answer",
                value=self.max_chars,
                rejected=decision,
            )
        self.append({"role": "assistant", "content": text, **spent})
        return AgentResult(text=text, history=self.history, usage=self.usage_now(), limits=self.limits)

    # -- the race against the clock and the outside signal ------------------

    async def race(self) -> AgentResult:
        """Run `steps` as a task and race it against the deadline and the signal.

        Checking the clock between steps is not enough: a model that never
        answers would never reach the next check. So the steps run as a task,
        and whichever comes first wins: the task's end, the deadline, or an
        abort. On a deadline or an abort the loop aborts its signal (telling
        the model and tools to stop), cancels the task, gives it
        `CANCEL_GRACE_MS` to run its `finally` blocks, and raises.
        """
        if self.outside is not None and self.outside.aborted:
            raise self.aborted(self.outside.reason)
        task = asyncio.ensure_future(self.steps())
        woken = self.loop.create_future()

        def wake(why: str) -> None:
            if not woken.done():
                woken.set_result(why)

        task.add_done_callback(lambda _: wake("done"))
        timer = self.loop.call_at(self.deadline, wake, "deadline")
        forget_signal = (
            self.outside.add_callback(lambda _: _call_soon_threadsafe(self.loop, wake, "abort"), first=True)
            if self.outside is not None
            else lambda: None
        )
        try:
            why = await woken
        except asyncio.CancelledError:  # our caller gave up on us
            self.stop_callees(AbortError("aborted: the caller cancelled the run"))
            _abandon(task)
            raise
        finally:
            timer.cancel()
            forget_signal()
        if task.done():  # it finished (or failed) before we looked: its outcome stands
            return task.result()
        error = self.deadline_error() if why == "deadline" else self.aborted(self.outside.reason)  # type: ignore[union-attr]
        self.stop_callees(error)
        if self.writing is not None:  # let the write commit or roll back, so that the history can say which
            try:
                await asyncio.wait([task], timeout=self.limits.write_grace_ms / 1000)
            except asyncio.CancelledError:  # our caller gave up on us during the grace: the task is abandoned too
                _abandon(task)
                raise
            if isinstance(error, DeadlineError) and error.value == self.timeout_ms:  # ours: say why it may be late
                error.args = (
                    f"{error.message}. A write was running: it was given up to "
                    f"write_grace_ms={_number(self.limits.write_grace_ms)} more to commit or roll back",
                )
        if self.writing is not None:
            unsettled = {"outcome": "unknown", "note": "the write was still running when the run stopped"}
            self.append({"role": "tool", "call_id": self.writing.id, "content": compact_json(unsettled)})
        if isinstance(error, AgentError):
            self.attach(error)  # the history as the run stopped; nothing the abandoned task does from here on
        _abandon(task)  # whatever it ends with, now or after the grace, ours is the verdict
        await asyncio.wait([task], timeout=CANCEL_GRACE_MS / 1000)
        raise error

    def stop_callees(self, reason: BaseException) -> None:
        """Abort the signal the model and tools hold.

        Their listeners run on a worker thread, not here: one that blocks must
        not hold the event loop, and so the deadline, hostage.
        """
        listeners = self.controller.abort_later(reason)
        if listeners is not None:
            threading.Thread(target=listeners, name="agentlab abort listeners", daemon=True).start()

    # -- bookkeeping ---------------------------------------------------------

    def append(self, message: Message) -> None:
        self.history.append(message)
        self.usage.chars += context_size(message)

    def usage_now(self) -> Usage:
        elapsed = round((self.loop.time() - self.started) * 1000, 3)
        return dataclasses.replace(self.usage, elapsed_ms=elapsed)

    def fail(self, kind: type[AgentError], message: str, **details: Any) -> AgentError:
        """An error of `kind` that carries a copy of the history and the usage so far."""
        rejected = details.pop("rejected", None)
        return kind(
            message,
            history=[copy_message(m) for m in self.history],
            usage=self.usage_now(),
            limits=self.limits,
            rejected=rejected if rejected is self.proposal else _safe_copy(rejected),  # ours: no second copy
            **details,
        )

    def malformed(self, message: str, decision: Any) -> AgentError:
        return self.fail(ModelOutputError, message, rejected=decision)

    def attach(self, error: AgentError) -> AgentError:
        """Give an AgentError raised by a callee the run's history and usage."""
        error.history = [copy_message(m) for m in self.history]
        error.usage = self.usage_now()
        error.limits = self.limits
        return error

    def deadline_error(self) -> AgentError:
        return self.fail(
            DeadlineError,
            f"deadline exceeded: the run took longer than timeout_ms={_number(self.timeout_ms)} "
            f"(turn {self.usage.turns}, {_plural(self.usage.calls, 'tool call')} done); raise timeout_ms, "
            f"or use a faster model or tools",
            value=self.timeout_ms,
        )

    def aborted(self, reason: Any) -> BaseException:
        """The outside signal's reason is raised as it is; an AgentError gets the history."""
        if not isinstance(reason, BaseException):  # a signal (a subclass) that says aborted, but not why
            reason = self.fail(AbortError, "aborted: the signal reports aborted, with no reason")
        return self.attach(reason) if isinstance(reason, AgentError) else reason


# -- helpers ------------------------------------------------------------------


def _registry(tools: Mapping[str, Any] | None) -> dict[str, Tool]:
    """A private snapshot of the tools: exact string keys only, nothing inherited."""
    if tools is None:
        return {}
    if not isinstance(tools, Mapping):
        raise ConfigError(f"tools must be a dict of name -> Tool, not {type(tools).__name__}")
    registry = {}
    for name, tool in tools.items():
        if not isinstance(name, str):
            raise ConfigError(f"tool names must be strings, got {name!r}")
        registry[str.__str__(name)] = Tool.of(name, tool)
    return registry


def _count(name: str, value: Any) -> int:
    """A limit as a plain int (an int subclass is read with int's own method: it cannot lie)."""
    plain = int.__int__(value) if isinstance(value, int) and not isinstance(value, bool) else -1
    if plain < 0:
        raise ConfigError(f"{name} must be a whole number >= 0, got {_describe_value(value)}")
    return plain


def _duration(name: str, value: Any) -> float:
    """Milliseconds as a plain float; 10**400 cannot be one, and is refused like infinity."""
    plain = math.nan
    if isinstance(value, int) and not isinstance(value, bool):
        plain = float(int.__int__(value)) if int.__int__(value).bit_length() <= 1000 else math.inf
    elif isinstance(value, float):
        plain = float.__float__(value)
    if not (math.isfinite(plain) and plain >= 0):
        raise ConfigError(f"{name} must be a finite number of milliseconds >= 0, got {_describe_value(value)}")
    return plain


def _token_counts(value: Any) -> bool:
    """A decision's optional "usage": exactly input_tokens and output_tokens, whole numbers >= 0."""
    return (
        isinstance(value, dict)
        and set(value) == {"input_tokens", "output_tokens"}
        and all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in value.values())
    )


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


def _passes_through(error: BaseException) -> bool:
    """Errors the loop must never swallow: Ctrl-C, exit, and a real cancellation of this task."""
    if isinstance(error, (KeyboardInterrupt, SystemExit)):
        return True
    if isinstance(error, asyncio.CancelledError):
        task = asyncio.current_task()
        return task is not None and task.cancelling() > 0
    return False


def _readable(show: Callable[[Any], str], value: Any) -> str:
    """`str` or `repr` of something a model or tool made: that may raise too, and must not escape."""
    try:
        return show(value)
    except Exception:
        return f"(a {type(value).__name__} that cannot be shown)"


def _describe(error: BaseException) -> str:
    text = _readable(str, error)
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def _describe_value(value: Any) -> str:
    return f"{glimpse(value, 77)} ({type(value).__name__})"  # bounded, and runs none of the value's code


def _keys(mapping: Any) -> list[str]:
    try:
        return sorted(repr(key) if not isinstance(key, str) else key for key in mapping)
    except Exception:
        return ["(unreadable)"]


def _sorted_keys(value: Any) -> Any:
    """JSON data with every dict's keys sorted, so that {a, b} and {b, a} are the same call."""
    if isinstance(value, dict):
        return {key: _sorted_keys(value[key]) for key in sorted(value)}
    if isinstance(value, list):
        return [_sorted_keys(item) for item in value]
    return value


def _safe_copy(value: Any) -> Any:
    """A copy of a rejected decision for the error and the trace; a bounded picture of it if not JSON."""
    if value is None:
        return None
    try:
        return copy_json(value)
    except Exception:
        return glimpse(value, 2000)


def _proposed_calls(decision: Any) -> int | None:
    """How many calls a decision shaped {"kind": "tools", "calls": [...]} proposes; None for any other shape.

    Read with the base types' own methods, without copying the decision or
    running any of its code, so that a batch of a million calls is refused
    for its length at the cost of a few steps.
    """
    if not issubclass(type(decision), dict) or dict.__len__(decision) != 2:
        return None
    fields = {key: value for key, value in dict.items(decision) if type(key) is str}
    kind, calls = fields.get("kind"), fields.get("calls")
    if not (isinstance(kind, str) and str.__eq__(kind, "tools")):
        return None
    if issubclass(type(calls), list):
        return list.__len__(calls)
    return tuple.__len__(calls) if issubclass(type(calls), tuple) else None


def _first_calls(decision: Any, count: int) -> Any:
    """A refused batch, as its first `count` calls (copied safely): all the error needs to show."""
    calls = next(value for key, value in dict.items(decision) if type(key) is str and key == "calls")
    first = list(itertools.islice(list.__iter__(calls) if isinstance(calls, list) else tuple.__iter__(calls), count))
    return {"kind": "tools", "calls": [_safe_copy(call) for call in first]}


def _write_outcome(error: BaseException) -> dict[str, Any]:
    """What the history records of a write that failed after a stop: what the tool reported, no more.

    A tool says it rolled back by raising an exception with `rolled_back = True`
    (the store's `WriteRolledBack` does); anything else may have committed first.
    """
    if getattr(error, "rolled_back", None) is True:
        return {"rolled_back": True, "error": _describe(error)}
    return {"outcome": "unknown", "error": _describe(error)}


def _retrieve(task: asyncio.Task[Any]) -> None:
    """Mark an abandoned task's own error as seen, so asyncio does not log it as never retrieved."""
    _ABANDONED.discard(task)
    if not task.cancelled():
        task.exception()


# Tasks the loop gave up on that have not ended yet (a tool may swallow its cancellation). Held here so that
# the garbage collector cannot destroy one while it is pending ("Task was destroyed but it is pending").
_ABANDONED: set[asyncio.Task[Any]] = set()


def _abandon(task: asyncio.Task[Any]) -> None:
    """Cancel a task the run no longer waits for, and keep it alive until it ends."""
    task.cancel()
    if not task.done():
        _ABANDONED.add(task)
    task.add_done_callback(_retrieve)


def _call_soon_threadsafe(loop: asyncio.AbstractEventLoop, callback: Callable[..., Any], *args: Any) -> None:
    with contextlib.suppress(RuntimeError):  # the loop is closed: the run is long over
        loop.call_soon_threadsafe(callback, *args)


__all__ = [
    "CANCEL_GRACE_MS",
    "WRITE_GRACE_MS",
    "AgentResult",
    "Limits",
    "Messages",
    "Usage",
    "agent_loop",
]
