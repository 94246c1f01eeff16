"""A provider imitated on 127.0.0.1: scripted replies in each wire format, for tests and notebook 10.

    with LoopbackServer(chat_reply(calls=[...]), chat_reply(text="done")) as server:
        client = AsyncOpenAI(base_url=server.openai_url, api_key="not-needed", max_retries=0)
        ...                                           # or AsyncAnthropic(base_url=server.url, ...)
    server.requests                                   # the JSON bodies the SDK sent, in order

Each request, whatever its path, gets the next scripted `Reply`: a JSON body
(a dict) or raw text, a status, or a stall (headers and half a body, then
nothing until the server closes), which is how a deadline is tested against a
provider that hangs mid-response. The real SDKs talk to it over real HTTP
through `base_url`: no network, no key, no mocking library.

It is a scripted exchange, written by hand in the providers' documented
shapes: not a recording of a real model. Standard library only.
"""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from agentlab.errors import ConfigError


@dataclass(frozen=True)
class Reply:
    """One scripted HTTP reply: `body` (JSON data, or a str sent as it is), `status`, or a `stall`."""

    body: Any = None
    status: int = 200
    stall: bool = False
    headers: dict[str, str] = field(default_factory=dict)


class LoopbackServer:
    """An HTTP server on 127.0.0.1 (a free port) that answers each request with the next scripted reply."""

    def __init__(self, *replies: Reply) -> None:
        for reply in replies:
            if not isinstance(reply, Reply):
                raise ConfigError(f"LoopbackServer takes Reply(...) objects, got {type(reply).__name__}")
        self.replies = list(replies)
        self.requests: list[dict[str, Any]] = []  # {"path", "headers", "body"} of each request, in order
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="loopback-server", daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        """The bare address, for `AsyncAnthropic(base_url=...)` (it adds /v1/messages itself)."""
        return f"http://127.0.0.1:{self._server.server_address[1]}"

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
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> LoopbackServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _handler(server: LoopbackServer) -> type[http.server.BaseHTTPRequestHandler]:
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        # Headers and body go out as two writes: with Nagle's algorithm on, the body waited for the client's delayed
        # ACK, 20-50 ms a request on loopback. Off, a scripted reply arrives as fast as the SDK can read it.
        disable_nagle_algorithm = True

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("content-length") or 0))
            try:
                body = json.loads(raw)
            except ValueError:
                body = raw.decode("utf-8", "replace")
            reply = server.next_reply({"path": self.path, "headers": dict(self.headers), "body": body})
            data = (reply.body if isinstance(reply.body, str) else json.dumps(reply.body)).encode()
            self.send_response(reply.status)
            self.send_header("content-type", "application/json")
            for name, value in reply.headers.items():
                self.send_header(name, value)
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            if reply.stall:  # half the body, then nothing until the server closes
                self.wfile.write(data[: len(data) // 2])
                self.wfile.flush()
                server._closing.wait(60)
                self.close_connection = True
                return
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:  # quiet: tests and notebooks read their own output
            pass

    return Handler


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
