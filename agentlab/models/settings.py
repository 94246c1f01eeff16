"""A real model from the learner's settings, or the scripted exchange when there are none (notebook 10).

The settings, all environment variables, in one place:

    AGENTLAB_PROVIDER   openai-chat, openai-responses or anthropic; unset (or "scripted"): the scripted exchange
    AGENTLAB_MODEL      the model id, such as gpt-4.1-mini, claude-sonnet-4-5, or qwen2.5:7b on a local server
    AGENTLAB_API_KEY    the provider's key (a local server takes any value, such as "local")
    AGENTLAB_BASE_URL   optional: another server that speaks the format, such as http://localhost:11434/v1

Without AGENTLAB_PROVIDER, `model_from_env` serves a scripted exchange on
127.0.0.1 and talks to it through the same SDK and adapter: no key, no cost,
the same answer every time. A missing setting fails at once with a message
that names it; a key the provider refuses or a model id it does not know
(models are retired) fails on the first turn, naming the setting too.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import os
import sys
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from agentlab.errors import ConfigError, ModelError
from agentlab.models import loopback
from agentlab.models.adapters import Model, anthropic_messages, openai_chat, openai_responses
from agentlab.models.loopback import LoopbackServer, Reply

ADAPTERS = {"openai-chat": openai_chat, "openai-responses": openai_responses, "anthropic": anthropic_messages}
# Which setting a refusal of the provider points at.
SETTING_FOR_STATUS = {401: "AGENTLAB_API_KEY", 403: "AGENTLAB_API_KEY", 404: "AGENTLAB_MODEL (or AGENTLAB_BASE_URL)"}


@dataclass(frozen=True)
class Settings:
    """Where a live run goes: provider, model id, key and (optionally) a base URL."""

    provider: str
    model: str
    api_key: str
    base_url: str | None = None

    def __repr__(self) -> str:  # never show the key
        return f"Settings(provider={self.provider!r}, model={self.model!r}, base_url={self.base_url!r}, api_key=...)"


def settings_from_env(env: Mapping[str, str] | None = None) -> Settings | None:
    """The AGENTLAB_* settings, checked; None when no provider is set (the scripted exchange)."""
    env = os.environ if env is None else env
    provider = env.get("AGENTLAB_PROVIDER", "").strip()
    if provider in ("", "scripted"):
        return None
    if provider not in ADAPTERS:
        raise ConfigError(
            f"AGENTLAB_PROVIDER={provider!r} is not a provider agentlab knows: set it to one of "
            f"{', '.join(ADAPTERS)}, or unset it for the scripted exchange"
        )
    model = env.get("AGENTLAB_MODEL", "").strip()
    if not model:
        raise ConfigError(f"AGENTLAB_MODEL is not set: set it to a model id of {provider}, such as gpt-4.1-mini")
    key = env.get("AGENTLAB_API_KEY", "").strip()
    if not key:
        raise ConfigError(
            f"AGENTLAB_API_KEY is not set: set it to your {provider} key (for a local server, any value, "
            "such as local), or unset AGENTLAB_PROVIDER for the scripted exchange"
        )
    return Settings(provider, model, key, env.get("AGENTLAB_BASE_URL", "").strip() or None)


def client_for(provider: str, *, api_key: str, base_url: str | None, max_retries: int = 0) -> Any:
    """The official SDK's async client for `provider`; the SDK is imported only here, when asked for.

    In the browser edition (`loopback.IN_PROCESS`) the client's HTTP goes through the in-process transport: it
    reaches the LoopbackServers open in the kernel, and refuses every other URL (there is no network there).
    """
    sdk = _sdk(provider)
    make = sdk.AsyncAnthropic if provider == "anthropic" else sdk.AsyncOpenAI
    if not loopback.IN_PROCESS:
        return make(api_key=api_key, base_url=base_url, max_retries=max_retries)
    http_client = loopback.in_process_client(sdk)
    return make(api_key=api_key, base_url=base_url, max_retries=max_retries, http_client=http_client)


def _sdk_name(provider: str) -> str:
    return "anthropic" if provider == "anthropic" else "openai"


def _sdk(provider: str) -> ModuleType:
    """The provider's SDK, imported; in Pyodide, loaded from the site's own packages first if need be."""
    name = _sdk_name(provider)
    try:
        return importlib.import_module(name)
    except ImportError:
        if sys.platform != "emscripten":
            raise ConfigError(f"{provider} needs its SDK: pip install 'agentlab[{name}]'") from None
    from pyodide.ffi import can_run_sync, run_sync  # type: ignore[import-not-found]

    if not can_run_sync():  # no way to wait for the download here: a cell's import (or `scripted`) loads it
        raise ConfigError(
            f"{provider} needs its SDK, which the browser edition loads from the site as a cell imports it: "
            f"run `import {name}` in a cell, then this one again"
        ) from None
    run_sync(_load_from_site(name))
    importlib.invalidate_caches()
    try:
        return importlib.import_module(name)
    except ImportError as error:
        raise ConfigError(
            f"the browser edition could not load {name} from the site ({error}): reload the page; if it stays so, "
            "the site was built without it (lite/build.py puts it in)"
        ) from None


async def sdk_loaded(provider: str) -> None:
    """In Pyodide, load the provider's SDK from the site's own packages unless it is there (elsewhere: nothing).

    `client_for` does it too where Pyodide can wait for it; awaited here, it works wherever an `await` does.
    """
    if sys.platform == "emscripten" and importlib.util.find_spec(_sdk_name(provider)) is None:
        await _load_from_site(_sdk_name(provider))
        importlib.invalidate_caches()


def _load_from_site(name: str) -> Any:
    """Pyodide's loadPackage: `name` and what it depends on, from the site's own lock and folder (no PyPI)."""
    import pyodide_js  # type: ignore[import-not-found]

    return pyodide_js.loadPackage(name)


@contextlib.asynccontextmanager
async def scripted(
    provider: str, replies: Sequence[Reply], tools: Mapping[str, Any], **options: Any
) -> AsyncIterator[Model]:
    """A model that talks through the real SDK and adapter to a scripted exchange served on 127.0.0.1."""
    if provider not in ADAPTERS:
        raise ConfigError(f"provider must be one of {', '.join(ADAPTERS)}, not {provider!r}")
    await sdk_loaded(provider)
    with LoopbackServer(*replies) as server:
        base_url = server.url if provider == "anthropic" else server.openai_url
        async with client_for(provider, api_key="scripted", base_url=base_url) as client:
            yield ADAPTERS[provider](client, "scripted", tools, **options)


@contextlib.asynccontextmanager
async def model_from_env(
    tools: Mapping[str, Any],
    *,
    script: Sequence[Reply],
    script_provider: str = "openai-chat",
    env: Mapping[str, str] | None = None,
    **options: Any,
) -> AsyncIterator[Model]:
    """The model the settings ask for, or (without AGENTLAB_PROVIDER) `script` served by `scripted`."""
    settings = settings_from_env(env)
    if settings is None:
        async with scripted(script_provider, script, tools, **options) as model:
            yield model
        return
    await sdk_loaded(settings.provider)
    client = client_for(settings.provider, api_key=settings.api_key, base_url=settings.base_url)
    async with client:
        yield _naming_settings(ADAPTERS[settings.provider](client, settings.model, tools, **options))


def _naming_settings(inner: Model) -> Model:
    """The adapter, with a refused key or an unknown model id saying which setting to change."""

    async def model(messages: Sequence[dict[str, Any]], signal: Any) -> dict[str, Any]:
        try:
            return await inner(messages, signal)
        except ModelError as error:
            setting = SETTING_FOR_STATUS.get(getattr(error.__cause__, "status_code", None))  # type: ignore[arg-type]
            if setting:
                error.args = (f"{error.message}; change {setting}",)
            raise

    model.__name__ = model.__qualname__ = inner.__name__
    return model


__all__ = ["ADAPTERS", "Settings", "client_for", "model_from_env", "scripted", "sdk_loaded", "settings_from_env"]
