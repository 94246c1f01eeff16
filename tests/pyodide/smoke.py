"""What tests/test_pyodide.py runs inside npm's Pyodide under Node: agentlab with no threads, as in JupyterLite.

Top-level await (Pyodide's runPythonAsync). The last expression, a JSON text, is what the test reads.
"""

import asyncio
import gc
import io
import json
import sys
import time
import warnings

from agentlab import AgentError, Tool, agent_loop, agent_loop_sync, callees
from agentlab.behaviours import ALL, BLOCKING
from agentlab.lab.fakes import Scripted, call, calls, final
from agentlab.writes.store import Store

found: dict = {"platform": sys.platform, "threads": callees.THREADS}
noise = io.StringIO()
warnings.simplefilter("always")
warnings.showwarning = lambda message, category, *rest: noise.write(f"{category.__name__}: {message}\n")

# 1. Every behaviour but the blocking ones, on agentlab's own loop.
failed = {}
started = time.monotonic()
for behaviour in ALL:
    if behaviour.key in BLOCKING:
        continue
    try:
        await asyncio.wait_for(behaviour(agent_loop), 30)
    except BaseException as error:
        failed[behaviour.key] = f"{type(error).__name__}: {error}"[:300]
found["behaviours"] = {"ran": len(ALL) - len(BLOCKING), "failed": failed, "s": round(time.monotonic() - started, 1)}


# 2. A plain model, tool and approval policy run inline; a store write lands once.
def lookup(args):
    return {"id": args["id"], "on_shelf": True}


def approve(call):
    return True


store = Store()
tools = {**store.tools(), "lookup": Tool(validate=lambda args: None, run=lookup)}
model = Scripted(
    calls(call("lookup", {"id": "A"}, id="c1")),
    calls(call("reserve", {"book": "A", "customer": "ada", "quantity": 1}, id="c2")),
    final("reserved"),
)
result = await agent_loop("Reserve book A for Ada.", model, tools, approve=approve)
found["store"] = {"text": result.text, "writes": result.usage.writes, "problems": store.problems()}
found["store"]["reservations"] = store.sql("SELECT book, customer, quantity FROM reservations")


# 3. A CPU-bound plain model holds the loop past the deadline: the error says by how much.
def busy(messages):
    until = time.monotonic() + 0.3
    while time.monotonic() < until:
        pass
    return {"kind": "final", "text": "late"}


try:
    await agent_loop("hi", busy, {}, timeout_ms=50)
    found["busy"] = "returned"
except AgentError as error:
    found["busy"] = f"{type(error).__name__}: {error}"


# 4. An async model that registered an abort listener meets the deadline: a DeadlineError, and its listener ran.
heard = []


async def listening(messages, signal):
    signal.add_callback(heard.append)
    await asyncio.sleep(10)


try:
    await agent_loop("hi", listening, {}, timeout_ms=50)
    found["listener"] = "returned"
except AgentError as error:
    found["listener"] = type(error).__name__
await asyncio.sleep(0.05)
found["heard"] = [type(reason).__name__ for reason in heard]

# 5. agent_loop_sync cannot wait here: a ConfigError that says what to use instead.
try:
    agent_loop_sync("hi", lambda messages: {"kind": "final", "text": "x"})
    found["sync"] = "returned"
except AgentError as error:
    found["sync"] = f"{type(error).__name__}: {error}"


# 6. A tool that swallows its cancellation, abandoned by the deadline, ends later without noise.
async def stubborn(args, signal):
    try:
        await asyncio.sleep(10)
    except asyncio.CancelledError:
        await asyncio.sleep(0.1)
    return "late"


try:
    await agent_loop(
        "hi",
        Scripted(calls(call("slow", {}, id="c1"))),
        {"slow": Tool(validate=lambda args: None, run=stubborn)},
        timeout_ms=50,
    )
except AgentError as error:
    found["stubborn"] = type(error).__name__
await asyncio.sleep(0.3)
sys.stderr = noise  # asyncio's "Task was destroyed but it is pending" would land here
try:
    gc.collect()
    await asyncio.sleep(0)
finally:
    sys.stderr = sys.__stderr__
found["noise"] = noise.getvalue()


# 7. The real SDKs, from the built site's own wheels (tests/test_pyodide.py names them when lite/dist is built): the
# scripted exchange served in-process (no socket, no thread), a stall ended by the deadline, any other URL refused.
async def sdk_exchanges(wheels):
    import threading

    import pyodide_js
    from pyodide.ffi import to_js

    from agentlab.lab.examples import lookup_tools
    from agentlab.models import anthropic_messages, openai_chat
    from agentlab.models.loopback import LoopbackServer, Reply, anthropic_reply, chat_reply
    from agentlab.models.settings import client_for, scripted

    sdk = {}
    try:  # before the SDK is loaded: made (Pyodide can wait for the load here), or what to do instead
        client_for("anthropic", api_key="k", base_url=None)
        sdk["unloaded"] = "made"
    except AgentError as error:
        sdk["unloaded"] = f"{type(error).__name__}: {error}"
    started = time.monotonic()
    await pyodide_js.loadPackage(to_js(wheels))
    sdk["load_s"] = round(time.monotonic() - started, 1)
    import anthropic
    import httpx
    import openai

    sdk["versions"] = [openai.__version__, anthropic.__version__, httpx.__version__]
    tools = lookup_tools()
    good = {"id": "call_1", "name": "lookup", "args": {"id": "A"}}
    async with scripted("openai-chat", [chat_reply(calls=[good]), chat_reply(text="A is in.")], tools) as model:
        sdk["chat"] = (await agent_loop("Is A in?", model, tools)).text
    with LoopbackServer(anthropic_reply(calls=[{**good, "id": "toolu_1"}]), anthropic_reply(text="in")) as server:
        async with client_for("anthropic", api_key="k", base_url=server.url) as client:
            text = (await agent_loop("Is A in?", anthropic_messages(client, "m", tools), tools)).text
        answered = server.requests[1]["body"]["messages"][-1]["content"][0]
        sdk["anthropic"] = [text, [r["path"] for r in server.requests], answered["type"], answered["tool_use_id"]]
    with LoopbackServer(Reply(chat_reply(text="never").body, stall=True)) as server:
        async with client_for("openai-chat", api_key="k", base_url=server.openai_url) as client:
            started = time.monotonic()
            try:
                await agent_loop("hi", openai_chat(client, "m", tools), tools, timeout_ms=200)
                sdk["stall"] = ["returned"]
            except AgentError as error:
                sdk["stall"] = [type(error).__name__, round(time.monotonic() - started, 2)]
    async with client_for("openai-chat", api_key="k", base_url=None) as client:
        try:
            await agent_loop("hi", openai_chat(client, "m", tools), tools)
            sdk["refused"] = "returned"
        except AgentError as error:
            sdk["refused"] = f"{type(error).__name__}: {error}"
    sdk["threads"] = threading.active_count()
    return sdk


import js  # noqa: E402  (Node's process.env, where the test puts the wheels' paths)

wheels = json.loads(getattr(js.process.env, "AGENTLAB_SMOKE_WHEELS", None) or "[]")
if wheels:
    found["sdk"] = await sdk_exchanges(wheels)
json.dumps(found)
