"""The in-process loopback (the browser edition's: no socket, no thread) against the real HTTP server, in CPython.

`loopback.IN_PROCESS` is what Pyodide sets: here it is set for one side of each comparison, so the same scripted
exchange runs through the real SDKs twice, once over HTTP on 127.0.0.1 and once through the in-process transport
`client_for` gives the SDK, and what each side saw (the requests recorded, the response's status and headers, the
run's result or error) must be the same. Then what only the in-process side has: it refuses every URL that is not
an open server (there is no network in the browser), it starts no thread and opens no socket. Last, the same
exchanges with the SDKs the browser edition carries (openai 2, anthropic 0.x, on httpx 0.28), in a subprocess.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
import zipfile
from pathlib import Path
from typing import Any

import pytest

from agentlab import AgentError, ConfigError, DeadlineError, ModelError, agent_loop
from agentlab.lab.examples import lookup_tools
from agentlab.models import anthropic_messages, loopback, openai_chat, openai_responses
from agentlab.models.loopback import LoopbackServer, Reply, anthropic_reply, chat_reply, responses_reply
from agentlab.models.settings import client_for, scripted

pytest.importorskip("openai")
pytest.importorskip("anthropic")

ROOT = Path(__file__).resolve().parent.parent
PROVIDERS = {  # provider -> (reply builder, adapter)
    "openai-chat": (chat_reply, openai_chat),
    "openai-responses": (responses_reply, openai_responses),
    "anthropic": (anthropic_reply, anthropic_messages),
}
RUN_TIMEOUT_MS = 60_000  # these tests test no deadline but the stall's: a loaded machine must not trip one
SIDES = ("http", "in-process")


def base_url(provider: str, server: LoopbackServer) -> str:
    return server.url if provider == "anthropic" else server.openai_url


def lookup(book: str, call_id: str) -> dict[str, Any]:
    return {"id": call_id, "name": "lookup", "args": {"id": book}}


def seen(request: dict[str, Any], port: int) -> dict[str, Any]:
    """A recorded request with its server's port taken out of the Host header (the two sides' ports differ)."""
    headers = {name: value.replace(f":{port}", ":PORT") for name, value in request["headers"].items()}
    return {"path": request["path"], "headers": headers, "body": request["body"]}


def outcome_of(result: Any) -> Any:
    """A run's result or error as the two sides must agree on it."""
    if isinstance(result, BaseException):
        return (type(result).__name__, str(result))
    return ("answered", result.text, result.usage.tokens, [m.get("call_id") for m in result.history])


async def exchange(side: str, provider: str, *replies: Reply, **limits: Any) -> tuple[Any, list[dict], float]:
    """One run of agent_loop through `client_for`'s client and `provider`'s adapter, on `side`."""
    limits.setdefault("timeout_ms", RUN_TIMEOUT_MS)
    loopback.IN_PROCESS = side == "in-process"
    try:
        with LoopbackServer(*replies) as server:
            assert server.in_process is (side == "in-process")
            tools = lookup_tools()
            started = time.monotonic()
            async with client_for(provider, api_key="k", base_url=base_url(provider, server)) as client:
                try:
                    result: Any = await agent_loop(
                        "Is book A in?", PROVIDERS[provider][1](client, "m", tools), tools, **limits
                    )
                except AgentError as error:
                    result = error
            took = time.monotonic() - started
        return outcome_of(result), [seen(r, server._port) for r in server.requests], took
    finally:
        loopback.IN_PROCESS = False


async def both(provider: str, *replies: Reply, **limits: Any) -> dict[str, tuple[Any, list[dict], float]]:
    return {side: await exchange(side, provider, *replies, **limits) for side in SIDES}


@pytest.fixture(autouse=True)
def over_http_afterwards():
    yield
    loopback.IN_PROCESS = False


# -- the same exchange, both ways ------------------------------------------------------------------------------


@pytest.mark.parametrize("provider", sorted(PROVIDERS))
async def test_a_tool_run_records_the_same_requests_and_ends_the_same(provider):
    reply = PROVIDERS[provider][0]
    script = [reply(calls=[lookup("A", "call_1"), lookup("B", "call_2")], usage=(152, 41)), reply(text="A is in.")]
    runs = await both(provider, *script)
    (http, http_requests, _), (here, here_requests, _) = runs["http"], runs["in-process"]
    assert http == here and http[:2] == ("answered", "A is in.")
    assert len(here_requests) == 2
    assert here_requests == http_requests  # path, every header (names as sent, values) and the JSON bodies


@pytest.mark.parametrize("provider", sorted(PROVIDERS))
@pytest.mark.parametrize("status", [400, 401, 404, 429, 500])
async def test_an_error_status_and_its_message_come_out_the_same(provider, status):
    message = "Invalid value for 'temperature': 7 is above the maximum, 2. Lower it. THE-END"
    body = {"error": {"message": message, "type": "invalid_request_error", "param": "temperature"}}
    runs = await both(provider, Reply(body, status=status, headers={"x-should-retry": "false"}))
    assert runs["http"][0] == runs["in-process"][0]
    kind, text = runs["in-process"][0]
    assert kind == "ModelError" and f"the provider answered {status}" in text and message in text


@pytest.mark.parametrize("provider", sorted(PROVIDERS))
async def test_a_stall_is_ended_by_the_deadline_on_both_sides(provider):
    reply = PROVIDERS[provider][0]
    runs = await both(provider, Reply(reply(text="never").body, stall=True), timeout_ms=300)
    assert runs["http"][0] == runs["in-process"][0]
    assert runs["in-process"][0][0] == "DeadlineError"
    assert all(took < 20 for _, _, took in runs.values())  # the server would stall 60 s
    assert runs["http"][1] == runs["in-process"][1]


@pytest.mark.parametrize(
    "replies",
    [
        [Reply("<html>bad gateway</html>")],  # not JSON
        [chat_reply(calls=[lookup("A", "call_1")])],  # the script runs out: its own 500
        [chat_reply(calls=[{"id": "call_1", "name": "lookup", "args": '{"id": "A",'}])],  # arguments not JSON
        [chat_reply(text="It is", finish_reason="length")],
    ],
    ids=["not-json", "script-runs-out", "args-not-json", "cut-off"],
)
async def test_malformed_and_missing_replies_come_out_the_same(replies):
    runs = await both("openai-chat", *replies)
    assert runs["http"][0] == runs["in-process"][0]
    assert runs["http"][1] == runs["in-process"][1]
    assert runs["in-process"][0][0] != "answered"


@pytest.mark.parametrize("provider", ["openai-chat", "anthropic"])
async def test_the_sdk_sees_the_same_status_and_headers(provider):
    """The raw response, as the SDK hands it over: status, the scripted headers, content-type and -length."""
    reply = Reply({"error": {"message": "slow down"}}, status=429, headers={"x-should-retry": "false", "x-a": "1"})
    seen_by: dict[str, Any] = {}
    for side in SIDES:
        loopback.IN_PROCESS = side == "in-process"
        with LoopbackServer(reply) as server:
            async with client_for(provider, api_key="k", base_url=base_url(provider, server)) as client:
                if provider == "anthropic":
                    ask = client.messages.with_raw_response.create
                    asked = {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}
                else:
                    ask = client.chat.completions.with_raw_response.create
                    asked = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
                try:
                    await ask(**asked)
                except Exception as error:  # the SDK's RateLimitError, with the response
                    response = error.response  # type: ignore[attr-defined]
        headers = {name.lower(): value for name, value in response.headers.items() if name.lower() != "date"}
        seen_by[side] = (response.status_code, headers, response.text)
    assert seen_by["http"] == seen_by["in-process"]
    status, headers, text = seen_by["in-process"]
    assert status == 429 and headers["x-should-retry"] == "false" and headers["x-a"] == "1"
    assert headers["content-type"] == "application/json" and headers["content-length"] == str(len(text))


@pytest.mark.parametrize("provider", ["openai-chat", "anthropic"])
async def test_a_client_read_timeout_on_a_stall_says_the_same(provider):
    reply = PROVIDERS[provider][0]
    seen_by = {}
    for side in SIDES:
        loopback.IN_PROCESS = side == "in-process"
        with LoopbackServer(Reply(reply(text="never").body, stall=True)) as server:
            sdk = __import__("anthropic" if provider == "anthropic" else "openai")
            make = sdk.AsyncAnthropic if provider == "anthropic" else sdk.AsyncOpenAI
            kept = client_for(provider, api_key="k", base_url=base_url(provider, server))
            async with make(api_key="k", base_url=base_url(provider, server), max_retries=0, timeout=0.3,
                            http_client=kept._client) as client:  # fmt: skip
                try:
                    await agent_loop("hi", PROVIDERS[provider][1](client, "m", {}), {}, timeout_ms=RUN_TIMEOUT_MS)
                except AgentError as error:
                    seen_by[side] = (type(error).__name__, str(error).replace(str(server._port), "PORT"))
    assert seen_by["http"] == seen_by["in-process"]
    assert "timed out (the client's own timeout)" in seen_by["in-process"][1]


@pytest.mark.parametrize("provider", ["openai-chat", "anthropic"])
async def test_a_stalled_request_ends_when_the_server_closes(provider):
    reply = PROVIDERS[provider][0]
    seen_by = {}
    for side in SIDES:
        loopback.IN_PROCESS = side == "in-process"
        server = LoopbackServer(Reply(reply(text="never").body, stall=True))
        tools = lookup_tools()
        async with client_for(provider, api_key="k", base_url=base_url(provider, server)) as client:
            model = PROVIDERS[provider][1](client, "m", tools)
            run = asyncio.ensure_future(agent_loop("hi", model, tools, timeout_ms=RUN_TIMEOUT_MS))
            await asyncio.sleep(0.3)
            await asyncio.to_thread(server.close)  # as the playground closes its servers: from another thread
            with pytest.raises(ModelError) as stopped:
                await asyncio.wait_for(run, 20)
        # Over HTTP the chain of causes is httpx's, httpcore's and h11's RemoteProtocolError; in-process, httpx's.
        seen_by[side] = re.sub(
            r"RemoteProtocolError( <- RemoteProtocolError)*", "RemoteProtocolError", str(stopped.value)
        ).replace(str(server._port), "PORT")
    assert seen_by["http"] == seen_by["in-process"]
    assert "was dropped before the response was complete (RemoteProtocolError)" in seen_by["in-process"]


async def test_scripted_and_model_from_env_serve_in_process_too():
    from agentlab.models.settings import model_from_env

    loopback.IN_PROCESS = True
    tools = lookup_tools()
    async with scripted("anthropic", [anthropic_reply(calls=[lookup("A", "toolu_1")]), anthropic_reply(text="in")],
                        tools) as model:  # fmt: skip
        assert (await agent_loop("Is A in?", model, tools)).text == "in"
    async with model_from_env(tools, script=[chat_reply(text="scripted")], env={}) as model:
        assert (await agent_loop("Is A in?", model, tools)).text == "scripted"


# -- what only the in-process side has ---------------------------------------------------------------------------


async def test_it_opens_no_socket_and_starts_no_thread(monkeypatch):
    loopback.IN_PROCESS = True
    threads = set(threading.enumerate())

    def no_socket(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("the in-process loopback opened a socket")

    monkeypatch.setattr(socket, "socket", no_socket)
    with LoopbackServer(chat_reply(calls=[lookup("A", "call_1")]), chat_reply(text="done")) as server:
        assert server.url.startswith("http://127.0.0.1:") and server.openai_url == server.url + "/v1"
        tools = lookup_tools()
        async with client_for("openai-chat", api_key="k", base_url=server.openai_url) as client:
            result = await agent_loop("Is A in?", openai_chat(client, "m", tools), tools)
    assert result.text == "done" and len(server.requests) == 2
    # The SDK's own `asyncify(get_platform)` uses asyncio's executor ("asyncio_0"; inline in Pyodide): not ours.
    started = [thread.name for thread in set(threading.enumerate()) - threads if not thread.name.startswith("asyncio_")]
    assert started == []


async def test_two_open_servers_each_answer_their_own_requests():
    loopback.IN_PROCESS = True
    with LoopbackServer(chat_reply(text="one")) as first, LoopbackServer(chat_reply(text="two")) as second:
        assert first.url != second.url
        tools = lookup_tools()
        for server, text in ((second, "two"), (first, "one")):
            async with client_for("openai-chat", api_key="k", base_url=server.openai_url) as client:
                assert (await agent_loop("hi", openai_chat(client, "m", tools), tools)).text == text
        assert len(first.requests) == len(second.requests) == 1


@pytest.mark.parametrize("provider", sorted(PROVIDERS))
@pytest.mark.parametrize(
    ("url", "phrase"),
    [
        (None, "the browser edition has no network: https://api."),  # the SDK's own default: the real provider
        ("https://api.example.com/v1", "the browser edition has no network: https://api.example.com"),
        ("http://localhost:11434/v1", "no LoopbackServer is open on port 11434"),  # a local Ollama, say
    ],
)
async def test_any_other_url_is_refused_with_a_config_error_that_says_why(provider, url, phrase):
    loopback.IN_PROCESS = True
    tools = lookup_tools()
    async with client_for(provider, api_key="k", base_url=url) as client:
        with pytest.raises(ConfigError) as refused:
            await agent_loop("Is A in?", PROVIDERS[provider][1](client, "m", tools), tools)
    assert phrase in str(refused.value)
    assert "make lab" in str(refused.value) or "LoopbackServer(...)" in str(refused.value)


async def test_a_closed_servers_url_is_refused():
    loopback.IN_PROCESS = True
    with LoopbackServer(chat_reply(text="once")) as server:
        url = server.openai_url
    tools = lookup_tools()
    async with client_for("openai-chat", api_key="k", base_url=url) as client:
        with pytest.raises(ConfigError, match="a closed one answers no more"):
            await agent_loop("hi", openai_chat(client, "m", tools), tools)


async def test_a_deadline_still_holds_against_a_stall_when_nothing_closes_the_server():
    loopback.IN_PROCESS = True
    server = LoopbackServer(Reply(chat_reply(text="never").body, stall=True))
    try:
        async with client_for("openai-chat", api_key="k", base_url=server.openai_url) as client:
            started = time.monotonic()
            with pytest.raises(DeadlineError):
                await agent_loop("hi", openai_chat(client, "m", {}), {}, timeout_ms=200)
            assert time.monotonic() - started < 10
    finally:
        server.close()
    assert server._stalled == []  # the abandoned request stopped waiting for the close


def test_over_http_client_for_passes_no_http_client_of_its_own():
    """CPython's default is unchanged: the SDK makes its own HTTP client, and real URLs are reachable."""
    client = client_for("openai-chat", api_key="k", base_url="http://127.0.0.1:9/v1")
    assert type(client._client._transport).__name__ != "InProcessTransport"
    loopback.IN_PROCESS = True
    client = client_for("openai-chat", api_key="k", base_url="http://127.0.0.1:9/v1")
    assert type(client._client._transport).__name__ == "InProcessTransport"


# -- the SDKs of the browser edition (openai 2, anthropic 0.x, httpx 0.28), in CPython --------------------------

OLD_SDKS_SCRIPT = r"""
import asyncio, json, sys
import anthropic, httpx, openai
from agentlab import AgentError, agent_loop
from agentlab.lab.examples import lookup_tools
from agentlab.models import anthropic_messages, loopback, openai_chat, openai_responses
from agentlab.models.loopback import LoopbackServer, Reply, anthropic_reply, chat_reply, responses_reply
from agentlab.models.settings import client_for

PROVIDERS = {"openai-chat": (chat_reply, openai_chat), "openai-responses": (responses_reply, openai_responses),
             "anthropic": (anthropic_reply, anthropic_messages)}


async def run(side, provider, *replies, **limits):
    loopback.IN_PROCESS = side == "in-process"
    with LoopbackServer(*replies) as server:
        url = server.url if provider == "anthropic" else server.openai_url
        tools = lookup_tools()
        async with client_for(provider, api_key="k", base_url=url) as client:
            try:
                result = await agent_loop("Is A in?", PROVIDERS[provider][1](client, "m", tools), tools, **limits)
                outcome = ["answered", result.text]
            except AgentError as error:
                outcome = [type(error).__name__, str(error)]
    return outcome, [r["body"] for r in server.requests]


async def main():
    found = {"versions": [openai.__version__, anthropic.__version__, httpx.__version__]}
    for provider, (reply, _) in PROVIDERS.items():
        for name, replies, limits in (
            ("run", [reply(calls=[{"id": "call_1", "name": "lookup", "args": {"id": "A"}}]), reply(text="in")], {}),
            ("400", [Reply({"error": {"message": "bad temperature"}}, status=400)], {}),
            ("stall", [Reply(reply(text="never").body, stall=True)], {"timeout_ms": 300}),
        ):
            found[f"{provider} {name}"] = {side: await run(side, provider, *replies, **limits)
                                           for side in ("http", "in-process")}
    loopback.IN_PROCESS = True
    async with client_for("openai-chat", api_key="k", base_url=None) as client:
        try:
            await agent_loop("hi", openai_chat(client, "m", {}), {})
        except AgentError as error:
            found["refused"] = [type(error).__name__, str(error)]
    print(json.dumps(found))


asyncio.run(main())
"""


def _lite_build() -> Any:
    spec = importlib.util.spec_from_file_location("lite_build", ROOT / "lite" / "build.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def old_sdks() -> list[Path]:
    """The browser edition's SDK wheels (pure Python), from lite/build.py's cache; fetched into it if missing."""
    build = _lite_build()
    lock_path = build.NPM_PYODIDE / "pyodide-lock.json"
    if not lock_path.exists():
        pytest.skip(f"npm's pyodide is not installed ({lock_path.relative_to(ROOT)}): run `make test`")
    lock = json.loads(lock_path.read_text())["packages"]
    pins = {name: lock[name]["version"] for name in ("openai", "httpx", "distro")} | {
        "anthropic": build.ADDED["anthropic"]
    }
    try:
        return [build.download(name, version, build.CACHE / "wheels") for name, version in pins.items()]
    except (subprocess.CalledProcessError, build.BuildError) as error:
        if os.environ.get("CI") == "true":
            raise
        pytest.skip(f"could not fetch the browser edition's SDK wheels from PyPI: {error}")


def test_the_browser_editions_sdks_run_the_same_exchanges_both_ways(old_sdks, tmp_path):
    for wheel in old_sdks:  # unpacked, not imported from the zip: anthropic has namespace packages
        with zipfile.ZipFile(wheel) as archive:
            archive.extractall(tmp_path)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)])}
    done = subprocess.run(
        [sys.executable, "-c", OLD_SDKS_SCRIPT], capture_output=True, text=True, env=env, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    openai_version, anthropic_version, httpx_version = found.pop("versions")
    assert openai_version.startswith("2.") and anthropic_version.startswith("0.") and httpx_version == "0.28.1"
    kind, message = found.pop("refused")
    assert kind == "ConfigError" and message.startswith("the browser edition has no network")
    for name, sides in found.items():
        assert sides["http"] == sides["in-process"], name
    for provider in PROVIDERS:
        assert found[f"{provider} run"]["in-process"][0] == ["answered", "in"]
        assert len(found[f"{provider} run"]["in-process"][1]) == 2
        assert "bad temperature" in found[f"{provider} 400"]["in-process"][0][1]
        assert found[f"{provider} stall"]["in-process"][0][0] == "DeadlineError"
