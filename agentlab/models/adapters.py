"""Adapters: a learner's own SDK client as a `model(messages, signal)` for `agent_loop`.

    model = openai_chat(AsyncOpenAI(), "gpt-4.1-mini", tools)          # or any OpenAI-compatible server
    model = openai_responses(AsyncOpenAI(), "gpt-4.1-mini", tools)
    model = anthropic_messages(AsyncAnthropic(), "claude-sonnet-4-5", tools)

Each turn the adapter converts the whole history (see the `*_format`
modules), sends it with the SDK, and converts the response back. The SDK only
carries bytes: the adapter reads the raw response body itself, because the
SDKs do not check what a model sends (arguments that are not JSON, a missing
id, a wrong type all come through untouched). The adapter is the trust
boundary for the wire format; the loop stays the boundary for everything else.

The signal cancels the request: on a deadline or Stop the HTTP request is
abandoned at once, however long the server takes. Both SDKs retry failed
requests (2 retries by default, and anthropic obeys any `Retry-After`): that
time counts against the run's `timeout_ms`, which holds regardless. Pass a
client made with `max_retries=0` if a run's time matters more than a retry.

Mistakes of configuration are a ConfigError when the adapter is made, before
any request: a sync client, a model id that is not a string, tools that are
not a mapping, an option the SDK's `create` does not take. An SDK client keeps
its connections on the event loop it first used; a run on another loop is a
ConfigError too, before its request (`agent_loop_sync` keeps one loop for its
runs, so a client serves run after run there).

No SDK is imported here: the client you pass is the only contact.
"""

from __future__ import annotations

import asyncio
import difflib
import inspect
import json
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from agentlab.abort import AbortSignal
from agentlab.errors import AgentError, ConfigError, ModelError
from agentlab.models import anthropic_format, chat_format, responses_format
from agentlab.models.transcript import malformed, wellformed

Model = Callable[[Sequence[dict[str, Any]], AbortSignal], Any]

# What a status tells a learner to change.
HINTS = {
    400: "the provider refused the request as invalid: its message names the field; check the adapter's "
    "options and the model id",
    401: "the provider refused the API key: check it",
    403: "the key may not use this model or endpoint",
    404: "no such model or endpoint: check the model id (models are retired) and the base_url",
    413: "the request is too large for the provider: lower max_chars, or keep tool results shorter",
    422: "the provider could not process the request: its message names the field; check the adapter's options",
    429: "rate limited or out of credit: wait, or check the account's limits",
}

# The request fields each adapter writes itself: an option of the same name is a mistake, and what to use instead.
OWN_OPTIONS = {
    "chat.completions": {
        "model": "the adapter's model argument",
        "messages": "nothing: the loop's history is sent",
        "tools": "the adapter's tools argument",
        "max_completion_tokens": "max_output_tokens=",
        "max_tokens": "max_output_tokens=",
    },
    "responses": {
        "model": "the adapter's model argument",
        "input": "nothing: the loop's history is sent",
        "tools": "the adapter's tools argument",
        "instructions": "system=",
    },
    "messages": {
        "model": "the adapter's model argument",
        "messages": "nothing: the loop's history is sent",
        "tools": "the adapter's tools argument",
        "max_tokens": "max_output_tokens=",
    },
}
# How many calls' thinking blocks an Anthropic adapter keeps for the next request (the API needs the last batch's).
THINKING_KEPT = 256


def openai_chat(
    client: Any,
    model: str,
    tools: Mapping[str, Any] | None = None,
    *,
    system: str | None = None,
    max_output_tokens: int | None = None,
    **options: Any,
) -> Model:
    """Chat Completions through `openai.AsyncOpenAI` (also Ollama, llama.cpp, vLLM, LM Studio via `base_url`).

    `options` go into every request as they are (`temperature=0`, `parallel_tool_calls=False`, ...).
    """
    name = f"openai_chat({model!r})"
    endpoint = _endpoint(client, "chat.completions", "openai.AsyncOpenAI", name)
    _check_settings(name, model, tools, system, max_output_tokens)
    _check_options(name, endpoint, "chat.completions", options)
    specs = chat_format.tool_specs(tools or {})

    def request(messages: Sequence[dict[str, Any]]) -> dict[str, Any]:
        body = {"model": model, "messages": chat_format.to_messages(messages, system), **options}
        if specs:
            body["tools"] = specs
        if max_output_tokens is not None:
            body["max_completion_tokens"] = max_output_tokens
        return body

    return _adapter(f"openai_chat({model})", client, endpoint, request, chat_format)


def openai_responses(
    client: Any,
    model: str,
    tools: Mapping[str, Any] | None = None,
    *,
    system: str | None = None,
    max_output_tokens: int | None = None,
    **options: Any,
) -> Model:
    """The Responses API through `openai.AsyncOpenAI`: the whole transcript each turn, `store=False`."""
    name = f"openai_responses({model!r})"
    endpoint = _endpoint(client, "responses", "openai.AsyncOpenAI", name)
    _check_settings(name, model, tools, system, max_output_tokens)
    _check_options(name, endpoint, "responses", options)
    specs = responses_format.tool_specs(tools or {})

    def request(messages: Sequence[dict[str, Any]]) -> dict[str, Any]:
        body = {"model": model, "input": responses_format.to_input(messages), "store": False, **options}
        if system:
            body["instructions"] = system
        if specs:
            body["tools"] = specs
        if max_output_tokens is not None:
            body["max_output_tokens"] = max_output_tokens
        return body

    return _adapter(f"openai_responses({model})", client, endpoint, request, responses_format)


def anthropic_messages(
    client: Any,
    model: str,
    tools: Mapping[str, Any] | None = None,
    *,
    system: str | None = None,
    max_output_tokens: int = 1024,
    **options: Any,
) -> Model:
    """Anthropic Messages through `anthropic.AsyncAnthropic` (`max_tokens` is required there: `max_output_tokens`).

    With extended thinking (`thinking={...}`), the thinking blocks that come with a batch of calls go back
    with it in the next request, unchanged, as the API requires.
    """
    name = f"anthropic_messages({model!r})"
    endpoint = _endpoint(client, "messages", "anthropic.AsyncAnthropic", name)
    _check_settings(name, model, tools, system, max_output_tokens)
    _check_options(name, endpoint, "messages", options)
    specs = anthropic_format.tool_specs(tools or {})
    thinking: dict[str, list[dict[str, Any]]] = {}  # call id -> the thinking blocks just before it

    def request(messages: Sequence[dict[str, Any]]) -> dict[str, Any]:
        body = {
            "model": model,
            "messages": anthropic_format.to_messages(messages, thinking),
            "max_tokens": max_output_tokens,
            **options,
        }
        if system:
            body["system"] = system
        if specs:
            body["tools"] = specs
        return body

    def keep_thinking(response: Any) -> None:
        thinking.update(anthropic_format.thinking_of(response))
        for call_id in list(thinking)[:-THINKING_KEPT]:  # the oldest go first
            del thinking[call_id]

    return _adapter(f"anthropic_messages({model})", client, endpoint, request, anthropic_format, keep_thinking)


def _endpoint(client: Any, path: str, wanted: str, name: str) -> Callable[..., Any]:
    """`client.<path>.with_raw_response.create`: the SDK sends, we read the body ourselves."""
    target = client
    for part in path.split("."):
        target = getattr(target, part, None)
    create = getattr(getattr(target, "with_raw_response", None), "create", None)
    if not callable(create):
        raise ConfigError(f"{name} expected a client such as {wanted}(...), got {type(client).__name__}")
    if not inspect.iscoroutinefunction(create):
        raise ConfigError(
            f"{name} needs the async client, {wanted}(...), but got {type(client).__name__}, a sync one: its "
            f"requests would block the run's event loop, and with it the deadline and Stop. Make the client with "
            f"{wanted.split('.')[-1]}(...), same arguments; agent_loop_sync takes it too"
        )
    return create


def _check_settings(name: str, model: Any, tools: Any, system: Any, max_output_tokens: Any) -> None:
    """The adapter's own arguments, checked when it is made."""
    if not isinstance(model, str) or not model.strip():
        raise ConfigError(
            f"{name}: the model must be the provider's model id as a string, such as 'gpt-4.1-mini' or "
            f"'claude-sonnet-4-5', got {type(model).__name__} {model!r:.60}; the arguments are (client, model, tools)"
        )
    if tools is not None and not isinstance(tools, Mapping):
        raise ConfigError(
            f"{name}: tools must be a mapping of names to tools, such as {{'lookup': Tool(...)}}, the same one "
            f"agent_loop gets, not {type(tools).__name__}"
        )
    if system is not None and not isinstance(system, str):
        raise ConfigError(f"{name}: system must be a string (the system prompt), not {type(system).__name__}")
    whole = isinstance(max_output_tokens, int) and not isinstance(max_output_tokens, bool)
    if max_output_tokens is not None and not (whole and max_output_tokens > 0):
        raise ConfigError(
            f"{name}: max_output_tokens must be a whole number of tokens above 0, got {max_output_tokens!r:.40}"
        )


def _check_options(name: str, create: Callable[..., Any], path: str, options: Mapping[str, Any]) -> None:
    """Every option must be one the SDK's `create` takes, and not a field the adapter writes itself."""
    for option in options:
        instead = OWN_OPTIONS[path].get(option)
        if instead:
            raise ConfigError(f"{name}: {option}= is written by the adapter itself; use {instead}")
    if options.get("stream"):
        raise ConfigError(f"{name}: stream=True is not supported: the adapter reads each response whole")
    try:
        taken = inspect.signature(create).parameters
    except (TypeError, ValueError):  # no signature to read: the SDK will say
        return
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in taken.values()):
        return
    for option in options:
        if option not in taken:
            close = difflib.get_close_matches(option, list(taken), n=1)
            guess = f"; did you mean {close[0]}=?" if close else ""
            raise ConfigError(
                f"{name}: the SDK's client.{path}.create takes no option {option!r}{guess} Options go into every "
                f"request as they are, under the SDK's own names; for a field only your server knows, pass "
                f"extra_body={{{option!r}: ...}}"
            )


# The event loop each client first talked on: its connections stay bound to that loop (weakly held, both).
_HOMES: weakref.WeakKeyDictionary[Any, weakref.ref[asyncio.AbstractEventLoop]] = weakref.WeakKeyDictionary()


def _check_home_loop(client: Any, homes: dict[int, Any]) -> None:
    """A client that talked on one event loop cannot talk on another: say so before the SDK fails obscurely."""
    loop = asyncio.get_running_loop()
    try:
        home = _HOMES.get(client)
    except TypeError:  # a client that cannot be weakly referenced: this adapter keeps its own record
        home = homes.get(0)
    if home is None:
        return
    if home() is not loop:
        raise ConfigError(
            f"this {type(client).__name__} has already talked to the provider on another event loop, and the "
            "SDK keeps its connections there (this one would fail with 'Event loop is closed' or hang). Make a "
            "new client for this event loop, or make every run on one loop: `await agent_loop(...)` runs inside "
            "one async function, or agent_loop_sync for each run (it keeps one loop while runs take turns)"
        )


def _record_home_loop(client: Any, homes: dict[int, Any]) -> None:
    home = weakref.ref(asyncio.get_running_loop())
    try:
        _HOMES.setdefault(client, home)
    except TypeError:
        homes.setdefault(0, home)


def _adapter(
    name: str,
    client: Any,
    create: Callable[..., Any],
    request: Callable[[Sequence[dict[str, Any]]], dict[str, Any]],
    wire: Any,
    on_response: Callable[[Any], None] | None = None,
) -> Model:
    """The model function: convert, send, read the body, convert back (`wire` is one of the *_format modules)."""
    homes: dict[int, Any] = {}

    async def model(messages: Sequence[dict[str, Any]], signal: AbortSignal) -> dict[str, Any]:
        _check_home_loop(client, homes)
        body = wellformed(request(messages))  # no lone surrogate reaches the SDK's UTF-8 encoder
        try:
            text = await until_aborted(_fetch(create, body), signal)
        except asyncio.CancelledError:
            raise
        except Exception as error:
            if signal is not None and error is signal.reason:  # stopped: the signal's own reason, as it is
                raise
            raise _provider_error(error) from error
        _record_home_loop(client, homes)
        try:
            response = json.loads(text)
        except ValueError:
            raise malformed(f"malformed response: the body is not JSON: {text[:120]!r}", text[:2000]) from None
        try:
            decision = wire.decision_from(response)
        except AgentError as error:  # refused, but paid for: the loop counts the turn's tokens all the same
            error.tokens = wire.tokens_of(response)
            raise
        except Exception as error:  # a shape no check foresaw: still the provider's fault, said as such
            raise malformed(
                f"malformed response: reading the {wire.FORMAT} response raised {type(error).__name__}: {error}",
                response,
            ) from None
        if on_response is not None:
            on_response(response)
        return decision

    model.__name__ = model.__qualname__ = name
    return model


async def _fetch(create: Callable[..., Any], body: dict[str, Any]) -> str:
    """Send the request and read the body as text: a property in openai 3, an async method in anthropic 2."""
    raw = await create(**body)
    text = raw.text
    if callable(text):
        text = text()
    return await text if inspect.isawaitable(text) else text


async def until_aborted(request: Any, signal: AbortSignal | None) -> Any:
    """Await `request`, abandoning it (the HTTP connection closes) the moment `signal` aborts."""
    task = asyncio.ensure_future(request)
    if signal is None:
        return await task
    loop = asyncio.get_running_loop()
    forget = signal.add_callback(lambda _reason: loop.call_soon_threadsafe(task.cancel))
    try:
        return await task
    except asyncio.CancelledError:
        current = asyncio.current_task()
        if signal.aborted and current is not None and not current.cancelling():
            raise signal.reason from None  # type: ignore[misc]
        raise
    finally:
        forget()


# A response body that is not the provider's JSON error (a proxy's HTML page, say) is kept up to this many characters.
MAX_BODY_SHOWN = 2000


def _provider_error(error: Exception) -> AgentError:
    """An SDK's error (a status, a refused or dropped connection, a timeout) as a ModelError saying what to change.

    A ConfigError of agentlab's own under the SDK's error (the in-process transport refusing a URL it cannot
    reach: `agentlab.models.loopback`) is the learner's to fix, and says how: it comes out as it is.
    """
    own = _own_config_error(error)
    if own is not None:
        return ConfigError(own.message)
    status = getattr(error, "status_code", None)
    if isinstance(status, int):
        hint = HINTS.get(status, "the provider failed; try again later" if status >= 500 else "")
        said = _provider_message(error)
        return ModelError(f"the provider answered {status}: {said}" + (f" ({hint})" if hint else ""))
    kinds = {kind.__name__ for kind in type(error).__mro__}
    if "APIConnectionError" in kinds:
        request = getattr(error, "request", None)
        where = getattr(request, "url", None) or "the provider"
        causes = _causes(error)
        if "APITimeoutError" in kinds:
            return ModelError(
                f"the request to {where} timed out (the client's own timeout): the server is slow or stalled; "
                "raise the client's timeout=, or check the server"
            )
        if "ConnectError" in causes or "ConnectionRefusedError" in causes:
            return ModelError(
                f"could not connect to {where}: is the server running, and are the base URL and its port right? "
                "(a local server: start it; a provider: check base_url, or unset it for the provider's own)"
            )
        why = " <- ".join(causes) or "no cause given"
        return ModelError(
            f"the connection to {where} was dropped before the response was complete ({why}): the server closed "
            "it, crashed or restarted; check that it is running, and its log, then try again"
        )
    return ModelError(f"the request to the provider failed: {type(error).__name__}: {error}")


def _provider_message(error: Exception) -> str:
    """The provider's own message for an error status, whole: it often says exactly what to change."""
    body = getattr(error, "body", None)
    inner = body.get("error") if isinstance(body, dict) and isinstance(body.get("error"), dict) else body
    message = inner.get("message") if isinstance(inner, dict) else None
    if isinstance(message, str) and message:
        param = inner.get("param")
        return message + (f" (param {param!r})" if isinstance(param, str) and param and param not in message else "")
    text = getattr(error, "message", None) or str(error)
    return text if len(text) <= MAX_BODY_SHOWN else text[:MAX_BODY_SHOWN] + f"... ({len(text)} characters)"


def _own_config_error(error: BaseException) -> ConfigError | None:
    """The first ConfigError down an exception's chain (the exception itself included), if any."""
    seen: BaseException | None = error
    for _ in range(8):
        if seen is None or isinstance(seen, ConfigError):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


def _causes(error: BaseException) -> list[str]:
    """The class names down an exception's chain of causes, for telling a refused connection from a dropped one."""
    names: list[str] = []
    seen = error.__cause__ or error.__context__
    while seen is not None and len(names) < 8:
        names.append(type(seen).__name__)
        seen = seen.__cause__ or seen.__context__
    return names


__all__ = ["HINTS", "OWN_OPTIONS", "anthropic_messages", "openai_chat", "openai_responses", "until_aborted"]
