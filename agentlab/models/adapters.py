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

No SDK is imported here: the client you pass is the only contact.
"""

from __future__ import annotations

import asyncio
import inspect
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from agentlab.abort import AbortSignal
from agentlab.errors import AgentError, ConfigError, ModelError
from agentlab.models import anthropic_format, chat_format, responses_format
from agentlab.models.transcript import malformed

Model = Callable[[Sequence[dict[str, Any]], AbortSignal], Any]

# What a status tells a learner to change.
HINTS = {
    401: "the provider refused the API key: check it",
    403: "the key may not use this model or endpoint",
    404: "no such model or endpoint: check the model id (models are retired) and the base_url",
    429: "rate limited or out of credit: wait, or check the account's limits",
}


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
    endpoint = _endpoint(client, "chat.completions", "openai.AsyncOpenAI")
    specs = chat_format.tool_specs(tools or {})

    def request(messages: Sequence[dict[str, Any]]) -> dict[str, Any]:
        body = {"model": model, "messages": chat_format.to_messages(messages, system), **options}
        if specs:
            body["tools"] = specs
        if max_output_tokens is not None:
            body["max_completion_tokens"] = max_output_tokens
        return body

    return _adapter(f"openai_chat({model})", endpoint, request, chat_format)


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
    endpoint = _endpoint(client, "responses", "openai.AsyncOpenAI")
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

    return _adapter(f"openai_responses({model})", endpoint, request, responses_format)


def anthropic_messages(
    client: Any,
    model: str,
    tools: Mapping[str, Any] | None = None,
    *,
    system: str | None = None,
    max_output_tokens: int = 1024,
    **options: Any,
) -> Model:
    """Anthropic Messages through `anthropic.AsyncAnthropic` (`max_tokens` is required there: `max_output_tokens`)."""
    endpoint = _endpoint(client, "messages", "anthropic.AsyncAnthropic")
    specs = anthropic_format.tool_specs(tools or {})

    def request(messages: Sequence[dict[str, Any]]) -> dict[str, Any]:
        body = {
            "model": model,
            "messages": anthropic_format.to_messages(messages),
            "max_tokens": max_output_tokens,
            **options,
        }
        if system:
            body["system"] = system
        if specs:
            body["tools"] = specs
        return body

    return _adapter(f"anthropic_messages({model})", endpoint, request, anthropic_format)


def _endpoint(client: Any, path: str, wanted: str) -> Callable[..., Any]:
    """`client.<path>.with_raw_response.create`: the SDK sends, we read the body ourselves."""
    target = client
    for part in path.split("."):
        target = getattr(target, part, None)
    create = getattr(getattr(target, "with_raw_response", None), "create", None)
    if not callable(create):
        raise ConfigError(f"expected a client such as {wanted}(...), got {type(client).__name__}")
    return create


def _adapter(
    name: str,
    create: Callable[..., Any],
    request: Callable[[Sequence[dict[str, Any]]], dict[str, Any]],
    wire: Any,
) -> Model:
    """The model function: convert, send, read the body, convert back (`wire` is one of the *_format modules)."""

    async def model(messages: Sequence[dict[str, Any]], signal: AbortSignal) -> dict[str, Any]:
        body = request(messages)
        try:
            text = await until_aborted(_fetch(create, body), signal)
        except asyncio.CancelledError:
            raise
        except Exception as error:
            if signal is not None and error is signal.reason:  # stopped: the signal's own reason, as it is
                raise
            raise _provider_error(error) from error
        try:
            response = json.loads(text)
        except ValueError:
            raise malformed(f"malformed response: the body is not JSON: {text[:120]!r}", text[:2000]) from None
        try:
            return wire.decision_from(response)
        except AgentError as error:  # refused, but paid for: the loop counts the turn's tokens all the same
            error.tokens = wire.tokens_of(response)
            raise

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


def _provider_error(error: Exception) -> ModelError:
    """An SDK's error (a status, a dropped connection, a timeout) as a ModelError that says what to change."""
    status = getattr(error, "status_code", None)
    if isinstance(status, int):
        hint = HINTS.get(status, "the provider failed; try again later" if status >= 500 else "")
        detail = getattr(error, "message", None) or str(error)
        return ModelError(f"the provider answered {status}: {detail:.200}" + (f" ({hint})" if hint else ""))
    return ModelError(f"the request to the provider failed: {type(error).__name__}: {error}")


__all__ = ["HINTS", "anthropic_messages", "openai_chat", "openai_responses", "until_aborted"]
