"""Scenarios for the playground: one small, deterministic agent per notebook.

A scenario is an input, a way to build a fresh (model, tools) pair from a few
integer knobs, and the limits a run starts with. `run_scenario` runs it once
with any of those changed; the playground (`agentlab.lab.widgets`) puts a control
on each. Every model here is a fake: fixed data, no randomness, no network, so
the same settings always give the same trace.

    result = await run_scenario(get_scenario("budgets"), max_calls=5)   # a ToolBudgetError, returned

A scenario whose tools write (notebooks 09a-09d) builds a fresh shop (`agentlab.writes.store.Store`, SQLite in a
temporary folder) for every run, and its build also returns the options agent_loop needs for writes, such as
the approve policy: `(model, tools, {"approve": ...})`.

The defaults of each scenario give an instructive first run, and each knob and
limit changes the outcome in a way the trace shows.

A scenario's title, its knobs' labels and their choices are written in English here and translated where they are
shown (`agentlab.i18n`, the playground); a choice that is code (a tool name, a wire format's name) is left as it is,
as are the keys and the names of settings. What the scenario's model and tools say (the input, the tools' results,
the model's answers) is the run's data, not the playground's words: it stays English in every language, so that the
same settings give the same run, counted in the same characters.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import importlib
import inspect
import json
import ssl
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from agentlab.abort import AbortSignal
from agentlab.adapters import from_decider
from agentlab.errors import ConfigError
from agentlab.i18n import _
from agentlab.lab.examples import BOUNDARY_CASES, CATALOGUE, WEATHER_GOAL, WeatherDemo, lookup_tools, weather_tools
from agentlab.lab.fakes import BlocksFirst, Decision, NeverAnswers, Slow, call, calls, final
from agentlab.lab.naive import NaiveLoop, run_naive
from agentlab.loop import agent_loop
from agentlab.models import loopback
from agentlab.models.loopback import LoopbackServer, Reply, anthropic_reply, chat_reply, responses_reply
from agentlab.models.settings import ADAPTERS, client_for
from agentlab.tools import Approval, Tool, ToolCall
from agentlab.writes.card import DEPOSIT, FAULTS, CardService, deposit_for, refund_unapplied
from agentlab.writes.store import Store, WriteRolledBack

Model = Callable[..., Any]
Tools = Mapping[str, Tool]
# What a scenario's build gives: a model and its tools, and for a scenario that writes, options of agent_loop
# made for that run (an approve policy that must see the same fresh shop as the tools).
Agent = tuple[Model, Tools] | tuple[Model, Tools, Mapping[str, Any]]

LIMIT_NAMES = ("max_turns", "max_calls", "timeout_ms", "max_chars")
# The loop's own defaults, read from its signature so there is one source of truth.
DEFAULT_LIMITS: dict[str, float] = {
    name: inspect.signature(agent_loop).parameters[name].default for name in LIMIT_NAMES
}


@dataclass(frozen=True)
class Knob:
    """A scenario's own integer control, besides the loop's limits.

    With `choices`, the value is an index: `choices[value]` says what it means
    (the playground shows a drop-down instead of a slider). The label and the choices are English, translated
    where shown; `verbatim` choices are code (tool names, say) and are shown as they are, as is a label that is
    the setting's own name (`max_tokens`).
    """

    name: str
    label: str
    minimum: int
    maximum: int
    default: int
    step: int = 1
    choices: tuple[str, ...] = ()
    verbatim: bool = False

    def __post_init__(self) -> None:
        if self.choices and (self.minimum, self.maximum) != (0, len(self.choices) - 1):
            raise ConfigError(
                f"knob {self.name!r}: a knob with {len(self.choices)} choices ranges from 0 to {len(self.choices) - 1}"
            )
        if not self.minimum <= self.default <= self.maximum:
            raise ConfigError(
                f"knob {self.name!r}: its default {self.default} is outside {self.minimum}..{self.maximum}"
            )

    def check(self, value: Any) -> int:
        """The value as an int, or a ConfigError that says what is allowed."""
        if isinstance(value, bool) or not isinstance(value, int) or not self.minimum <= value <= self.maximum:
            raise ConfigError(
                f"{self.name} must be a whole number from {self.minimum} to {self.maximum}, got {value!r}"
            )
        return int(value)

    def describe(self, value: int) -> str:
        """What a value means, for status lines and drop-downs: the choice's text (translated), or the number."""
        if not self.choices:
            return str(value)
        return self.choices[value] if self.verbatim else _(self.choices[value])

    def shown_label(self) -> str:
        """The label a learner reads next to the control, in the language in force."""
        return self.label if self.label == self.name else _(self.label)


@dataclass(frozen=True)
class Scenario:
    """An agent to play with: `build(knob values)` gives a fresh (model, tools) for each run."""

    key: str
    title: str
    input: str
    build: Callable[[Mapping[str, int]], Agent]
    limits: Mapping[str, float] = field(default_factory=dict)
    knobs: tuple[Knob, ...] = ()
    forbid_repeats: bool = False
    # Knobs that are options of agent_loop itself (passed to it by name, shown with the limits), not of the model.
    loop_knobs: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        unknown = sorted(set(self.limits) - set(LIMIT_NAMES))
        if unknown:
            raise ConfigError(f"scenario {self.key!r}: unknown limits {unknown}; the limits are {list(LIMIT_NAMES)}")
        names = [knob.name for knob in self.knobs]
        clash = sorted({name for name in names if names.count(name) > 1 or name in LIMIT_NAMES or name == "signal"})
        if clash:
            raise ConfigError(f"scenario {self.key!r}: knob names must be unique and not a limit's, got {clash}")
        if not set(self.loop_knobs) <= set(names):
            raise ConfigError(f"scenario {self.key!r}: loop_knobs must name its knobs, got {list(self.loop_knobs)}")

    def defaults(self) -> dict[str, float]:
        """Every setting's starting value: the four limits, then the knobs."""
        values = {name: self.limits.get(name, DEFAULT_LIMITS[name]) for name in LIMIT_NAMES}
        values.update({knob.name: knob.default for knob in self.knobs})
        return values

    def resolve(self, overrides: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, int]]:
        """Split settings into the loop's limits and checked knob values, defaults filled in.

        Limits are checked by `agent_loop` itself; knobs here, against their range.
        """
        values: dict[str, Any] = self.defaults()
        unknown = sorted(set(overrides) - set(values))
        if unknown:
            raise ConfigError(
                f"scenario {self.key!r} has no setting {', '.join(map(repr, unknown))}; "
                f"its settings are: {', '.join(values)}"
            )
        values.update(overrides)
        knobs = {knob.name: knob.check(values[knob.name]) for knob in self.knobs}
        return {name: values[name] for name in LIMIT_NAMES}, knobs


async def run_scenario(scenario: Scenario | str, naive: NaiveLoop | None = None, **overrides: Any) -> Any:
    """Run a scenario once with some settings changed (limits, knobs, or `signal`).

    Never raises the run's error: returns it, so that a caller (the playground,
    a notebook cell) shows every outcome the same way. Bad settings come back
    as a ConfigError too. With `naive`, a notebook's loop without the rule runs
    the same model and tools instead of `agent_loop` (`agentlab.lab.naive`).
    """
    signal: AbortSignal | None = overrides.pop("signal", None)
    try:
        chosen = get_scenario(scenario) if isinstance(scenario, str) else scenario
        limits, knobs = chosen.resolve(overrides)
        model, tools, *built = chosen.build(knobs)
        options = {name: knobs[name] for name in chosen.loop_knobs}
        options.update(*built)  # a writing scenario's approve policy
        if naive is not None:
            return await run_naive(naive, chosen.input, model, tools, limits, signal)
        return await agent_loop(
            chosen.input, model, tools, **limits, **options, signal=signal, forbid_repeats=chosen.forbid_repeats
        )
    except Exception as error:
        return error


def get_scenario(key: str) -> Scenario:
    """The scenario named `key`; a ConfigError lists the keys if there is none."""
    try:
        return SCENARIOS[key]
    except (KeyError, TypeError):
        raise ConfigError(f"no scenario {key!r}; the scenarios are: {', '.join(SCENARIOS)}") from None


# -- helpers the models share ----------------------------------------------------


def _asked(messages: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """Every call the model made so far, by call id."""
    return {c["id"]: c for m in messages if "calls" in m for c in m["calls"]}


def _results(messages: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Every tool result so far, parsed, by the call id it is tied to."""
    return {m["call_id"]: json.loads(m["content"]) for m in messages if m.get("role") == "tool"}


def _turn(messages: Sequence[Mapping[str, Any]]) -> int:
    """The turn the model is deciding now (1 for the first)."""
    return 1 + sum(1 for m in messages if "calls" in m)


def _describe_book(record: Mapping[str, Any]) -> str:
    if not record.get("found"):
        return f"{record.get('id')}: no such book"
    shelf = "on the shelf" if record["available"] else "on loan"
    return f"{record['id']}: {record['title']} ({shelf})"


BOOKS = tuple(CATALOGUE)  # "A", "B", "C"


# -- call_ids: each result reaches the model tied to its call id -------------------


class ReadsResultsById:
    """Looks up the first `books` books, `per_turn` per batch, then answers from the results.

    The answer pairs each call with its result through the call id, the way a
    real model reads the history; a result with no call id (a naive loop's) it
    can only pair by position, as the model would have to guess.
    """

    def __init__(self, books: int, per_turn: int) -> None:
        self.books, self.per_turn = BOOKS[:books], per_turn

    async def __call__(self, messages: Sequence[Mapping[str, Any]], signal: AbortSignal) -> Decision:
        asked = _asked(messages)
        looked_up = [c["args"]["id"] for c in asked.values()]
        pending = [book for book in self.books if book not in looked_up]
        if pending:
            start = len(asked) + 1
            batch = pending[: self.per_turn]
            return calls(*(call("lookup", {"id": book}, f"c{start + i}") for i, book in enumerate(batch)))
        results = [m for m in messages if m.get("role") == "tool"]
        by_id = {m.get("call_id"): m for m in results}
        answers = []
        for n, (call_id, asked_for) in enumerate(asked.items()):
            result = json.loads(by_id.get(call_id, results[n])["content"])  # by id, else by position
            answers.append(f"{call_id} → {_describe_book({**result, 'id': asked_for['args']['id']})}")
        return final("; ".join(answers))


def _slow_for_a(slow_ms: int) -> Tools:
    """The lookup, but finding book A takes `slow_ms`: with no call ids, results could come back in any order."""

    lookup = lookup_tools()["lookup"]

    async def run(args: Mapping[str, Any]) -> Any:
        if args["id"] == "A" and slow_ms:
            await asyncio.sleep(slow_ms / 1000)
        return await lookup.run(args)

    return {"lookup": dataclasses.replace(lookup, run=run)}


def _build_call_ids(knobs: Mapping[str, int]) -> tuple[Model, Tools]:
    return ReadsResultsById(knobs["books"], knobs["per_turn"]), _slow_for_a(knobs["slow_a_ms"])


# -- tool_names: a bad or inherited name runs nothing --------------------------------

TOOL_NAMES = ("lookup", "deleteEverything", "toString", "__class__", "keys", "Lookup", "lookup ")


def _proposes_name(name: str, good_before: int) -> Model:
    """Asks for `good_before` good lookups and then `name`, in one batch; then answers."""

    async def model(messages: Sequence[Mapping[str, Any]], signal: AbortSignal) -> Decision:
        if _turn(messages) == 1:
            good = [call("lookup", {"id": BOOKS[i]}, f"c{i + 1}") for i in range(good_before)]
            return calls(*good, call(name, {"id": "A"}, f"c{good_before + 1}"))
        return final("; ".join(_describe_book(result) for result in _results(messages).values()))

    return model


def _build_tool_names(knobs: Mapping[str, int]) -> tuple[Model, Tools]:
    return _proposes_name(TOOL_NAMES[knobs["name"]], knobs["good_calls_before"]), lookup_tools()


# -- tool_args: invalid args never reach run ------------------------------------------

TOOL_ARGS: tuple[tuple[str, dict[str, Any]], ...] = (
    ('{"id": "A"} (valid)', {"id": "A"}),
    ('{"id": 7} (a number)', {"id": 7}),
    ("{} (no id)", {}),
    ('{"id": "A", "admin": true} (extra key)', {"id": "A", "admin": True}),
    ('{"id": ""} (empty)', {"id": ""}),
    ('{"id": "xxx…"} (65 characters)', {"id": "x" * 65}),
    ('{"id": "Z"} (valid, unknown book)', {"id": "Z"}),
)


def _proposes_args(args: dict[str, Any]) -> Model:
    """Asks for one lookup with `args`, then reports what came back."""

    async def model(messages: Sequence[Mapping[str, Any]], signal: AbortSignal) -> Decision:
        if _turn(messages) == 1:
            return calls(call("lookup", dict(args), "c1"))
        return final(_describe_book(_results(messages)["c1"]))

    return model


def _build_tool_args(knobs: Mapping[str, int]) -> tuple[Model, Tools]:
    return _proposes_args(TOOL_ARGS[knobs["args"]][1]), lookup_tools()


# -- budgets: the tool-call and turn budgets ------------------------------------------


class Busy:
    """Asks for `calls_per_turn` lookups a turn for `turns_before_answer` turns, then answers."""

    def __init__(self, calls_per_turn: int, turns_before_answer: int) -> None:
        self.calls_per_turn, self.turns_before_answer = calls_per_turn, turns_before_answer

    async def __call__(self, messages: Sequence[Mapping[str, Any]], signal: AbortSignal) -> Decision:
        turn, done = _turn(messages), len(_asked(messages))
        if turn > self.turns_before_answer:
            return final(f"done: {done} lookups in {turn - 1} turns, then this answer in turn {turn}")
        ids = range(done + 1, done + 1 + self.calls_per_turn)
        return calls(*(call("lookup", {"id": BOOKS[(n - 1) % len(BOOKS)]}, f"c{n}") for n in ids))


def _build_budgets(knobs: Mapping[str, int]) -> tuple[Model, Tools]:
    return Busy(knobs["calls_per_turn"], knobs["turns_before_answer"]), lookup_tools()


# -- duplicate_ids: a repeated call id is refused --------------------------------------


class ReusesId:
    """One lookup a turn (ids c1, c2, ...) for `turns` turns, but on turn `reuse_on_turn` it reuses c1.

    On turn 1 the reuse is within the batch: two calls both named c1.
    0 means it never reuses an id.
    """

    def __init__(self, turns: int, reuse_on_turn: int) -> None:
        self.turns, self.reuse_on_turn = turns, reuse_on_turn

    async def __call__(self, messages: Sequence[Mapping[str, Any]], signal: AbortSignal) -> Decision:
        turn = _turn(messages)
        if turn > self.turns:
            return final("; ".join(_describe_book(result) for result in _results(messages).values()))
        book = BOOKS[(turn - 1) % len(BOOKS)]
        if turn != self.reuse_on_turn:
            return calls(call("lookup", {"id": book}, f"c{turn}"))
        if turn == 1:
            return calls(call("lookup", {"id": "A"}, "c1"), call("lookup", {"id": "B"}, "c1"))
        return calls(call("lookup", {"id": book}, "c1"))


def _build_duplicate_ids(knobs: Mapping[str, int]) -> tuple[Model, Tools]:
    return ReusesId(knobs["turns"], knobs["reuse_id_on_turn"]), lookup_tools()


# -- deadline: the deadline holds against a slow, deaf or blocking model ----------------


def _looks_up_then_answers() -> Model:
    """Looks book A up, then answers with its title."""

    async def model(messages: Sequence[Mapping[str, Any]], signal: AbortSignal) -> Decision:
        if _turn(messages) == 1:
            return calls(call("lookup", {"id": "A"}, "c1"))
        return final(_describe_book(_results(messages)["c1"]))

    return model


def _looks_up_then_goes_silent() -> Model:
    """Looks book A up, then never answers again, ignoring its signal (as a dropped connection with no timeout)."""
    silent = NeverAnswers()

    async def model(messages: Sequence[Mapping[str, Any]], signal: AbortSignal) -> Decision:
        if _turn(messages) == 1:
            return calls(call("lookup", {"id": "A"}, "c1"))
        return await silent(messages, signal)

    return model


def _build_deadline(knobs: Mapping[str, int]) -> tuple[Model, Tools]:
    delay, kind = knobs["model_delay_ms"], knobs["blocking"]
    if kind == 1:
        return BlocksFirst(_looks_up_then_answers(), delay), lookup_tools()
    return Slow(_looks_up_then_goes_silent() if kind == 2 else _looks_up_then_answers(), delay), lookup_tools()


# -- limits: the context budget, the output budget, and cancellation -------------------

_NOTES = "The model proposes; the application verifies and executes. "


def _text(size: int, prefix: str = "") -> str:
    """Deterministic filler text of exactly `size` characters."""
    body = prefix + _NOTES * (size // len(_NOTES) + 1)
    return body[:size]


def _fetch_tool(result_size: int) -> Tools:
    def validate(args: Mapping[str, Any]) -> None:
        if set(args) != {"page"} or not isinstance(args["page"], str):
            raise ValueError('expected exactly {"page": <a string>}')

    async def run(args: Mapping[str, Any]) -> dict[str, Any]:
        return {"page": args["page"], "text": _text(result_size)}

    return {"fetch": Tool(validate=validate, run=run, description="Fetch a page of notes.")}


def _reads_then_summarises(answer_size: int) -> Model:
    async def model(messages: Sequence[Mapping[str, Any]], signal: AbortSignal) -> Decision:
        if _turn(messages) == 1:
            return calls(call("fetch", {"page": "notes"}, "c1"))
        return final(_text(answer_size, "Summary: "))

    return model


def _build_limits(knobs: Mapping[str, int]) -> tuple[Model, Tools]:
    model = _reads_then_summarises(knobs["answer_size"])
    if knobs["model_delay_ms"]:
        model = Slow(model, knobs["model_delay_ms"])
    return model, _fetch_tool(knobs["result_size"])


# -- weather: the tutorial's agent and its boundary cases -------------------------------

WEATHER_CASES = ("the demo model", *BOUNDARY_CASES)


def _build_weather(knobs: Mapping[str, int]) -> tuple[Model, Tools]:
    case = WEATHER_CASES[knobs["case"]]
    decider = WeatherDemo() if knobs["case"] == 0 else BOUNDARY_CASES[case]
    return from_decider(decider), weather_tools()


# -- real_model: a provider's faults, through the real SDK and adapter, from 127.0.0.1 -------

# (label, provider) for each wire format the adapters speak.
WIRE_FORMATS = (
    ("Chat Completions (openai)", "openai-chat"),
    ("Responses (openai)", "openai-responses"),
    ("Messages (anthropic)", "anthropic"),
)
WIRE_LABELS = tuple(label for label, _ in WIRE_FORMATS)
PROVIDER_ANSWERS = (
    "a good call, then an answer",
    "arguments that are not JSON",
    "a call with no id",
    "an invented tool name",
    "an answer cut off at its token limit",
    "a server that stalls mid-answer",
)
_REPLIES = {"openai-chat": chat_reply, "openai-responses": responses_reply, "anthropic": anthropic_reply}
_CUT_OFF = {
    "openai-chat": {"finish_reason": "length"},
    "openai-responses": {"incomplete": "max_output_tokens"},
    "anthropic": {"stop_reason": "max_tokens"},
}


def _provider_answer(provider: str, answer: int) -> Reply:
    """The scripted provider's first reply: a good call of lookup, or PROVIDER_ANSWERS[answer]'s fault."""
    reply = _REPLIES[provider]
    good = {"id": "toolu_a1" if provider == "anthropic" else "call_a1", "name": "lookup", "args": {"id": "A"}}
    usage = (152, 41)
    if answer == 1:
        return reply(calls=[{**good, "args": '{"id": "A",'}], usage=usage)  # cut short mid-JSON
    if answer == 2:
        return reply(calls=[{**good, "id": None}], usage=usage)
    if answer == 3:
        return reply(calls=[{**good, "name": "search_catalogue"}], usage=usage)
    if answer == 4:
        return reply(text="Book A is avail", usage=usage, **_CUT_OFF[provider])
    if answer == 5:
        return Reply(reply(text="never").body, stall=True)  # half the body, then nothing
    return reply(calls=[good], usage=usage)


@functools.cache
def _sdk_ready(provider: str) -> bool:
    """Import the provider's SDK (and its lazy parts) once, before any run: not on a run's clock."""
    client = client_for(provider, api_key="scripted", base_url="http://127.0.0.1:9")  # a ConfigError if missing
    ADAPTERS[provider](client, "scripted", {})  # touches the endpoint the adapter will call
    return True


@functools.cache
def _tls() -> ssl.SSLContext:
    """One TLS context for every client: a client makes its own otherwise, which takes about 0.1 s."""
    return ssl.create_default_context()


def _sdk_client(provider: str, base_url: str) -> Any:
    """The official SDK's async client, as `client_for` makes it (no retries), but made in a millisecond."""
    if loopback.IN_PROCESS:  # the browser's: `client_for`'s in-process transport, which makes no TLS context
        return client_for(provider, api_key="scripted", base_url=base_url)
    sdk = importlib.import_module("anthropic" if provider == "anthropic" else "openai")
    make = sdk.AsyncAnthropic if provider == "anthropic" else sdk.AsyncOpenAI
    http = sdk.DefaultAsyncHttpxClient(verify=_tls())
    return make(api_key="scripted", base_url=base_url, max_retries=0, http_client=http)


def _scripted_provider(provider: str, answer: int, tools: Tools) -> Model:
    """The official SDK and agentlab's adapter, talking each turn to a fresh server on 127.0.0.1.

    A server and a client per turn, so a run owns everything it talks to: nothing is shared between the
    playground's runs (each on its own thread and event loop), and nothing outlives the turn.
    """
    _sdk_ready(provider)

    async def model(messages: Sequence[Mapping[str, Any]], signal: AbortSignal) -> Decision:
        if _turn(messages) == 1:
            reply = _provider_answer(provider, answer)
        else:
            text = "; ".join(_describe_book(result) for result in _results(messages).values())
            reply = _REPLIES[provider](text=text, usage=(231, 12))
        server = LoopbackServer(reply)
        try:
            base_url = server.url if provider == "anthropic" else server.openai_url
            async with _sdk_client(provider, base_url) as client:
                return await ADAPTERS[provider](client, "scripted", tools)(messages, signal)
        finally:  # closing waits for the server's loop to notice: let a thread wait, not the run
            if server.in_process:  # no thread to wait for, and none to start (Pyodide)
                server.close()
            else:
                threading.Thread(target=server.close, name="loopback-close", daemon=True).start()

    return model


def _build_real_model(knobs: Mapping[str, int]) -> tuple[Model, Tools]:
    tools = lookup_tools()
    return _scripted_provider(WIRE_FORMATS[knobs["wire_format"]][1], knobs["answer"], tools), tools


# -- recovery: a refused batch goes back to the model, within max_refusals ---------------

SLIPS = ("an unknown name: Lookup", 'invalid args: {"id": 7}', "a call with no id", "one id for two calls")


class SlipsThenRecovers:
    """Makes the same kind of mistake for its first `slips` turns, then asks for book A properly, then answers.

    A stand-in for a real model that corrects itself once the refusal comes back: here the correction comes
    on a fixed turn, so the same settings always give the same trace.
    """

    def __init__(self, slips: int, kind: int) -> None:
        self.slips, self.kind = slips, kind

    async def __call__(self, messages: Sequence[Mapping[str, Any]], signal: AbortSignal) -> Decision:
        turn = _turn(messages)
        if turn <= self.slips:
            return calls(*self.slip(f"c{turn}"))
        if turn == self.slips + 1:
            return calls(call("lookup", {"id": "A"}, f"c{turn}"))
        return final(_describe_book(_results(messages)[f"c{turn - 1}"]))

    def slip(self, call_id: str) -> list[dict[str, Any]]:
        if self.kind == 0:
            return [call("Lookup", {"id": "A"}, call_id)]
        if self.kind == 1:
            return [call("lookup", {"id": 7}, call_id)]
        if self.kind == 2:
            return [call("lookup", {"id": "A"}, call_id), {"name": "lookup", "args": {"id": "B"}}]
        return [call("lookup", {"id": "A"}, call_id), call("lookup", {"id": "B"}, call_id)]


def _build_recovery(knobs: Mapping[str, int]) -> tuple[Model, Tools]:
    return SlipsThenRecovers(knobs["slips"], knobs["slip"]), lookup_tools()


# -- writes (09a-09d): a fresh bookshop in SQLite for every run ---------------------------


def _write_result(messages: Sequence[Mapping[str, Any]], call_id: str) -> dict[str, Any]:
    """What became of a write, as the model reads it: applied, rejected by the shop, denied, rolled back."""
    return _results(messages).get(call_id, {})


def _reserved(result: Mapping[str, Any]) -> str:
    """A write's result in a few words, for an answer."""
    if "reservation" in result:
        return f"reservation {result['reservation']} ({result['on_hand']} left on hand)"
    if result.get("denied"):
        return f"denied ({result['reason']})"
    if result.get("rejected"):
        return f"rejected by the shop ({result['reason']})"
    return json.dumps(result, ensure_ascii=False)


# 09a: approval. Who says yes to a write, and what the model does with a no.

# Short enough to read whole in the playground's drop-down.
POLICIES = ("none: no approve=", "yes to every write", "yes, but no cancels", "no to every write")
_NO_CANCEL = "an agent may not cancel a customer's reservation"


def _policy(choice: int) -> Callable[[ToolCall], Any] | None:
    """The approve policy of POLICIES[choice]: one-parameter functions, as most policies are."""
    if choice == 0:
        return None
    if choice == 1:
        return lambda call: True
    if choice == 2:
        return lambda call: True if call.name == "reserve" else Approval(False, _NO_CANCEL)
    return lambda call: Approval(False, "no writes today")


class FreesACopy:
    """Linus wants `copies` copies of book C (3 on hand). If the shop says there are too few, the model
    proposes to cancel Alan's reservation 2 (2 copies of C) to free them, and then reserves again.

    What it answers depends on what came back: an applied, rejected or denied write.
    """

    def __init__(self, copies: int) -> None:
        self.copies = copies

    def reserve(self, call_id: str) -> Decision:
        return calls(call("reserve", {"book": "C", "customer": "linus", "quantity": self.copies}, call_id))

    async def __call__(self, messages: Sequence[Mapping[str, Any]], signal: AbortSignal) -> Decision:
        turn = _turn(messages)
        if turn == 1:
            return self.reserve("w1")
        last = _write_result(messages, f"w{turn - 1}")
        if turn == 2 and last.get("rejected"):
            return calls(call("cancel", {"reservation": 2}, "w2"))  # Alan's: the overreach
        if turn == 3 and "reservation" in last:
            return self.reserve("w3")  # Alan's copies are free now
        if "reservation" in last and turn == 4:
            return final(f"Done, Linus: I cancelled Alan's reservation 2 to free copies; yours is {_reserved(last)}.")
        if "reservation" in last:
            return final(f"Done, Linus: {_reserved(last)}.")
        return final(f"Sorry, Linus: {_reserved(last)}.")


def _build_approval(knobs: Mapping[str, int]) -> Agent:
    store = Store()
    policy = _policy(knobs["policy"])
    return FreesACopy(knobs["copies"]), store.tools(), {"approve": policy}


# 09b: the write budget, and a batch's writes in call order.

_SHELVES = ("A", "C", "E", "D")  # the books with copies on hand: 3, 3, 4 and 2


class ReservesInBatches:
    """Reserves one copy a call, `per_turn` calls a turn, for `turns` turns, then counts what it got."""

    def __init__(self, per_turn: int, turns: int) -> None:
        self.per_turn, self.turns = per_turn, turns

    async def __call__(self, messages: Sequence[Mapping[str, Any]], signal: AbortSignal) -> Decision:
        turn, done = _turn(messages), len(_asked(messages))
        if turn > self.turns:
            results = _results(messages).values()
            made = sum(1 for result in results if "reservation" in result)
            return final(f"{made} reservations made, in {turn - 1} turns of {self.per_turn}")
        batch = []
        for n in range(done + 1, done + 1 + self.per_turn):
            book = _SHELVES[(n - 1) % len(_SHELVES)]
            batch.append(call("reserve", {"book": book, "customer": f"reader{n}", "quantity": 1}, f"w{n}"))
        return calls(*batch)


def _build_write_budget(knobs: Mapping[str, int]) -> Agent:
    store = Store()
    return ReservesInBatches(knobs["writes_per_turn"], knobs["turns"]), store.tools(), {"approve": _policy(1)}


# 09c: at most once. The same reservation asked for again: the idempotency key decides what happens.

# The rule first (the application's key), the store's default one click away.
KEYS = ("the application's: order-7/reserve", "the store's default: run-n/<call id>")
IDS = ("fresh each time", "the same each time")


class AsksAgain:
    """Alan wants one copy of D. The model asks for it `times` times, a turn each (it did not trust the
    answer), with a fresh call id each time, as a provider gives each new request, or the same one, as a
    played-back response repeats it; then it says what each attempt got back."""

    def __init__(self, times: int, same_id: bool) -> None:
        self.times, self.same_id = times, same_id

    async def __call__(self, messages: Sequence[Mapping[str, Any]], signal: AbortSignal) -> Decision:
        turn = _turn(messages)
        if turn > self.times:
            return final("; ".join(f"{key}: {_reserved(result)}" for key, result in _results(messages).items()))
        call_id = "w1" if self.same_id else f"w{turn}"
        return calls(call("reserve", {"book": "D", "customer": "alan", "quantity": 1}, call_id))


def _build_at_most_once(knobs: Mapping[str, int]) -> Agent:
    store = Store()
    key = (lambda call: f"order-7/{call.name}") if knobs["key"] == 0 else None
    return AsksAgain(knobs["times"], knobs["ids"] == 1), store.tools(key=key), {"approve": _policy(1)}


# 09d: whole or nothing, in the database. Eve's reservation needs a deposit, taken by a card service outside the
# shop's database (agentlab/writes/card.py): inside the write's transaction, where a rollback does not undo it, or
# through the outbox, sent after the commit.

DEPOSIT_WHERE = ("before_commit (unsafe)", "before_commit, then refund", "outbox, after the commit")
CARD_SERVICE = ("takes the deposit", "declines (raises)", "ignores the stop")  # CardService's FAULTS, in order


def _charges_in_the_transaction(card: CardService) -> Callable[[ToolCall, AbortSignal], None]:
    """The store's before_commit, made to reach outside: UNSAFE, a rollback leaves the charge standing."""

    def take_deposit(call: ToolCall, signal: AbortSignal) -> None:
        card.charge(call.id, {"customer": call.args["customer"], "amount": DEPOSIT}, signal)

    return take_deposit


def _deposit_tools(store: Store, card: CardService, *, refund: bool, outbox: bool) -> Tools:
    """The shop's tools, its reserve taking the deposit (in `store`'s before_commit, or through its `outbox`).

    Once a write has settled, the shop checks its books against the card service's (`store.problems(charged=...)`,
    as notebook 09d teaches) and says what it found in its result; with `refund` (compensation), it refunds a
    charge no applied write accounts for. Through the outbox, the message is sent right after the commit, and
    not on the run's signal: it is committed, so the run's stop is not its business; a message that fails stays
    in the outbox.
    """
    tools = dict(store.tools())
    reserve = tools["reserve"].run

    def run(value: Any, signal: AbortSignal, call: ToolCall) -> dict[str, Any]:
        try:
            result = dict(reserve(value, signal, call))
        except WriteRolledBack as error:
            found = store.problems(charged=card.charged())
            if not found:
                raise
            if refund:
                refunded = ", ".join(refund_unapplied(store, card))
                raise WriteRolledBack(f"refunded the deposit of key {refunded} (compensation); {error}") from error
            raise WriteRolledBack(f"{found[0]}; {error}") from error
        if "reservation" not in result:
            return result
        if not outbox:
            result["deposit"] = "taken inside the transaction"
            return result
        sent = store.send_outbox(card.charge)
        if sent and sent[0]["outcome"] == "sent":
            result["deposit"] = "taken after the commit"
        else:
            result["deposit"] = "declined: kept in the outbox, to send again with the same key"
        return result

    run.store, run.card = store, card  # type: ignore[attr-defined]  # what a test looks at after the run
    tools["reserve"] = dataclasses.replace(tools["reserve"], run=run)
    return tools


def _reserves_for_eve() -> Model:
    """Reserves one copy of C for Eve, then says what came of it, and of her deposit."""

    async def model(messages: Sequence[Mapping[str, Any]], signal: AbortSignal) -> Decision:
        if _turn(messages) == 1:
            return calls(call("reserve", {"book": "C", "customer": "eve", "quantity": 1}, "w1"))
        result = _write_result(messages, "w1")
        deposit = f"; deposit {result['deposit']}" if "deposit" in result else ""
        return final(f"Eve: {_reserved(result)}{deposit}")

    return model


def _build_whole_or_nothing(knobs: Mapping[str, int]) -> Agent:
    card = CardService(takes_ms=knobs["card_ms"], fault=FAULTS[knobs["card_service"]])
    refund, outbox = knobs["deposit"] == 1, knobs["deposit"] == 2  # DEPOSIT_WHERE's second and third choices
    store = Store(outbox=deposit_for) if outbox else Store(before_commit=_charges_in_the_transaction(card))
    return _reserves_for_eve(), _deposit_tools(store, card, refund=refund, outbox=outbox), {"approve": _policy(1)}


SCENARIOS: dict[str, Scenario] = {
    scenario.key: scenario
    for scenario in (
        Scenario(
            key="call_ids",
            title="Each result reaches the model tied to its call id",
            input="Look up the books in the catalogue: which can I borrow?",
            build=_build_call_ids,
            limits={"max_turns": 6, "max_calls": 8, "timeout_ms": 2000, "max_chars": 2000},
            knobs=(
                Knob("books", "books to look up", 1, len(BOOKS), 3),
                Knob("per_turn", "lookups per turn", 1, len(BOOKS), 2),
                Knob("slow_a_ms", "looking up A takes (ms)", 0, 200, 50, step=10),
            ),
        ),
        Scenario(
            key="tool_names",
            title="A bad or inherited tool name runs nothing",
            input="Look up book A.",
            build=_build_tool_names,
            limits={"max_turns": 6, "max_calls": 8, "timeout_ms": 2000, "max_chars": 2000},
            knobs=(
                Knob("name", "tool name proposed", 0, len(TOOL_NAMES) - 1, 3, choices=TOOL_NAMES, verbatim=True),
                Knob("good_calls_before", "good calls before it", 0, 2, 1),
            ),
        ),
        Scenario(
            key="tool_args",
            title="Invalid args never reach run",
            input="Look up book A.",
            build=_build_tool_args,
            limits={"max_turns": 6, "max_calls": 8, "timeout_ms": 2000, "max_chars": 2000},
            knobs=(Knob("args", "args proposed", 0, len(TOOL_ARGS) - 1, 1, choices=tuple(a for a, _ in TOOL_ARGS)),),
        ),
        Scenario(
            key="budgets",
            title="The tool-call budget and the turn budget",
            input="Check every book, again and again.",
            build=_build_budgets,
            limits={"max_turns": 4, "max_calls": 6, "timeout_ms": 2000, "max_chars": 4000},
            knobs=(
                Knob("calls_per_turn", "calls per turn", 1, 5, 2),
                Knob("turns_before_answer", "turns before answering", 0, 8, 3),
            ),
        ),
        Scenario(
            key="duplicate_ids",
            title="A repeated call id is refused",
            input="Look up books A, B and C, one a turn.",
            build=_build_duplicate_ids,
            limits={"max_turns": 6, "max_calls": 8, "timeout_ms": 2000, "max_chars": 2000},
            knobs=(
                Knob("turns", "lookup turns", 1, 4, 3),
                Knob("reuse_id_on_turn", "reuse id c1 on turn (0: never)", 0, 4, 2),
            ),
        ),
        Scenario(
            key="deadline",
            title="The deadline holds against a slow or blocking model",
            input="Look up book A.",
            build=_build_deadline,
            limits={"max_turns": 6, "max_calls": 8, "timeout_ms": 500, "max_chars": 2000},
            knobs=(
                # Turn 1 ends at 300 ms, well before the deadline; turn 2 cannot end before 600 ms.
                Knob("model_delay_ms", "model thinks (ms a turn)", 0, 1500, 300, step=10),
                Knob(
                    "blocking",
                    "the model",
                    0,
                    2,
                    0,
                    choices=(
                        "awaits (honours the signal)",
                        "blocks its thread (ignores the signal)",
                        "goes silent in turn 2 (ignores the signal)",
                    ),
                ),
            ),
        ),
        Scenario(
            key="limits",
            title="The context budget, the output budget and cancellation",
            input="Fetch my notes and summarise them.",
            build=_build_limits,
            limits={"max_turns": 6, "max_calls": 8, "timeout_ms": 10_000, "max_chars": 800},
            knobs=(
                Knob("result_size", "chars the tool returns", 0, 3000, 400, step=10),
                Knob("answer_size", "chars of the answer", 0, 1500, 120, step=10),
                Knob("model_delay_ms", "model thinks (ms a turn)", 0, 5000, 0, step=100),
            ),
        ),
        Scenario(
            key="weather",
            title="The tutorial's weather agent, and its boundaries",
            input=WEATHER_GOAL,
            build=_build_weather,
            limits={"max_turns": 5, "max_calls": 8, "timeout_ms": 5000, "max_chars": 2000},
            knobs=(Knob("case", "the model", 0, len(WEATHER_CASES) - 1, 0, choices=WEATHER_CASES),),
            forbid_repeats=True,
        ),
        Scenario(
            key="real_model",
            title="A provider's faults, through the real SDK and adapter",
            input="Is book A on the shelf?",
            build=_build_real_model,
            limits={"max_turns": 6, "max_calls": 8, "timeout_ms": 2000, "max_chars": 4000},
            knobs=(
                Knob("max_tokens", "max_tokens", 0, 1000, 1000, step=10),
                Knob("answer", "the provider's answer", 0, len(PROVIDER_ANSWERS) - 1, 1, choices=PROVIDER_ANSWERS),
                Knob("wire_format", "the wire format", 0, len(WIRE_FORMATS) - 1, 0, choices=WIRE_LABELS, verbatim=True),
            ),
            loop_knobs=("max_tokens",),
        ),
        Scenario(
            key="approval",
            title="No write without a yes, and a no goes back to the model",
            input="I need copies of book C today. (Linus)",
            build=_build_approval,
            limits={"max_turns": 6, "max_calls": 8, "timeout_ms": 2000, "max_chars": 4000},
            knobs=(
                Knob("policy", "the approve policy", 0, len(POLICIES) - 1, 2, choices=POLICIES),
                Knob("copies", "copies Linus asks for", 1, 5, 4),
            ),
        ),
        Scenario(
            key="write_budget",
            title="The write budget, checked with the whole batch before anything runs",
            input="Reserve a copy for each reader of the book club.",
            build=_build_write_budget,
            limits={"max_turns": 6, "max_calls": 16, "timeout_ms": 2000, "max_chars": 8000},
            knobs=(
                Knob("max_writes", "max_writes", 0, 10, 4),
                Knob("writes_per_turn", "writes per turn", 1, 5, 2),
                Knob("turns", "turns of writes", 1, 3, 3),
            ),
            loop_knobs=("max_writes",),
        ),
        Scenario(
            key="at_most_once",
            title="At most once: the idempotency key decides what a repeated write does",
            input="One copy of D, please. (Alan)",
            build=_build_at_most_once,
            limits={"max_turns": 6, "max_calls": 8, "timeout_ms": 2000, "max_chars": 4000},
            knobs=(
                Knob("times", "times the model asks", 1, 4, 2),
                Knob("ids", "its call ids", 0, len(IDS) - 1, 0, choices=IDS),
                Knob("key", "the idempotency key", 0, len(KEYS) - 1, 0, choices=KEYS),
            ),
        ),
        Scenario(
            key="whole_or_nothing",
            title="Whole or nothing in the database; a deposit taken outside it",
            input="One copy of C, please. (Eve)",
            build=_build_whole_or_nothing,
            limits={"max_turns": 6, "max_calls": 8, "timeout_ms": 500, "max_chars": 4000},
            knobs=(
                Knob("write_grace_ms", "write_grace_ms", 0, 3000, 1000, step=100),
                Knob("deposit", "where the deposit is taken", 0, len(DEPOSIT_WHERE) - 1, 0, choices=DEPOSIT_WHERE),
                Knob("card_service", "the card service", 0, len(CARD_SERVICE) - 1, 0, choices=CARD_SERVICE),
                Knob("card_ms", "the card service takes (ms)", 0, 3000, 1000, step=100),
            ),
            loop_knobs=("write_grace_ms",),
        ),
        Scenario(
            key="recovery",
            title="A refused batch goes back to the model, within max_refusals",
            input="Look up book A.",
            build=_build_recovery,
            limits={"max_turns": 6, "max_calls": 8, "timeout_ms": 2000, "max_chars": 4000},
            knobs=(
                Knob("max_refusals", "max_refusals", 0, 5, 1),
                Knob("slips", "times the model slips", 0, 6, 2),
                Knob("slip", "its slip", 0, len(SLIPS) - 1, 0, choices=SLIPS),
            ),
            loop_knobs=("max_refusals",),
        ),
    )
}


__all__ = [
    "DEFAULT_LIMITS",
    "LIMIT_NAMES",
    "SCENARIOS",
    "Knob",
    "Scenario",
    "get_scenario",
    "run_scenario",
]
