"""How far past `timeout_ms` does the deadline fire when a real SDK's server stalls mid-response?

    .venv/bin/python benchmarks/stall.py [--runs 50] [--timeout-ms 200]

For each adapter of `agentlab.models` (Chat Completions and Responses through
openai.AsyncOpenAI, Messages through anthropic.AsyncAnthropic), a loopback
server on 127.0.0.1 sends the response headers and half the body, then
nothing. Each run is one `agent_loop` against it; the overrun is the time
from `timeout_ms` to the raised DeadlineError, which means the HTTP request
was abandoned. Prints the median and the worst of `--runs` runs per SDK.
Runs in the learner's .venv (the SDKs are in its requirements).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

import anthropic
import openai

from agentlab import DeadlineError, agent_loop
from agentlab.lab.examples import lookup_tools
from agentlab.models import anthropic_messages, openai_chat, openai_responses
from agentlab.models.loopback import LoopbackServer, Reply, anthropic_reply, chat_reply, responses_reply

ADAPTERS = {
    "openai chat": (chat_reply, lambda s: openai.AsyncOpenAI(base_url=s.openai_url, api_key="k"), openai_chat),
    "openai responses": (
        responses_reply,
        lambda s: openai.AsyncOpenAI(base_url=s.openai_url, api_key="k"),
        openai_responses,
    ),
    "anthropic": (anthropic_reply, lambda s: anthropic.AsyncAnthropic(base_url=s.url, api_key="k"), anthropic_messages),
}


async def overruns(name: str, runs: int, timeout_ms: float) -> list[float]:
    """The overrun in ms of each run; the clients keep their default retries (they must not matter)."""
    reply, client_for, adapter = ADAPTERS[name]
    stalled = Reply(reply(text="never").body, stall=True)
    out = []
    with LoopbackServer(*[stalled] * runs * 3) as server:  # room for the SDK's own retries, had it any time
        async with client_for(server) as client:
            model = adapter(client, "scripted", lookup_tools())
            for _ in range(runs):
                started = time.perf_counter()
                try:
                    await agent_loop("Is book A in?", model, lookup_tools(), timeout_ms=timeout_ms)
                except DeadlineError:
                    out.append((time.perf_counter() - started) * 1000 - timeout_ms)
                else:
                    raise AssertionError("a stalled server answered")
    return out


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--timeout-ms", type=float, default=200)
    options = parser.parse_args()
    print(f"deadline overrun against a stalling server, {options.runs} runs each, timeout_ms={options.timeout_ms:g}")
    print(f"{'SDK (adapter)':<20} {'median ms':>10} {'worst ms':>10}")
    for name in ADAPTERS:
        figures = await overruns(name, options.runs, options.timeout_ms)
        print(f"{name:<20} {statistics.median(figures):>10.1f} {max(figures):>10.1f}")


if __name__ == "__main__":
    asyncio.run(main())
