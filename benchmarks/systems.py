"""The systems under test, each running the same workload with its own fake model.

The workload: a run of `turns` model calls. On every turn but the last the
fake model asks for one call of the tool `add` with `{"a": turn, "b": 1}`;
on the last it answers "done". The tool is a trivial `async` function that
returns `{"sum": a + b}`. No network, no real model: what is measured is the
loop around the model, nothing else.

Each system's `prepare(turns)` returns a function that starts one fresh run
and returns how many model calls it made, so every measurement is checked.
Frameworks are imported inside `prepare`, so that importing this module costs
nothing and a process measures only the system it runs.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

Run = Callable[[], Awaitable[int]]


@dataclass(frozen=True)
class System:
    """One system: how to run it, what it imports, and what it does per turn."""

    name: str
    prepare: Callable[[int], Run]
    imports: str  # the statement whose cost `import` measures
    per_turn: str  # what it does on each turn that the baseline does not
    framework: bool = False


# -- the bare baseline ------------------------------------------------------------


def prepare_baseline(turns: int) -> Run:
    from baseline import bare_loop

    async def add(args: dict[str, Any]) -> dict[str, int]:
        return {"sum": args["a"] + args["b"]}

    async def run() -> int:
        made = 0

        async def model(history: list[dict[str, Any]]) -> dict[str, Any]:
            nonlocal made
            made += 1
            if made >= turns:
                return {"kind": "final", "text": "done"}
            return {"kind": "tools", "calls": [{"id": f"c{made}", "name": "add", "args": {"a": made, "b": 1}}]}

        await bare_loop("add up", model, {"add": add}, max_turns=turns)
        return made

    return run


# -- agentlab -----------------------------------------------------------------------


def prepare_agentlab(turns: int) -> Run:
    from agentlab import Tool, agent_loop

    def check_add_args(args: dict[str, Any]) -> None:
        if set(args) != {"a", "b"} or not all(type(value) is int for value in args.values()):
            raise ValueError('expected {"a": <int>, "b": <int>}')

    async def add(args: dict[str, Any], signal: Any) -> dict[str, int]:
        return {"sum": args["a"] + args["b"]}

    tools = {"add": Tool(validate=check_add_args, run=add)}

    async def run() -> int:
        made = 0

        async def model(messages: Any, signal: Any) -> dict[str, Any]:
            nonlocal made
            made += 1
            if made >= turns:
                return {"kind": "final", "text": "done"}
            return {"kind": "tools", "calls": [{"id": f"c{made}", "name": "add", "args": {"a": made, "b": 1}}]}

        limits = dict(max_turns=turns, max_calls=turns, timeout_ms=3_600_000, max_chars=10**9)
        result = await agent_loop("add up", model, tools, **limits)
        assert result.text == "done" and result.usage.turns == turns
        return made

    return run


# -- pydantic-ai: FunctionModel ---------------------------------------------------------


def prepare_pydantic_ai(turns: int) -> Run:
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel
    from pydantic_ai.usage import UsageLimits

    agent = Agent(name="bench")  # instrumentation is off unless Agent.instrument_all() is called

    @agent.tool_plain
    async def add(a: int, b: int) -> dict[str, int]:
        return {"sum": a + b}

    async def run() -> int:
        made = 0

        async def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
            nonlocal made
            made += 1
            if made >= turns:
                return ModelResponse(parts=[TextPart("done")])
            return ModelResponse(parts=[ToolCallPart("add", {"a": made, "b": 1}, tool_call_id=f"c{made}")])

        result = await agent.run("add up", model=FunctionModel(model), usage_limits=UsageLimits(request_limit=turns))
        assert result.output == "done"
        return made

    return run


# -- openai-agents: a custom Model ------------------------------------------------------


def prepare_openai_agents(turns: int) -> Run:
    from agents import Agent, RunConfig, Runner, Usage, function_tool, set_tracing_disabled
    from agents.items import ModelResponse
    from agents.models.interface import Model
    from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText

    set_tracing_disabled(True)

    @function_tool
    async def add(a: int, b: int) -> dict[str, int]:
        return {"sum": a + b}

    class FakeModel(Model):
        def __init__(self) -> None:
            self.made = 0

        async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
            self.made += 1
            if self.made >= turns:
                text = ResponseOutputText(text="done", type="output_text", annotations=[])
                output: list[Any] = [
                    ResponseOutputMessage(id="m", content=[text], role="assistant", status="completed", type="message")
                ]
            else:
                arguments = json.dumps({"a": self.made, "b": 1})
                output = [
                    ResponseFunctionToolCall(
                        arguments=arguments, call_id=f"c{self.made}", name="add", type="function_call"
                    )
                ]
            return ModelResponse(output=output, usage=Usage(), response_id=None)

        def stream_response(self, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError("the benchmark does not stream")

    config = RunConfig(tracing_disabled=True)

    async def run() -> int:
        model = FakeModel()
        agent = Agent(name="bench", model=model, tools=[add])
        result = await Runner.run(agent, "add up", max_turns=turns, run_config=config)
        assert result.final_output == "done"
        return model.made

    return run


SYSTEMS = {
    system.name: system
    for system in (
        System(
            "baseline",
            prepare_baseline,
            "import asyncio, json",
            "passes the history list itself to the model; runs what it is told; json.dumps the result",
        ),
        System(
            "agentlab",
            prepare_agentlab,
            "import agentlab",
            "checks abort + deadline before each model and tool call; an O(1) read-only snapshot of the history "
            "for the model; copies the decision at the trust boundary and checks its shape, each call's id "
            "(unique in the run), the tool name and validate() on a second copy of the args; turn, call and "
            "context budgets (compact JSON size of every message); JavaScript-identical compact JSON of the "
            "result; the whole run raced as a task against a deadline timer and the outside signal",
        ),
        System(
            "pydantic-ai",
            prepare_pydantic_ai,
            "import pydantic_ai",
            "typed message objects (ModelRequest/ModelResponse parts), a step of its agent graph per request, "
            "tool args validated by pydantic against a JSON schema from the signature, usage limits; "
            "FunctionModel estimates token usage by walking the whole history on every request",
            framework=True,
        ),
        System(
            "openai-agents",
            prepare_openai_agents,
            "import agents",
            "pydantic Responses-API items; the model input rebuilt from all of the run's items and de-duplicated "
            "on every turn; tool args parsed from a JSON string and validated by pydantic; guardrail, hook, "
            "handoff and tool-use checks; run-state bookkeeping (tracing disabled)",
            framework=True,
        ),
    )
}
