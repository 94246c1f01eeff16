"""A provider imitated on 127.0.0.1: scripted replies in each wire format, for tests and notebook 10.

    with LoopbackServer(chat_reply(calls=[...]), chat_reply(text="done")) as server:
        client = client_for("openai-chat", api_key="scripted", base_url=server.openai_url)
        ...                                           # or client_for("anthropic", ..., base_url=server.url)
    server.requests                                   # the JSON bodies the SDK sent, in order

Each request, whatever its path, gets the next scripted `Reply`: a JSON body
(a dict) or raw text, a status, or a stall (headers and half a body, then
nothing until the server closes), which is how a deadline is tested against a
provider that hangs mid-response. The real SDKs talk to it over real HTTP
through `base_url`: no network, no key, no mocking library.

In the browser (Pyodide: `IN_PROCESS`) there are no sockets and no threads:
the server is then served in-process. Its `url` is still an address on
127.0.0.1, and `client_for` gives the SDK an HTTP client whose transport
answers a request for any open in-process server with the same replies,
records it the same way, and refuses every other URL (the browser edition has
no network). A client made some other way (`AsyncOpenAI(...)` itself) cannot
reach it there.

It is a scripted exchange, written by hand in the providers' documented
shapes: not a recording of a real model. Standard library only (the
in-process transport is made with the SDK's own httpx, when asked for).
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import functools
import http.server
import itertools
import json
import sys
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from agentlab.errors import ConfigError

# Whether a LoopbackServer is served in-process (no socket, no thread) and `client_for` talks to it through the
# in-process transport: in Pyodide, which has neither sockets nor threads. Read as each server and client is made,
# so tests/test_loopback_inprocess.py can set it in CPython and run the same exchanges both ways.
IN_PROCESS = sys.platform == "emscripten"
# How long a stalled reply holds its request at most, when its server is never closed.
STALL_S = 60
# The open in-process servers, by the port of their URL (a number no socket holds: nothing is bound to it).
_OPEN: dict[int, LoopbackServer] = {}
_OPEN_LOCK = threading.Lock()
_PORTS = itertools.cycle(range(49152, 65536))  # the dynamic range, where an ephemeral port would be
# What http.server's handler says it is, in the Server header of each reply.
_SERVER_HEADER = f"{http.server.BaseHTTPRequestHandler.server_version} {http.server.BaseHTTPRequestHandler.sys_version}"


@dataclass(frozen=True)
class Reply:
    """One scripted HTTP reply: `body` (JSON data, or a str sent as it is), `status`, or a `stall`."""

    body: Any = None
    status: int = 200
    stall: bool = False
    headers: dict[str, str] = field(default_factory=dict)


class LoopbackServer:
    """An HTTP server on 127.0.0.1 (a free port) that answers each request with the next scripted reply.

    With `IN_PROCESS` (in Pyodide), the same replies are served in-process to the clients `client_for` makes.
    """

    def __init__(self, *replies: Reply) -> None:
        for reply in replies:
            if not isinstance(reply, Reply):
                raise ConfigError(f"LoopbackServer takes Reply(...) objects, got {type(reply).__name__}")
        self.replies = list(replies)
        self.requests: list[dict[str, Any]] = []  # {"path", "headers", "body"} of each request, in order
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self.in_process = IN_PROCESS
        self._stalled: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = []  # in-process only
        if self.in_process:
            self._server: http.server.ThreadingHTTPServer | None = None
            self._port = _open(self)
            return
        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._server.daemon_threads = True
        self._port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, name="loopback-server", daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        """The bare address, for `AsyncAnthropic(base_url=...)` (it adds /v1/messages itself)."""
        return f"http://127.0.0.1:{self._port}"

    @property
    def openai_url(self) -> str:
        """The address with /v1, for `AsyncOpenAI(base_url=...)`."""
        return self.url + "/v1"

    def next_reply(self, request: dict[str, Any]) -> Reply:
        with self._lock:
            self.requests.append(request)
            if len(self.requests) > len(self.replies):
                return Reply(
                    {"error": f"the script has {len(self.replies)} replies; this is request {len(self.requests)}"},
                    status=500,
                    headers={"x-should-retry": "false"},
                )
            return self.replies[len(self.requests) - 1]

    def close(self) -> None:
        """Stop serving; a stalled reply ends (its client sees the connection close)."""
        self._closing.set()
        if self._server is None:
            with _OPEN_LOCK:
                if _OPEN.get(self._port) is self:
                    del _OPEN[self._port]
            with self._lock:
                stalled, self._stalled = self._stalled, []
            for loop, closed in stalled:
                with contextlib.suppress(RuntimeError):  # that loop is closed: nothing waits there any more
                    loop.call_soon_threadsafe(_set_done, closed)
            return
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    async def _closed_within(self, seconds: float) -> bool:
        """In-process: wait until the server closes (True) or `seconds` pass (False)."""
        loop = asyncio.get_running_loop()
        closed: asyncio.Future[None] = loop.create_future()
        with self._lock:
            if self._closing.is_set():
                return True
            self._stalled.append((loop, closed))
        try:
            done, _ = await asyncio.wait({closed}, timeout=seconds)
            return bool(done)
        finally:
            with self._lock:
                if (loop, closed) in self._stalled:
                    self._stalled.remove((loop, closed))

    def __enter__(self) -> LoopbackServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _set_done(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


def _open(server: LoopbackServer) -> int:
    """Register an in-process server under a port no other open one has; returns the port."""
    with _OPEN_LOCK:
        for _ in range(65536 - 49152):
            port = next(_PORTS)
            if port not in _OPEN:
                _OPEN[port] = server
                return port
    raise ConfigError(f"{len(_OPEN)} in-process LoopbackServers are open: close them (use `with LoopbackServer(...)`)")


def _body_of(raw: bytes) -> Any:
    """A request body as recorded: its JSON, or its text when it is not JSON."""
    try:
        return json.loads(raw)
    except ValueError:
        return raw.decode("utf-8", "replace")


def _data_of(reply: Reply) -> bytes:
    """A reply's body as sent: a str as it is, anything else as JSON."""
    return (reply.body if isinstance(reply.body, str) else json.dumps(reply.body)).encode()


def _handler(server: LoopbackServer) -> type[http.server.BaseHTTPRequestHandler]:
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        # Headers and body go out as two writes: with Nagle's algorithm on, the body waited for the client's delayed
        # ACK, 20-50 ms a request on loopback. Off, a scripted reply arrives as fast as the SDK can read it.
        disable_nagle_algorithm = True

        def do_POST(self) -> None:
            body = _body_of(self.rfile.read(int(self.headers.get("content-length") or 0)))
            reply = server.next_reply({"path": self.path, "headers": dict(self.headers), "body": body})
            data = _data_of(reply)
            self.send_response(reply.status)
            self.send_header("content-type", "application/json")
            for name, value in reply.headers.items():
                self.send_header(name, value)
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            if reply.stall:  # half the body, then nothing until the server closes
                self.wfile.write(data[: len(data) // 2])
                self.wfile.flush()
                server._closing.wait(STALL_S)
                self.close_connection = True
                return
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:  # quiet: tests and notebooks read their own output
            pass

    return Handler


# -- in-process: the transport `client_for` gives the SDK where there are no sockets -------------


def in_process_client(sdk: ModuleType) -> Any:
    """The SDK's own default async HTTP client (its timeouts and limits), over the in-process transport.

    `sdk` is the imported `openai` or `anthropic`: the transport is made with the httpx it uses (httpx, or
    httpx2 in the newer SDKs).
    """
    httpx = _httpx_of(sdk)
    return sdk.DefaultAsyncHttpxClient(transport=_transport_class(httpx)(), trust_env=False)


def _httpx_of(sdk: ModuleType) -> ModuleType:
    """The httpx package `sdk`'s client is made with: the module of the AsyncClient it subclasses."""
    for cls in getattr(sdk, "DefaultAsyncHttpxClient", type).__mro__:
        if cls.__name__ == "AsyncClient":
            return sys.modules[cls.__module__.split(".")[0]]
    import httpx

    return httpx


def _serving(url: Any) -> LoopbackServer:
    """The open in-process server a request's URL names; a ConfigError that says why for any other URL."""
    port = url.port
    if url.host in ("127.0.0.1", "localhost") and port is not None:
        with _OPEN_LOCK:
            server = _OPEN.get(port)
        if server is not None:
            return server
        raise ConfigError(
            f"nothing answers {url.scheme}://{url.host}:{port} here: no LoopbackServer is open on port {port} (a "
            "closed one answers no more: make the client and run it inside `with LoopbackServer(...) as server:`), "
            "and in the browser edition there is no network to reach any other server"
        )
    raise ConfigError(
        f"the browser edition has no network: {url.scheme}://{url.host} cannot be reached from here; only a "
        "LoopbackServer opened in this kernel answers (the scripted exchange: unset AGENTLAB_PROVIDER). For a "
        "real model, run the notebook in JupyterLab on your own machine (make lab), with the AGENTLAB_* settings"
    )


@functools.cache
def _transport_class(httpx: ModuleType) -> type:
    """The in-process transport, as a subclass of `httpx`'s own AsyncBaseTransport (one class per httpx)."""

    class Stalled(httpx.AsyncByteStream):  # type: ignore[misc, name-defined]
        """Half the body, then nothing until the server closes (or the client's read timeout passes)."""

        def __init__(self, server: LoopbackServer, data: bytes, read_s: float | None) -> None:
            self.server, self.data, self.read_s = server, data, read_s

        async def __aiter__(self) -> Any:
            half = self.data[: len(self.data) // 2]
            yield half
            times_out = self.read_s is not None and self.read_s < STALL_S
            closed = await self.server._closed_within(self.read_s if times_out else STALL_S)
            if times_out and not closed:
                raise httpx.ReadTimeout("timed out")
            raise httpx.RemoteProtocolError(
                f"peer closed connection without sending complete message body: received {len(half)} bytes, "
                f"expected {len(self.data)}"
            )

    class InProcessTransport(httpx.AsyncBaseTransport):  # type: ignore[misc, name-defined]
        """Answers a request for an open in-process LoopbackServer as its HTTP server would; refuses any other."""

        async def handle_async_request(self, request: Any) -> Any:
            server = _serving(request.url)
            raw = await request.aread()
            if request.method != "POST":  # http.server's answer to a method its handler has no do_ for
                text = f"Unsupported method ({request.method!r})".encode()
                return httpx.Response(501, headers={"content-type": "text/html"}, content=text, request=request)
            headers: dict[str, str] = {}
            for name, value in request.headers.raw:
                headers.setdefault(name.decode("latin-1"), value.decode("latin-1"))
            path = request.url.raw_path.decode("ascii")
            reply = server.next_reply({"path": path, "headers": headers, "body": _body_of(raw)})
            data = _data_of(reply)
            sent = [
                ("Server", _SERVER_HEADER),
                ("Date", email.utils.formatdate(usegmt=True)),
                ("content-type", "application/json"),
                *reply.headers.items(),
                ("content-length", str(len(data))),
            ]
            read_s = (request.extensions.get("timeout") or {}).get("read")
            stream = Stalled(server, data, read_s) if reply.stall else httpx.ByteStream(data)
            return httpx.Response(reply.status, headers=sent, stream=stream, request=request)

    return InProcessTransport


# -- replies in each provider's shape ------------------------------------------------------


def _arguments(args: Any) -> Any:
    """A call's args as the wire carries them: a dict becomes a JSON string; anything else is sent as it is."""
    return json.dumps(args) if isinstance(args, dict) else args


def chat_reply(
    text: str | None = None,
    calls: Sequence[dict[str, Any]] = (),
    *,
    finish_reason: str | None = None,
    usage: tuple[int, int] | None = (20, 5),
    refusal: str | None = None,
) -> Reply:
    """A Chat Completions body: `calls` as `{"id", "name", "args"}` (args: a dict, or raw arguments)."""
    message: dict[str, Any] = {"role": "assistant", "content": text, "refusal": refusal}
    if calls:
        message["tool_calls"] = [
            {
                "id": c.get("id"),
                "type": c.get("type", "function"),
                "function": {"name": c.get("name"), "arguments": _arguments(c.get("args"))},
            }
            for c in calls
        ]
    body: dict[str, Any] = {
        "id": "chatcmpl-loopback",
        "object": "chat.completion",
        "created": 0,
        "model": "scripted",
        "choices": [
            {"index": 0, "finish_reason": finish_reason or ("tool_calls" if calls else "stop"), "message": message}
        ],
    }
    if usage:
        body["usage"] = {"prompt_tokens": usage[0], "completion_tokens": usage[1], "total_tokens": sum(usage)}
    return Reply(body)


def responses_reply(
    text: str | None = None,
    calls: Sequence[dict[str, Any]] = (),
    *,
    incomplete: str | None = None,
    usage: tuple[int, int] | None = (20, 5),
) -> Reply:
    """A Responses body: `function_call` items for `calls`, a message for `text`."""
    output: list[dict[str, Any]] = [
        {
            "type": "function_call",
            "id": f"fc_{n}",
            "call_id": c.get("id"),
            "name": c.get("name"),
            "arguments": _arguments(c.get("args")),
            "status": "completed",
        }
        for n, c in enumerate(calls, 1)
    ]
    if text is not None:
        output.append(
            {
                "type": "message",
                "id": "msg_1",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": text, "annotations": []}],
            }
        )
    body: dict[str, Any] = {
        "id": "resp_loopback",
        "object": "response",
        "created_at": 0,
        "model": "scripted",
        "status": "incomplete" if incomplete else "completed",
        "output": output,
    }
    if incomplete:
        body["incomplete_details"] = {"reason": incomplete}
    if usage:
        body["usage"] = {"input_tokens": usage[0], "output_tokens": usage[1], "total_tokens": sum(usage)}
    return Reply(body)


def anthropic_reply(
    text: str | None = None,
    calls: Sequence[dict[str, Any]] = (),
    *,
    stop_reason: str | None = None,
    usage: tuple[int, int] | None = (20, 5),
) -> Reply:
    """An Anthropic Messages body: `tool_use` blocks for `calls` (args sent as `input`, as they are)."""
    content: list[dict[str, Any]] = [{"type": "text", "text": text}] if text is not None else []
    content += [{"type": "tool_use", "id": c.get("id"), "name": c.get("name"), "input": c.get("args")} for c in calls]
    body: dict[str, Any] = {
        "id": "msg_loopback",
        "type": "message",
        "role": "assistant",
        "model": "scripted",
        "content": content,
        "stop_reason": stop_reason or ("tool_use" if calls else "end_turn"),
    }
    if usage:
        body["usage"] = {"input_tokens": usage[0], "output_tokens": usage[1]}
    return Reply(body)


__all__ = ["LoopbackServer", "Reply", "anthropic_reply", "chat_reply", "responses_reply"]
