"""The faults real SDK clients and real servers produce, through the official SDKs, recovered or refused clearly.

Written from scratch, not from the adapters' happy path: the provider here is `StrictProvider`, a small HTTP
server of this file (not agentlab.models.loopback) that plays hand-written responses and checks every transcript
it gets the way the real APIs do (every call id answered once, right after its batch; Anthropic's id pattern and
its thinking blocks), answering 400 in the provider's own words when one is broken. The rude servers below drop
or hold connections; the wrong configurations are made with the real async and sync clients.
"""

from __future__ import annotations

import asyncio
import json
import re
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from agentlab import (
    ConfigError,
    ModelError,
    ModelOutputError,
    TokenBudgetError,
    Tool,
    agent_loop,
    agent_loop_sync,
    parse_lookup_args,
)
from agentlab.lab.examples import LOOKUP_PARAMETERS
from agentlab.models import anthropic_messages, openai_chat, openai_responses
from agentlab.sync import HOME, run_on_new_loop

openai = pytest.importorskip("openai")
anthropic = pytest.importorskip("anthropic")

KINDS = ("chat", "responses", "anthropic")
ANTHROPIC_ID = re.compile(r"^[a-zA-Z0-9_-]+$")  # what the Messages API accepts as a tool_use id
RUN_TIMEOUT_MS = 60_000  # these tests test no deadline: a loaded machine must not trip one


# -- tools that count what ran ---------------------------------------------------------------------


def counting_tools() -> tuple[dict[str, Tool], list[Any]]:
    """A `lookup` tool that records every args it ran with."""
    ran: list[Any] = []

    async def lookup(args: dict, signal: Any) -> dict:
        ran.append(args["id"])
        return {"id": args["id"], "found": args["id"] == "A"}

    tool = Tool(validate=parse_lookup_args, run=lookup, description="Look a book up.", parameters=LOOKUP_PARAMETERS)
    return {"lookup": tool}, ran


# -- a strict fake of the three APIs ----------------------------------------------------------------


def transcript_problem(kind: str, body: dict) -> str | None:
    """What a real API would refuse in this request body, in words like its own; None if it is valid."""
    if kind == "chat":
        messages, index = body.get("messages", []), 0
        while index < len(messages):
            message = messages[index]
            index += 1
            if message.get("role") == "tool":
                return f"messages.[{index - 1}].role: 'tool' must be a response to a preceding 'tool_calls'"
            asked = [call.get("id") for call in message.get("tool_calls") or []]
            if not asked:
                continue
            for call in message["tool_calls"]:
                json.loads(call["function"]["arguments"])  # sent-back arguments must be JSON
            answered = []
            while index < len(messages) and messages[index].get("role") == "tool":
                answered.append(messages[index].get("tool_call_id"))
                index += 1
            if sorted(answered) != sorted(asked) or len(set(asked)) != len(asked):
                return (
                    "An assistant message with 'tool_calls' must be followed by tool messages responding to each "
                    f"'tool_call_id'. asked {asked}, answered {answered}"
                )
        return None
    if kind == "responses":
        calls: list[str] = []
        outputs: list[str] = []
        for item in body.get("input", []):
            if item.get("type") == "function_call":
                if not isinstance(item.get("call_id"), str) or not item["call_id"]:
                    return "Invalid 'input[].call_id': empty string."
                calls.append(item["call_id"])
            elif item.get("type") == "function_call_output":
                if item.get("call_id") not in calls:
                    return f"No tool call found for function call output with call_id {item.get('call_id')}."
                outputs.append(item["call_id"])
        if sorted(calls) != sorted(outputs) or len(set(calls)) != len(calls):
            return f"No tool output found for function call: calls {calls}, outputs {outputs}"
        return None
    messages = body.get("messages", [])
    thinking_on = isinstance(body.get("thinking"), dict) and body["thinking"].get("type") == "enabled"
    for number, message in enumerate(messages):
        if number and messages[number - 1]["role"] == message["role"]:
            return f"messages: roles must alternate, but messages.{number} repeats {message['role']!r}"
        if message["role"] != "assistant":
            continue
        uses = [block for block in message["content"] if block.get("type") == "tool_use"]
        for block in uses:
            if not isinstance(block.get("id"), str) or not ANTHROPIC_ID.match(block["id"]):
                return f"messages.{number}.content.tool_use.id: String should match pattern '^[a-zA-Z0-9_-]+$'"
            if not isinstance(block.get("input"), dict):
                return f"messages.{number}.content.tool_use.input: Input should be a valid dictionary"
        if uses and thinking_on and message["content"][0].get("type") not in ("thinking", "redacted_thinking"):
            return (
                f"messages.{number}.content.0.type: Expected `thinking` or `redacted_thinking`, but found "
                f"{message['content'][0].get('type')!r}. When `thinking` is enabled, an assistant message with "
                "tool_use must start with a thinking block"
            )
        if uses:
            after = messages[number + 1]["content"] if number + 1 < len(messages) else []
            results = [block.get("tool_use_id") for block in after if block.get("type") == "tool_result"]
            if sorted(results) != sorted(block["id"] for block in uses):
                return "`tool_use` ids were found without `tool_result` blocks immediately after"
    return None


class StrictProvider:
    """127.0.0.1: plays `replies` in order (a dict is sent as JSON, a str as it is), checking each transcript."""

    def __init__(self, kind: str, *replies: dict | str | tuple[int, dict]) -> None:
        self.kind, self.replies = kind, list(replies)
        self.bodies: list[dict] = []  # each request's JSON body, in order
        self.problems: list[str] = []  # what a real API would have refused
        self.keep_alive = True
        provider = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers["content-length"]))
                body = json.loads(raw.decode("utf-8"))  # strict UTF-8: a lone surrogate could not have come
                provider.bodies.append(body)
                status, reply = provider.answer(body)
                data = (reply if isinstance(reply, str) else json.dumps(reply)).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.send_header("x-should-retry", "false")
                if not provider.keep_alive:
                    self.send_header("connection", "close")
                    self.close_connection = True
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def answer(self, body: dict) -> tuple[int, Any]:
        problem = transcript_problem(self.kind, body)
        if problem:
            self.problems.append(problem)
            return 400, {"error": {"message": problem, "type": "invalid_request_error"}}
        if len(self.bodies) > len(self.replies):
            return 500, {"error": {"message": "no more scripted replies"}}
        reply = self.replies[len(self.bodies) - 1]
        return reply if isinstance(reply, tuple) else (200, reply)

    @property
    def base_url(self) -> str:
        host = f"http://127.0.0.1:{self.server.server_address[1]}"
        return host if self.kind == "anthropic" else host + "/v1"

    def __enter__(self) -> StrictProvider:
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


def async_client(kind: str, base_url: str, **options: Any) -> Any:
    if kind == "anthropic":
        return anthropic.AsyncAnthropic(base_url=base_url, api_key="k", max_retries=0, **options)
    return openai.AsyncOpenAI(base_url=base_url, api_key="k", max_retries=0, **options)


ADAPTER = {"chat": openai_chat, "responses": openai_responses, "anthropic": anthropic_messages}


# -- responses, written by hand in each wire format --------------------------------------------------


def with_calls(kind: str, *calls: dict[str, Any]) -> dict:
    """A response proposing `calls`: each {"id"?, "args" (the wire's own: a string, or Anthropic's input)}.

    A call without "id" has none on the wire: the key is left out (Chat), null (Anthropic), empty (Responses).
    """
    if kind == "chat":
        tool_calls = []
        for call in calls:
            entry = {"type": "function", "function": {"name": "lookup", "arguments": call["args"]}}
            if "id" in call:
                entry["id"] = call["id"]
            tool_calls.append(entry)
        return {
            "id": "chatcmpl-9",
            "object": "chat.completion",
            "created": 1,
            "model": "m",
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "tool_calls",
                    "message": {"role": "assistant", "content": None, "tool_calls": tool_calls},
                }
            ],
            "usage": {"prompt_tokens": 30, "completion_tokens": 9, "total_tokens": 39},
        }
    if kind == "responses":
        output = [
            {
                "type": "function_call",
                "id": f"fc_{n}",
                "call_id": call.get("id", ""),
                "name": "lookup",
                "arguments": call["args"],
                "status": "completed",
            }
            for n, call in enumerate(calls)
        ]
        return {
            "id": "resp_9",
            "object": "response",
            "created_at": 1,
            "model": "m",
            "status": "completed",
            "output": output,
            "usage": {"input_tokens": 30, "output_tokens": 9, "total_tokens": 39},
        }
    content = [{"type": "tool_use", "id": call.get("id"), "name": "lookup", "input": call["args"]} for call in calls]
    return anthropic_body(content, "tool_use")


def anthropic_body(content: list[dict], stop_reason: Any) -> dict:
    return {
        "id": "msg_9",
        "type": "message",
        "role": "assistant",
        "model": "m",
        "content": content,
        "stop_reason": stop_reason,
        "usage": {"input_tokens": 30, "output_tokens": 9},
    }


def answer(kind: str, text: str) -> dict:
    """A final answer."""
    if kind == "chat":
        message = {"role": "assistant", "content": text}
        return {"id": "c", "object": "chat.completion", "created": 1, "model": "m", "choices": [
            {"index": 0, "finish_reason": "stop", "message": message}
        ]}  # fmt: skip
    if kind == "responses":
        part = {"type": "output_text", "text": text, "annotations": []}
        item = {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed", "content": [part]}
        return {"id": "r", "object": "response", "created_at": 1, "model": "m", "status": "completed", "output": [item]}
    return anthropic_body([{"type": "text", "text": text}], "end_turn")


def good(kind: str, call_id: str, book: str) -> dict[str, Any]:
    return {"id": call_id, "args": {"id": book} if kind == "anthropic" else json.dumps({"id": book})}


def sent_calls(kind: str, body: dict) -> list[tuple[str, Any]]:
    """The calls a request sends back: (id, args as sent)."""
    if kind == "chat":
        return [(c["id"], c["function"]["arguments"]) for m in body["messages"] for c in m.get("tool_calls") or []]
    if kind == "responses":
        return [(i["call_id"], i["arguments"]) for i in body["input"] if i.get("type") == "function_call"]
    return [
        (b["id"], b["input"]) for m in body["messages"] if m["role"] == "assistant" for b in m["content"]
        if b["type"] == "tool_use"
    ]  # fmt: skip


def sent_results(kind: str, body: dict) -> dict[str, str]:
    """The results a request sends back, by call id."""
    if kind == "chat":
        return {m["tool_call_id"]: m["content"] for m in body["messages"] if m["role"] == "tool"}
    if kind == "responses":
        return {i["call_id"]: i["output"] for i in body["input"] if i.get("type") == "function_call_output"}
    return {
        b["tool_use_id"]: b["content"] for m in body["messages"] if m["role"] == "user" for b in m["content"]
        if b["type"] == "tool_result"
    }  # fmt: skip


async def run_against(provider: StrictProvider, tools: dict, question: str = "Is book A in?", **limits: Any) -> Any:
    """agent_loop through the real async SDK client and the adapter; the result, or the error it raised."""
    limits.setdefault("timeout_ms", RUN_TIMEOUT_MS)
    options = limits.pop("adapter_options", {})
    async with async_client(provider.kind, provider.base_url) as client:
        model = ADAPTER[provider.kind](client, "m", tools, **options)
        try:
            return await agent_loop(question, model, tools, **limits)
        except Exception as error:
            return error


# == 1. A real model's malformed call goes back to the model =========================================

BROKEN = {"chat": '{"id": "A",', "responses": '{"id": "A"', "anthropic": '{"id": "A"}'}  # Anthropic: a string input


@pytest.mark.parametrize("kind", KINDS)
async def test_arguments_that_are_not_json_go_back_to_the_model_and_the_run_recovers(kind):
    tools, ran = counting_tools()
    script = [with_calls(kind, {"id": "call_x1", "args": BROKEN[kind]}), with_calls(kind, good(kind, "call_x2", "A"))]
    with StrictProvider(kind, *script, answer(kind, "A is in.")) as provider:
        result = await run_against(provider, tools, max_refusals=1)
    assert not provider.problems, provider.problems
    assert getattr(result, "text", result) == "A is in.", result
    assert ran == ["A"] and result.usage.refusals == 1 and result.usage.calls == 1
    refused = json.loads(sent_results(kind, provider.bodies[1])["call_x1"])["refused"]
    assert "must be a dict" in refused and json.dumps(BROKEN[kind])[1:-1][:8] in json.dumps(refused)  # the raw text
    assert sent_calls(kind, provider.bodies[1]) == [("call_x1", "{}" if kind != "anthropic" else {})]
    assert result.history[1]["usage"] == {"input_tokens": 30, "output_tokens": 9}  # the refused turn was paid for


@pytest.mark.parametrize("kind", KINDS)
async def test_a_call_with_no_id_is_answered_under_the_loops_own_id(kind):
    tools, ran = counting_tools()
    no_id = good(kind, "-", "B")
    del no_id["id"]
    script = [with_calls(kind, no_id), with_calls(kind, good(kind, "toolu_7", "B")), answer(kind, "B is out.")]
    with StrictProvider(kind, *script) as provider:
        result = await run_against(provider, tools, max_refusals=1)
    assert not provider.problems, provider.problems
    assert getattr(result, "text", result) == "B is out.", result
    second = provider.bodies[1]
    assert [call_id for call_id, _ in sent_calls(kind, second)] == ["refused-1-1"]
    assert list(sent_results(kind, second)) == ["refused-1-1"] and ANTHROPIC_ID.match("refused-1-1")
    assert "the id must be a non-empty string" in sent_results(kind, second)["refused-1-1"]
    assert ran == ["B"]


@pytest.mark.parametrize("kind", KINDS)
async def test_one_bad_call_in_a_batch_runs_nothing_and_every_id_is_answered_once(kind):
    tools, ran = counting_tools()
    batch = with_calls(kind, good(kind, "call_ok", "A"), {"id": "call_bad", "args": BROKEN[kind]})
    with StrictProvider(kind, batch, with_calls(kind, good(kind, "call_3", "A")), answer(kind, "done")) as provider:
        result = await run_against(provider, tools, max_refusals=2)
    assert not provider.problems, provider.problems
    results = sent_results(kind, provider.bodies[1])
    assert sorted(results) == ["call_bad", "call_ok"]
    assert "not_run" in json.loads(results["call_ok"]) and "refused" in json.loads(results["call_bad"])
    assert ran == ["A"] and result.text == "done"


@pytest.mark.parametrize("kind", KINDS)
async def test_without_max_refusals_the_bad_call_ends_the_run_keeping_the_raw_text(kind):
    tools, ran = counting_tools()
    with StrictProvider(kind, with_calls(kind, {"id": "call_1", "args": BROKEN[kind]})) as provider:
        error = await run_against(provider, tools)
    assert type(error) is ModelOutputError, error
    assert "malformed call #1" in str(error) and "must be a dict" in str(error)
    assert error.rejected["calls"][0]["args"] == BROKEN[kind]  # the model's text, as it came
    assert len(provider.bodies) == 1 and ran == []


# == 2. Configuration mistakes are ConfigErrors, before any request ================================


@pytest.mark.parametrize(
    ("make", "adapter", "wanted"),
    [
        (lambda: openai.OpenAI(api_key="k", base_url="http://127.0.0.1:9/v1"), openai_chat, "AsyncOpenAI"),
        (lambda: openai.OpenAI(api_key="k", base_url="http://127.0.0.1:9/v1"), openai_responses, "AsyncOpenAI"),
        (lambda: anthropic.Anthropic(api_key="k", base_url="http://127.0.0.1:9"), anthropic_messages, "AsyncAnthropic"),
    ],
)
def test_a_sync_client_is_refused_when_the_adapter_is_made(make, adapter, wanted):
    with pytest.raises(ConfigError, match=f"needs the async client.*{wanted}") as caught:
        adapter(make(), "m", counting_tools()[0])
    assert "block the run's event loop" in str(caught.value)


def make_async(kind: str) -> Any:
    return async_client(kind, "http://127.0.0.1:9" + ("" if kind == "anthropic" else "/v1"))


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(
    ("arguments", "options", "phrase"),
    [
        (lambda tools: (42, tools), {}, "model id as a string"),
        (lambda tools: (tools,), {}, "model id as a string"),  # the model id forgotten: tools in its place
        (lambda tools: ("m", list(tools.values())), {}, "tools must be a mapping"),
        (lambda tools: ("m", tools), {"max_output_tokens": "500"}, "max_output_tokens must be a whole number"),
        (lambda tools: ("m", tools), {"system": ["be brief"]}, "system must be a string"),
        (lambda tools: ("m", tools), {"stream": True}, "stream=True is not supported"),
        (lambda tools: ("m", tools), "the history's own field", "written by the adapter itself"),
    ],
)
def test_a_wrong_argument_is_a_config_error_naming_it(kind, arguments, options, phrase):
    if isinstance(options, str):  # the field the history goes in: written by the adapter
        options = {"input" if kind == "responses" else "messages": []}
    with pytest.raises(ConfigError, match=phrase):
        ADAPTER[kind](make_async(kind), *arguments(counting_tools()[0]), **options)


@pytest.mark.parametrize(
    ("kind", "options", "phrase"),
    [
        ("chat", {"temprature": 0}, "takes no option 'temprature'; did you mean temperature="),
        ("responses", {"max_tool_call": 1}, "did you mean max_tool_calls="),
        ("anthropic", {"stop_sequence": ["END"]}, "did you mean stop_sequences="),
        ("anthropic", {"max_tokens": 10}, "use max_output_tokens="),
        ("chat", {"max_completion_tokens": 10}, "use max_output_tokens="),
        ("responses", {"instructions": "be brief"}, "use system="),
        ("chat", {"ollama_keep_alive": "5m"}, r"extra_body=\{'ollama_keep_alive': \.\.\.\}"),
    ],
)
def test_an_option_the_sdk_does_not_take_is_a_config_error_with_the_fix(kind, options, phrase):
    with pytest.raises(ConfigError, match=phrase):
        ADAPTER[kind](make_async(kind), "m", counting_tools()[0], **options)


async def test_options_the_sdk_takes_still_reach_the_request():
    with StrictProvider("chat", answer("chat", "hi")) as provider:
        options = {"temperature": 0, "extra_body": {"keep_alive": "5m"}}
        result = await run_against(provider, counting_tools()[0], adapter_options=options)
    assert result.text == "hi"
    assert provider.bodies[0]["temperature"] == 0 and provider.bodies[0]["keep_alive"] == "5m"


# == 3. A server that refuses, drops or holds the connection; a provider's whole message ============


def free_port() -> int:
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()  # nothing listens there now
    return port


class RudeServer:
    """Accepts each connection and reads the request, then hangs up at once ("drop") or says nothing ("hold")."""

    def __init__(self, mode: str) -> None:
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(8)
        self.port = self.listener.getsockname()[1]
        self.closing = threading.Event()
        self.held: list[socket.socket] = []
        threading.Thread(target=self.serve, args=(mode,), daemon=True).start()

    def serve(self, mode: str) -> None:
        while not self.closing.is_set():
            try:
                connection, _ = self.listener.accept()
            except OSError:
                return
            connection.recv(65536)
            if mode == "drop":
                connection.shutdown(socket.SHUT_RDWR)
                connection.close()
            else:
                self.held.append(connection)

    def close(self) -> None:
        self.closing.set()
        self.listener.close()
        for connection in self.held:
            connection.close()


def url(kind: str, port: int) -> str:
    return f"http://127.0.0.1:{port}" + ("" if kind == "anthropic" else "/v1")


async def ask_once(kind: str, base_url: str, **client_options: Any) -> Any:
    tools = counting_tools()[0]
    async with async_client(kind, base_url, **client_options) as client:
        try:
            return await agent_loop("Is A in?", ADAPTER[kind](client, "m", tools), tools, timeout_ms=RUN_TIMEOUT_MS)
        except Exception as error:
            return error


@pytest.mark.parametrize("kind", KINDS)
async def test_a_refused_connection_asks_whether_the_server_runs_at_that_url_and_port(kind):
    port = free_port()
    error = await ask_once(kind, url(kind, port))
    assert type(error) is ModelError, error
    assert f"could not connect to http://127.0.0.1:{port}/" in str(error)
    assert "is the server running" in str(error) and "base URL" in str(error) and "port" in str(error)


@pytest.mark.parametrize("kind", KINDS)
async def test_a_dropped_connection_says_the_server_closed_it(kind):
    server = RudeServer("drop")
    try:
        error = await ask_once(kind, url(kind, server.port))
    finally:
        server.close()
    assert type(error) is ModelError, error
    assert "was dropped before the response was complete" in str(error) and "check that it is running" in str(error)


@pytest.mark.parametrize("kind", ["chat", "anthropic"])
async def test_a_client_timeout_says_which_timeout(kind):
    server = RudeServer("hold")
    try:
        started = time.monotonic()
        error = await ask_once(kind, url(kind, server.port), timeout=0.3)
    finally:
        server.close()
    assert type(error) is ModelError, error
    assert "timed out (the client's own timeout)" in str(error) and "timeout=" in str(error)
    assert time.monotonic() - started < 20


INSTRUCTION = (
    "Invalid value for 'reasoning_effort': 'maximal' is not supported with this model. Supported values are: "
    "'low', 'medium' and 'high'. Remove the parameter, or pick a model that supports it; see the model's page "
    "for its parameters. THE-END"
)


@pytest.mark.parametrize(
    ("kind", "body"),
    [
        ("chat", {"error": {"message": INSTRUCTION, "type": "invalid_request_error", "param": "reasoning_effort"}}),
        ("responses", {"error": {"message": INSTRUCTION, "type": "invalid_request_error", "param": None}}),
        ("anthropic", {"type": "error", "error": {"type": "invalid_request_error", "message": INSTRUCTION}}),
    ],
)
async def test_a_400_keeps_the_providers_whole_message(kind, body):
    assert len(INSTRUCTION) > 200
    with StrictProvider(kind, (400, body)) as provider:
        error = await run_against(provider, counting_tools()[0])
    assert type(error) is ModelError, error
    assert INSTRUCTION in str(error)  # whole: THE-END included
    assert "the provider answered 400" in str(error) and "its message names the field" in str(error)


# == 4. agent_loop_sync with a real client ============================================================


def close_on_home_loop(client: Any) -> None:
    """Close a client where its connections are: on the loop agent_loop_sync's runs share."""
    run_on_new_loop(client.close, home=HOME)


@pytest.mark.parametrize("kind", KINDS)
def test_agent_loop_sync_serves_run_after_run_with_one_client(kind):
    tools, _ = counting_tools()
    with StrictProvider(kind, answer(kind, "one"), answer(kind, "two"), answer(kind, "three")) as provider:
        client = async_client(kind, provider.base_url)
        model = ADAPTER[kind](client, "m", tools)
        try:
            texts = [agent_loop_sync(q, model, tools, timeout_ms=RUN_TIMEOUT_MS).text for q in ("a?", "b?", "c?")]
        finally:
            close_on_home_loop(client)
    assert texts == ["one", "two", "three"]


@pytest.mark.parametrize("kind", KINDS)
def test_agent_loop_sync_takes_max_tokens(kind):
    tools, _ = counting_tools()
    script = [with_calls(kind, good(kind, "call_1", "A")), with_calls(kind, good(kind, "call_2", "B"))]
    with StrictProvider(kind, *script) as provider:
        client = async_client(kind, provider.base_url)
        try:
            with pytest.raises(TokenBudgetError, match="max_tokens=50"):
                model = ADAPTER[kind](client, "m", tools)
                agent_loop_sync("Is A in?", model, tools, max_tokens=50, timeout_ms=RUN_TIMEOUT_MS)  # 39 a turn
        finally:
            close_on_home_loop(client)
    assert len(provider.bodies) == 2


def test_a_client_whose_event_loop_is_gone_is_a_config_error_before_any_request():
    tools, _ = counting_tools()
    with StrictProvider("chat", answer("chat", "one"), answer("chat", "two")) as provider:
        provider.keep_alive = False  # no connection left open on the closed loop (it would warn when collected)
        model = openai_chat(async_client("chat", provider.base_url), "m", tools)
        assert asyncio.run(agent_loop("a?", model, tools, timeout_ms=RUN_TIMEOUT_MS)).text == "one"
        with pytest.raises(ConfigError, match="on another event loop") as caught:
            asyncio.run(agent_loop("b?", model, tools, timeout_ms=RUN_TIMEOUT_MS))
    assert "Make a new client for this event loop" in str(caught.value)
    assert len(provider.bodies) == 1  # refused before its request


# == 5. Odd but legal values ============================================================================


async def test_a_lone_surrogate_in_anthropic_input_does_not_break_the_next_request():
    tools, ran = counting_tools()
    first = json.dumps(anthropic_body([{"type": "tool_use", "id": "toolu_1", "name": "lookup",
                                        "input": {"id": "\ud800"}}], "tool_use"))  # fmt: skip
    assert "\\ud800" in first  # legal JSON: an escaped lone surrogate
    with StrictProvider("anthropic", first, answer("anthropic", "no such book")) as provider:
        result = await run_against(provider, tools)
    assert getattr(result, "text", result) == "no such book", result
    assert ran == ["\ud800"]  # the tool got what the model sent
    assert sent_calls("anthropic", provider.bodies[1]) == [("toolu_1", {"id": "\ufffd"})]  # the wire, well-formed


@pytest.mark.parametrize("kind", ["chat", "responses"])
async def test_a_lone_surrogate_in_the_users_input_does_not_break_the_request(kind):
    with StrictProvider(kind, answer(kind, "ok")) as provider:
        result = await run_against(provider, counting_tools()[0], question="book \udc00?")
    assert getattr(result, "text", result) == "ok", result


SIGNED = {"type": "thinking", "thinking": "A is the id they asked about.", "signature": "c2lnbmVkLWJ5LWFudGhyb3BpYw=="}
REDACTED = {"type": "redacted_thinking", "data": "EqQBCgYIAhABGAIiQL7a"}


async def test_anthropic_thinking_blocks_go_back_with_their_tool_use_unchanged():
    tools, ran = counting_tools()
    assert ran == []
    content = [SIGNED, {"type": "text", "text": "Let me look."}, {"type": "tool_use", "id": "toolu_1", "name": "lookup",
               "input": {"id": "A"}}]  # fmt: skip
    options = {"thinking": {"type": "enabled", "budget_tokens": 1024}, "max_output_tokens": 2048}
    with StrictProvider("anthropic", anthropic_body(content, "tool_use"), answer("anthropic", "A is in.")) as provider:
        result = await run_against(provider, tools, adapter_options=options)
    assert not provider.problems, provider.problems
    assert getattr(result, "text", result) == "A is in.", result
    assistant = provider.bodies[1]["messages"][1]
    assert assistant["role"] == "assistant" and assistant["content"][0] == SIGNED  # first, byte for byte
    assert [block["type"] for block in assistant["content"]] == ["thinking", "tool_use"] and ran == ["A"]


async def test_interleaved_thinking_keeps_each_block_before_its_own_call():
    tools, ran = counting_tools()
    second = {**SIGNED, "thinking": "Now B.", "signature": "b3RoZXI="}
    content = [
        SIGNED,
        REDACTED,
        {"type": "tool_use", "id": "toolu_a", "name": "lookup", "input": {"id": "A"}},
        second,
        {"type": "tool_use", "id": "toolu_b", "name": "lookup", "input": {"id": "B"}},
    ]
    options = {"thinking": {"type": "enabled", "budget_tokens": 1024}, "max_output_tokens": 2048}
    with StrictProvider("anthropic", anthropic_body(content, "tool_use"), answer("anthropic", "done")) as provider:
        result = await run_against(provider, tools, adapter_options=options)
    assert not provider.problems, provider.problems
    assert result.text == "done" and ran == ["A", "B"]
    sent = provider.bodies[1]["messages"][1]["content"]
    assert sent == [SIGNED, REDACTED, content[2], second, content[4]]


async def test_without_the_thinking_blocks_the_strict_provider_refuses():
    """The check above can fail: a transcript that drops the thinking is refused as the API refuses it."""
    body = {"thinking": {"type": "enabled"}, "messages": [
        {"role": "user", "content": [{"type": "text", "text": "q"}]},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "lookup", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "{}"}]},
    ]}  # fmt: skip
    assert "must start with a thinking block" in transcript_problem("anthropic", body)


@pytest.mark.parametrize(
    ("kind", "reply", "field"),
    [
        ("anthropic", anthropic_body([{"type": "text", "text": "hi"}], ["end_turn"]), "stop_reason"),
        ("anthropic", anthropic_body([{"type": "text", "text": "hi"}], {"reason": "max_tokens"}), "stop_reason"),
        ("chat", {"choices": [{"index": 0, "finish_reason": 3, "message": {"role": "assistant", "content": "hi"}}]},
         "finish_reason"),
        ("responses", {"output": [], "status": ["completed"]}, "status"),
    ],
)  # fmt: skip
async def test_a_stop_reason_that_is_not_a_string_is_a_model_output_error(kind, reply, field):
    with StrictProvider(kind, reply) as provider:
        error = await run_against(provider, counting_tools()[0])
    assert type(error) is ModelOutputError, error
    assert f"{field} must be a string" in str(error)


async def test_a_response_shape_no_check_foresaw_is_a_model_output_error_not_a_type_error():
    reply = {"output": [{"type": "message", "content": 7}], "status": "completed"}
    with StrictProvider("responses", reply) as provider:
        error = await run_against(provider, counting_tools()[0])
    assert type(error) is ModelOutputError and "content must be a list" in str(error), error


def test_the_strict_provider_is_strict() -> None:
    """Its checks can fail: each refuses the broken transcript a careless adapter would send."""
    unanswered = {"messages": [{"role": "assistant", "tool_calls": [{"id": "c1", "function": {"arguments": "{}"}}]}]}
    assert "responding to each 'tool_call_id'" in transcript_problem("chat", unanswered)
    assert "call_id" in transcript_problem("responses", {"input": [{"type": "function_call", "call_id": None}]})
    bad_id = {"messages": [{"role": "assistant", "content": [{"type": "tool_use", "id": "c.1", "input": {}}]}]}
    assert "should match pattern" in transcript_problem("anthropic", bad_id)
