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

Reaching a limit exactly is allowed; the step past it fails with an
`AgentError` subclass that says which limit, and carries the history so far.

Tools that change data (`Tool(..., writes=True)`) need more: each write runs
only if the `approve` policy allows it, within `max_writes`, one at a time,
and never after the deadline or an abort. A write still running when the run
is stopped gets `write_grace_ms` more to commit or roll back, so that the
history can say which: the one case where a run ends later than its deadline
or its abort, by at most that grace (the error says so when it waited). That
is a layer of its own, `agentlab/loop_writes.py`: skip it until notebook 09a.
Giving a refused batch back to the model (`max_refusals`) is another,
`agentlab/loop_refusals.py`: notebook 11.

Read this file top to bottom: `agent_loop` sets up a `_Run`; `_Run.steps` is
the loop itself; the checks follow in the order they happen; `_Run.race` is
what makes the deadline and the abort hold even against a model or a tool
that ignores the signal or blocks. The history and the result are in
`history.py` and `result.py`; `untrusted.py` says why some lines read values
in an odd way (`str.__str__(input)`): models and tools may hand back hostile ones.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agentlab import untrusted
from agentlab.abort import AbortController, AbortSignal
from agentlab.callees import Callee, abandon, call_soon_threadsafe, held_the_loop, in_background, passes_through
from agentlab.errors import (
    AbortError,
    AgentError,
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
    number_text,
    plural,
)
from agentlab.history import Message, Messages, context_size, copy_message
from agentlab.jsonc import NotJSONError, compact_json, copy_json, sorted_keys
from agentlab.loop_refusals import RefusalPath
from agentlab.loop_writes import WritePath
from agentlab.result import WRITE_GRACE_MS, AgentResult, Limits, Usage
from agentlab.tools import Tool, ToolCall, registry

# How long the loop waits for an abandoned model or tool to acknowledge its
# cancellation (run its `finally`) before it gives up on it and raises anyway.
CANCEL_GRACE_MS = 10

# A batch of more calls than this, and more than max_calls has left, is refused before it is
# copied, and its error keeps only its first MAX_REFUSED_SHOWN calls: refusing a million
# costs what refusing a few does.
MAX_REFUSED_COPIED = 1000
MAX_REFUSED_SHOWN = 10

# The refusals a model can correct: with max_refusals > 0 they go back to it as the calls'
# results. A malformed decision, the budgets, the deadline, an abort and a failing tool still
# end the run.
REFUSALS = (UnknownToolError, ToolArgsError, DuplicateCallIdError, RepeatedCallError, ModelOutputError)


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
    model instead of ending the run (agentlab/loop_refusals.py). Only a mistake
    the model can fix is returned (an unknown tool, invalid args, a malformed
    call, a duplicate call id, a repeat under `forbid_repeats`); the limits
    still end the run. A refused batch costs a turn and history characters,
    but not `max_calls`, which counts tool runs: nothing of it ran.
    """
    # Each limit read as a plain number: an int subclass could lie about its value (untrusted.py).
    count, ms = untrusted.whole_number, untrusted.milliseconds
    limits = Limits(
        count("max_turns", max_turns),
        count("max_calls", max_calls),
        ms("timeout_ms", timeout_ms),
        count("max_chars", max_chars),
        count("max_writes", max_writes),
        count("max_refusals", max_refusals),
        WRITE_GRACE_MS if write_grace_ms is None else ms("write_grace_ms", write_grace_ms),
        None if max_tokens is None else count("max_tokens", max_tokens),
    )
    run = _Run(input, model, tools, limits, signal, forbid_repeats, approve)
    return await run.race()


@dataclass(slots=True)  # not frozen: a frozen dataclass costs a microsecond per call to build
class _Checked:
    """One call of a batch that passed every check and may now run."""

    id: str
    name: str
    args: dict[str, Any]  # the copy the history records
    value: Any  # what validate returned (or a second copy of args); what run gets
    tool: Tool


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
            wrong = type(input).__name__
            raise ConfigError(f"input must be a string (the user's message), not {wrong}")
        input = str.__str__(input)  # plain data: a str subclass's __len__ could lie to max_chars
        if not callable(model):
            wrong = type(model).__name__
            raise ConfigError(f"model must be a function model(messages, signal), not {wrong}")
        if signal is not None and not isinstance(signal, AbortSignal):
            raise ConfigError("signal must be an AbortSignal, such as AbortController().signal")
        if approve is not None and not callable(approve):
            raise ConfigError("approve must be a function approve(call) that answers True or False")
        self.limits = limits
        self.max_turns, self.max_calls = limits.max_turns, limits.max_calls
        self.timeout_ms, self.max_chars = limits.timeout_ms, limits.max_chars
        self.forbid_repeats = bool(forbid_repeats)
        self.model = Callee(model, 2, "model")
        self.tools = registry(tools)
        self.writes = WritePath(self, approve, limits.max_writes, limits.write_grace_ms)
        self.refusals = RefusalPath(self, limits.max_refusals)
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
        self.over = False  # the race has given its verdict (see give_up)
        self.append({"role": "user", "content": input})

    # -- the loop itself ----------------------------------------------------

    async def steps(self) -> AgentResult:
        """Ask the model, check its proposal, run it, repeat."""
        while True:
            self.check_before_model_call()
            self.usage.turns += 1
            decision = await self.ask_model()
            self.check_not_stopped()  # in a browser, a plain model runs inline and may answer late
            kind, payload = self.check_decision(decision)
            spent = self.spend_tokens(self.proposal)  # a real model's tokens, against max_tokens
            if kind == "final":
                return self.finish(payload, decision, spent)
            try:
                batch = self.check_batch(payload, decision)  # the whole batch, before anything runs
            except REFUSALS as refusal:
                self.refusals.give_back(payload, refusal, spent)  # within max_refusals, or raises
                continue
            calls = [{"id": c.id, "name": c.name, "args": c.args} for c in batch]
            self.append({"role": "assistant", "calls": calls, **spent})
            for call in batch:
                self.check_not_stopped()
                self.usage.calls += 1
                run = self.writes.run_write if call.tool.writes else self.run_tool
                content = await run(call)
                self.append({"role": "tool", "call_id": call.id, "content": content})

    # -- before each model call ------------------------------------------------

    def check_before_model_call(self) -> None:
        """The signal, the deadline, the turn budget, then the context budget."""
        self.check_not_stopped()
        if self.usage.turns >= self.max_turns:
            raise self.fail(
                TurnBudgetError,
                f"turn budget exhausted: the model was called "
                f"{plural(self.usage.turns, 'time')} and max_turns={self.max_turns}; "
                f"raise max_turns, or make the model answer sooner",
                value=self.max_turns,
            )
        if self.usage.chars > self.max_chars:
            raise self.fail(
                ContextBudgetError,
                f"context budget exceeded: the history holds {self.usage.chars} characters and "
                f"max_chars={self.max_chars}; raise max_chars, "
                f"or keep inputs and tool results shorter",
                value=self.max_chars,
            )
        if self.limits.max_tokens is not None and self.usage.tokens >= self.limits.max_tokens:
            raise self.token_budget_error()

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
            if untrusted.token_counts(tokens):  # an answer the adapter refused was still paid for
                self.usage.input_tokens += tokens["input_tokens"]
                self.usage.output_tokens += tokens["output_tokens"]
            raise self.attach(error) from error.__cause__
        except BaseException as error:
            if passes_through(error):
                raise
            raise self.fail(ModelError, f"the model raised {untrusted.describe(error)}") from error

    # -- the decision ---------------------------------------------------------

    def check_decision(self, decision: Any) -> tuple[str, Any]:
        """A decision is {"kind": "final", "text": str} or {"kind": "tools", "calls": [...]}.

        The trust boundary: the decision is first copied as plain JSON data,
        so from here on the loop works on its own copy, whatever the model
        later does to the objects it returned.
        """
        shape = 'expected {"kind": "final", "text": "..."} or {"kind": "tools", "calls": [...]}'
        proposed = untrusted.proposed_calls(decision)
        if proposed is not None and proposed > MAX_REFUSED_COPIED:  # refused before it is copied
            self.check_batch_size(proposed, decision)
        try:
            decision = copy_json(decision)
        except NotJSONError as error:
            problem = f"it is not JSON data: {error}"
            raise self.malformed(f"malformed decision: {problem}", decision) from None
        except Exception as error:  # a hostile object that raises while being read
            problem = f"reading it raised {untrusted.describe(error)}"
            raise self.malformed(f"malformed decision: {problem}", decision) from None
        if not isinstance(decision, dict):
            problem = f"{shape}, got {untrusted.show(decision)}"
            raise self.malformed(f"malformed decision: {problem}", decision)
        kind = decision.get("kind")
        wanted = {"final": "text", "tools": "calls"}.get(kind) if isinstance(kind, str) else None
        if wanted is None or set(decision) - {"usage"} != {"kind", wanted}:
            problem = f"{shape}, got the keys {untrusted.keys(decision)}"
            raise self.malformed(f"malformed decision: {problem}", decision)
        if "usage" in decision and not untrusted.token_counts(decision["usage"]):
            wrong = f"{decision['usage']!r:.80}"
            problem = f'"usage" must be {{"input_tokens": int, "output_tokens": int}}, got {wrong}'
            raise self.malformed(f"malformed decision: {problem}", decision)
        payload = decision[wanted]
        if kind == "final" and not isinstance(payload, str):
            problem = f"the final text must be a string, got {untrusted.show(payload)}"
            raise self.malformed(f"malformed decision: {problem}", decision)
        if kind == "tools" and (not isinstance(payload, list) or not payload):
            got = untrusted.show(payload)
            problem = f"a tools decision needs a non-empty list of calls, got {got}"
            raise self.malformed(f"malformed decision: {problem}", decision)
        self.proposal = decision  # the loop's own copy: an error may carry it as it is
        return kind, payload

    def spend_tokens(self, decision: Any) -> dict[str, Any]:
        """Count the tokens a real model reported for this turn (`decision["usage"]`).

        Returns what the history's message for this turn records: `{"usage": {...}}`, or {}.
        """
        tokens = decision.get("usage") if isinstance(decision, dict) else None
        if tokens is None:  # a fake model reports no tokens
            return {}
        self.usage.input_tokens += tokens["input_tokens"]
        self.usage.output_tokens += tokens["output_tokens"]
        if self.limits.max_tokens is not None and self.usage.tokens > self.limits.max_tokens:
            raise self.token_budget_error(rejected=decision)
        return {"usage": dict(tokens)}

    def finish(self, text: str, decision: Any, spent: dict[str, Any]) -> AgentResult:
        """The final answer, if it fits the output budget."""
        if len(text) > self.max_chars:
            raise self.fail(
                OutputBudgetError,
                f"output budget exceeded: the final text has {len(text)} characters and "
                f"max_chars={self.max_chars}; raise max_chars, "
                f"or ask the model for a shorter answer",
                value=self.max_chars,
                rejected=decision,
            )
        self.append({"role": "assistant", "content": text, **spent})
        return AgentResult(text, self.history, self.usage_now(), self.limits)

    # -- the batch: every call checked before any runs --------------------------------

    def check_batch_size(self, count: int, decision: Any) -> None:
        """A batch may not ask for more calls than max_calls has left."""
        left = self.max_calls - self.usage.calls
        if count > left:
            if decision is not self.proposal:  # maybe a million calls: keep the first few
                decision = untrusted.first_calls(decision, MAX_REFUSED_SHOWN)
            raise self.fail(
                ToolBudgetError,
                f"tool budget exhausted: the model asked for {plural(count, 'tool call')} "
                f"but {left} of max_calls={self.max_calls} remain; nothing of this batch ran. "
                f"Raise max_calls, or make the model ask for fewer calls",
                value=self.max_calls,
                rejected=decision,
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
                turn = self.seen_ids.get(call_id)
                where = f"in turn {turn}" if turn is not None else "earlier in this batch"
                raise self.fail(
                    DuplicateCallIdError,
                    f"duplicate call id {call_id!r}: it was used {where}; every call of a run "
                    f"needs its own id so that each result is tied to one call. "
                    f"Nothing of this batch ran",
                    rejected=decision,
                )
            batch_ids.add(call_id)
            tool = self.tools.get(name)
            if tool is None:
                known = ", ".join(sorted(self.tools)) or "(none)"
                problem = f"unknown tool {name!r} (call {call_id!r}); the tools are: {known}"
                problem = f"{problem}. Nothing of this batch ran"
                raise self.fail(UnknownToolError, problem, rejected=decision)
            if self.forbid_repeats:
                key = (name, compact_json(sorted_keys(args)))
                if key in self.seen_calls or key in batch_calls:
                    raise self.fail(
                        RepeatedCallError,
                        f"repeated tool call without progress: {name} was already called "
                        f"with {key[1]} (call {call_id!r}); nothing of this batch ran",
                        rejected=decision,
                    )
                batch_calls.add(key)
            value = self.validate(tool, name, call_id, args, decision)
            checked.append(_Checked(call_id, name, args, value, tool))
        self.writes.check(checked, decision)  # writes: a policy, and max_writes (loop_writes.py)
        for call in checked:
            self.seen_ids[call.id] = self.usage.turns
        self.seen_calls |= batch_calls
        return checked

    def check_call_shape(self, call: Any, number: int, decision: Any) -> tuple[str, str, dict]:
        """A call is {"id": non-empty str, "name": str, "args": dict}."""
        if not isinstance(call, dict) or set(call) != {"id", "name", "args"}:
            got = untrusted.show(call)
            if isinstance(call, dict):
                got = f"the keys {untrusted.keys(call)}"
            problem = f'expected {{"id": ..., "name": ..., "args": {{...}}}}, got {got}'
        elif not isinstance(call["id"], str) or not call["id"]:
            problem = f"the id must be a non-empty string, got {untrusted.show(call['id'])}"
        elif not isinstance(call["name"], str):
            problem = f"the tool name must be a string, got {untrusted.show(call['name'])}"
        elif not isinstance(call["args"], dict):
            args = call["args"]
            problem = f"the args must be a dict, got {untrusted.show(args)}{untrusted.args_as_text(args)}"
        else:
            return call["id"], call["name"], call["args"]
        problem = f"malformed call #{number}: {problem}; nothing of this batch ran"
        raise self.malformed(problem, decision)

    def validate(self, tool: Tool, name: str, call_id: str, args: dict, decision: Any) -> Any:
        """Run the tool's own check on a second copy; what it returns is what `run` gets."""
        mine = copy_json(args)
        try:
            value = tool.validate(mine)
        except BaseException as error:
            if passes_through(error):
                raise
            raise self.fail(
                ToolArgsError,
                f"invalid args for {name} (call {call_id!r}): {untrusted.readable(str, error)}; "
                f"nothing of this batch ran",
                rejected=decision,
            ) from error
        if value is None:  # the common case, and the cheapest to tell
            return mine
        if inspect.isawaitable(value):
            if inspect.iscoroutine(value):
                value.close()
            problem = f"the validate of tool {name!r} returned an awaitable"
            raise self.fail(ConfigError, f"{problem}; it must be a plain function")
        return value

    # -- running a checked call ----------------------------------------------------------

    async def run_tool(self, call: _Checked) -> str:
        """Run one checked call; its result goes back as compact JSON."""
        runner = call.tool.runner
        context = (ToolCall(call.id, call.name, copy_json(call.args)),) if runner.takes >= 3 else ()
        try:
            result = await runner(call.value, self.controller.signal, *context)
        except BaseException as error:
            if passes_through(error):
                raise
            problem = f"tool {call.name} raised {untrusted.describe(error)} (call {call.id!r})"
            raise self.fail(ToolError, problem) from error
        try:
            return compact_json(result)
        except NotJSONError as error:
            raise self.fail(
                ToolError,
                f"tool {call.name} returned a result that is not JSON (call {call.id!r}): {error}; "
                f"return dicts, lists, strings, numbers, booleans or None",
            ) from None

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
        if self.outside is not None and self.outside.aborted:  # stopped before it started
            raise self.aborted(self.outside.reason)
        # 1. Start the steps as a task: from here on, they run whenever this function waits.
        task = asyncio.ensure_future(self.steps())
        # 2. One future, `woken`, that the first of three events completes, with the event's name.
        woken = self.loop.create_future()

        def wake(why: str) -> None:
            if not woken.done():  # only the first event counts
                woken.set_result(why)

        #    a) the task ends (an answer, or an error of its own);
        task.add_done_callback(lambda _: wake("done"))
        #    b) the deadline: the event loop calls `wake` at that time, whatever the task is doing;
        timer = self.loop.call_at(self.deadline, wake, "deadline")

        #    c) the outside signal, which may be aborted from another thread: `wake` must then be
        #       handed to the event loop's own thread (call_soon_threadsafe), never called there.
        #       `first=True`: the run hears it before the listeners the model and tools added.
        def on_abort(_: BaseException) -> None:
            call_soon_threadsafe(self.loop, wake, "abort")

        outside = self.outside
        forget_signal = outside.add_callback(on_abort, first=True) if outside is not None else None
        # 3. Wait for the first event; then take the other two down, whichever won.
        try:
            why = await woken
        except asyncio.CancelledError:  # our own caller gave up on the run (e.g. asyncio.wait_for)
            self.stop_callees(AbortError("aborted: the caller cancelled the run"))
            self.give_up(task)
            raise
        finally:
            timer.cancel()
            if forget_signal is not None:
                forget_signal()
        # 4. The task is done (it may have finished just as the deadline fired): its outcome stands.
        if task.done():
            return task.result()
        # 5. The deadline or the abort won. Tell the model and tools to stop (abort their signal).
        reason = self.outside.reason if self.outside is not None else None
        error = self.deadline_error() if why == "deadline" else self.aborted(reason)
        self.stop_callees(error)
        # 6. A write in flight gets its grace to commit or roll back (loop_writes.py).
        if self.writes.in_flight is not None:
            await self.writes.settle(task, error)
        # 7. The error carries the history as the run stopped, not what the task does later.
        if isinstance(error, AgentError):
            self.attach(error)
        # 8. Cancel the task, wait a moment for its `finally` blocks, and raise. If it ignores the
        #    cancellation, it runs on, abandoned: the verdict is ours already (give_up).
        self.give_up(task)
        await asyncio.wait([task], timeout=CANCEL_GRACE_MS / 1000)
        raise error

    def give_up(self, task: asyncio.Task[Any]) -> None:
        """The verdict is given: cancel the steps task; nothing it does from now on changes it.

        A task that swallows its cancellation runs on (`abandon` keeps it alive until it ends);
        it may still meet the aborted signal, whose reason is the very error the run raised.
        """
        self.over = True
        abandon(task)

    def stop_callees(self, reason: BaseException) -> None:
        """Abort the signal the model and tools hold.

        Their listeners run on a worker thread, not here: one that blocks must
        not hold the event loop, and so the deadline, hostage. (With no threads,
        in a browser, they run on the event loop just after.)
        """
        listeners = self.controller.abort_later(reason)
        if listeners is not None:
            in_background(listeners, "agentlab abort listeners", self.loop)

    # -- bookkeeping: the history, the usage, and the errors that carry them ---------------

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
            # the loop's own copy as it is; anything else copied, or glimpsed if it is not JSON
            rejected=rejected if rejected is self.proposal else untrusted.safe_copy(rejected),
            **details,
        )

    def malformed(self, message: str, decision: Any) -> AgentError:
        return self.fail(ModelOutputError, message, rejected=decision)

    def attach(self, error: AgentError) -> AgentError:
        """Give an AgentError raised by a callee the run's history and usage."""
        if self.over:  # an abandoned task: the error the run raised keeps the history it had
            return error
        error.history = [copy_message(m) for m in self.history]
        error.usage = self.usage_now()
        error.limits = self.limits
        return error

    def deadline_error(self) -> AgentError:
        # What to change; in a browser, where a plain callee may hold the loop past the deadline, it says so.
        fix = held_the_loop(self.loop.time() - self.deadline) or "raise timeout_ms, or use a faster model or tools"
        return self.fail(
            DeadlineError,
            f"deadline exceeded: the run took longer than "
            f"timeout_ms={number_text(self.timeout_ms)} "
            f"(turn {self.usage.turns}, {plural(self.usage.calls, 'tool call')} done); {fix}",
            value=self.timeout_ms,
        )

    def token_budget_error(self, **details: Any) -> AgentError:
        return self.fail(
            TokenBudgetError,
            f"token budget exhausted: the model has used {self.usage.tokens} tokens and "
            f"max_tokens={self.limits.max_tokens}; raise max_tokens, "
            f"or keep the history and answers shorter",
            value=self.limits.max_tokens,
            **details,
        )

    def aborted(self, reason: Any) -> BaseException:
        """The outside signal's reason is raised as it is; an AgentError gets the history."""
        if not isinstance(reason, BaseException):  # a signal subclass that says aborted, not why
            reason = self.fail(AbortError, "aborted: the signal reports aborted, with no reason")
        return self.attach(reason) if isinstance(reason, AgentError) else reason


__all__ = [
    "CANCEL_GRACE_MS",
    "WRITE_GRACE_MS",
    "AgentResult",
    "Limits",
    "Messages",
    "Usage",
    "agent_loop",
]
