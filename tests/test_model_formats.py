"""The wire formats of agentlab.models: history to each provider's messages and back, as pure functions."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentlab import ConfigError, DeadlineError, ModelOutputError, Tool, agent_loop
from agentlab.lab.examples import LOOKUP_PARAMETERS, lookup_tools, weather_tools
from agentlab.lab.fakes import NeverAnswers, Scripted, call, calls, final
from agentlab.models import anthropic_format, chat_format, responses_format
from agentlab.models.transcript import ABANDONED
from agentlab.schema import validator

# -- histories made by the loop itself, not by hand --------------------------------


async def two_batches() -> list[dict]:
    model = Scripted(
        calls(call("lookup", {"id": "A"}, "c1"), call("lookup", {"id": "B"}, "c2")),
        calls(call("lookup", {"id": "Z"}, "c3")),
        final("A is in, B is out, Z is unknown"),
    )
    return (await agent_loop("Which books are in?", model, lookup_tools())).history


async def cut_by_deadline() -> list[dict]:
    """A batch whose second call never finished: the run hit its deadline during it."""

    async def slow(args, signal):
        if args["id"] == "B":
            await NeverAnswers()([], signal)
        return {"id": args["id"]}

    tools = {"lookup": Tool(validate=lookup_tools()["lookup"].validate, run=slow, parameters=LOOKUP_PARAMETERS)}
    model = Scripted(calls(call("lookup", {"id": "A"}, "c1"), call("lookup", {"id": "B"}, "c2")))
    with pytest.raises(DeadlineError) as caught:
        await agent_loop("Which books are in?", model, tools, timeout_ms=500)  # A's answer must come first
    return caught.value.history


def answered_ids(kind: str, sent: list[dict]) -> list[str]:
    if kind == "chat":
        return [m["tool_call_id"] for m in sent if m["role"] == "tool"]
    if kind == "responses":
        return [m["call_id"] for m in sent if m.get("type") == "function_call_output"]
    return [b["tool_use_id"] for m in sent if m["role"] == "user" for b in m["content"] if b["type"] == "tool_result"]


def convert(kind: str, history: list[dict]) -> list[dict]:
    return {
        "chat": lambda: chat_format.to_messages(history),
        "responses": lambda: responses_format.to_input(history),
        "anthropic": lambda: anthropic_format.to_messages(history),
    }[kind]()


FORMATS = ["chat", "responses", "anthropic"]


@pytest.mark.parametrize("kind", FORMATS)
async def test_every_call_id_gets_exactly_one_result(kind):
    history = await two_batches()
    assert answered_ids(kind, convert(kind, history)) == ["c1", "c2", "c3"]


@pytest.mark.parametrize("kind", FORMATS)
async def test_a_call_cut_short_by_the_deadline_is_sent_as_abandoned(kind):
    history = await cut_by_deadline()
    assert [m.get("call_id") for m in history if m["role"] == "tool"] == ["c1"]  # the loop's own history
    sent = convert(kind, history)
    assert answered_ids(kind, sent) == ["c1", "c2"]
    assert ABANDONED in json.dumps(sent).replace('\\"', '"')


async def test_chat_messages_in_order():
    sent = chat_format.to_messages(await two_batches(), system="Be brief.")
    assert [m["role"] for m in sent] == [
        "system",
        "user",
        "assistant",
        "tool",
        "tool",
        "assistant",
        "tool",
        "assistant",
    ]
    first = sent[2]["tool_calls"][0]
    assert first == {"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": '{"id":"A"}'}}


async def test_anthropic_puts_one_batchs_results_in_one_user_message_and_alternates_roles():
    sent = anthropic_format.to_messages(await two_batches())
    assert [m["role"] for m in sent] == ["user", "assistant", "user", "assistant", "user", "assistant"]
    assert [b["type"] for b in sent[2]["content"]] == ["tool_result", "tool_result"]
    history = await two_batches()
    resumed = [*history[:-1], {"role": "user", "content": "and C?"}]  # a tool result, then the user again
    sent = anthropic_format.to_messages(resumed)
    assert [b["type"] for b in sent[-1]["content"]] == ["tool_result", "text"]


async def test_an_abandoned_call_is_an_error_result_for_anthropic():
    sent = anthropic_format.to_messages(await cut_by_deadline())
    results = sent[-1]["content"]
    assert [(r["tool_use_id"], r["is_error"]) for r in results] == [("c1", False), ("c2", True)]


def test_a_result_without_its_call_is_refused():
    with pytest.raises(ConfigError, match="no call before it"):
        chat_format.to_messages([{"role": "user", "content": "hi"}, {"role": "tool", "call_id": "x", "content": "1"}])


# -- both ways: what we send as a call comes back as the same call ------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**6), 10**6) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8,
)
call_lists = st.lists(
    st.builds(
        lambda i, name, args: {"id": f"id_{i}", "name": name, "args": args},
        st.integers(0, 10**6),
        st.text(min_size=1, max_size=10),
        st.dictionaries(st.text(max_size=6), json_values, max_size=4),
    ),
    min_size=1,
    max_size=4,
    unique_by=lambda c: c["id"],
)


def as_response(kind: str, history: list[dict]) -> dict:
    """The assistant's calls as that provider would send them back in a response body."""
    if kind == "chat":
        message = chat_format.to_messages(history)[1]
        return {"choices": [{"finish_reason": "tool_calls", "message": message}]}
    if kind == "responses":
        items = [i for i in responses_format.to_input(history) if i.get("type") == "function_call"]
        return {"status": "completed", "output": items}
    blocks = anthropic_format.to_messages(history)[1]["content"]
    return {"stop_reason": "tool_use", "content": blocks}


@pytest.mark.parametrize("kind", FORMATS)
@given(batch=call_lists)
def test_calls_round_trip(kind, batch):
    history = [{"role": "user", "content": "go"}, {"role": "assistant", "calls": batch}]
    decision = {"chat": chat_format, "responses": responses_format, "anthropic": anthropic_format}[kind].decision_from(
        as_response(kind, history)
    )
    assert decision == {"kind": "tools", "calls": batch}


# -- what real models get wrong, and the error each becomes -------------------------


def chat(calls=None, *, content=None, finish="tool_calls", refusal=None):
    message = {"role": "assistant", "content": content, "tool_calls": calls, "refusal": refusal}
    return {"choices": [{"index": 0, "finish_reason": finish, "message": message}]}


def fn(arguments, id="call_1", name="lookup", type="function"):
    return {"id": id, "type": type, "function": {"name": name, "arguments": arguments}}


CHAT_FAULTS = {
    "arguments as an object, not a string": (chat([fn({"id": "A"})]), "as a JSON string, got dict"),
    "a non-function call": (chat([{"id": "c", "type": "custom", "custom": {"name": "x", "input": "y"}}]), "custom"),
    "cut off at max tokens": (chat(content="The book is", finish="length"), "output token limit"),
    "a refusal": (chat(content=None, finish="stop", refusal="I can't help with that."), "refused"),
    "a content filter": (chat(content="", finish="content_filter"), "content filter"),
    "no choices": ({"choices": []}, "no choices"),
}


@pytest.mark.parametrize("case", sorted(CHAT_FAULTS))
def test_chat_faults_are_model_output_errors_that_keep_the_raw_output(case):
    response, phrase = CHAT_FAULTS[case]
    with pytest.raises(ModelOutputError, match=phrase) as caught:
        chat_format.decision_from(response)
    assert caught.value.rejected is not None


def test_chat_json_that_is_not_an_object_is_left_to_the_loop():
    decision = chat_format.decision_from(chat([fn("[1, 2]")]))
    assert decision["calls"][0]["args"] == [1, 2]  # agent_loop refuses it: "the args must be a dict"


def test_a_models_own_mistakes_are_left_to_the_loop_as_they_came():
    """Arguments that are not JSON and a missing id: the loop refuses them, and max_refusals can give them back."""
    assert chat_format.decision_from(chat([fn('{"id": "A",')]))["calls"][0]["args"] == '{"id": "A",'
    assert chat_format.decision_from(chat([fn('{"id": "A"}', id=None)]))["calls"][0]["id"] is None
    assert responses_format.decision_from(responses([fc("{")]))["calls"][0]["args"] == "{"
    assert responses_format.decision_from(responses([fc("{}", call_id=None)]))["calls"][0]["id"] is None
    assert anthropic_format.decision_from(anthropic([tu('{"id": "A"}')]))["calls"][0]["args"] == '{"id": "A"}'
    assert anthropic_format.decision_from(anthropic([tu([1])]))["calls"][0]["args"] == [1]
    assert anthropic_format.decision_from(anthropic([tu({"id": "A"}, id=None)]))["calls"][0]["id"] is None


def responses(output, status="completed", reason=None):
    body = {"status": status, "output": output, "usage": {"input_tokens": 10, "output_tokens": 3}}
    if reason:
        body["incomplete_details"] = {"reason": reason}
    return body


def fc(arguments, call_id="call_1", name="lookup"):
    return {"type": "function_call", "id": "fc_1", "call_id": call_id, "name": name, "arguments": arguments}


RESPONSES_FAULTS = {
    "arguments as an object": (responses([fc({"id": "A"})]), "got dict"),
    "a non-function call": (responses([{"type": "web_search_call", "id": "ws_1"}]), "web_search_call"),
    "cut off at max tokens": (responses([], "incomplete", "max_output_tokens"), "stopped early"),
    "a content filter": (responses([], "incomplete", "content_filter"), "content filter"),
    "a refusal": (
        responses([{"type": "message", "content": [{"type": "refusal", "refusal": "No."}]}]),
        "refused",
    ),
}


@pytest.mark.parametrize("case", sorted(RESPONSES_FAULTS))
def test_responses_faults(case):
    response, phrase = RESPONSES_FAULTS[case]
    with pytest.raises(ModelOutputError, match=phrase) as caught:
        responses_format.decision_from(response)
    assert caught.value.rejected is not None


def anthropic(content, stop="tool_use"):
    return {"content": content, "stop_reason": stop, "usage": {"input_tokens": 7, "output_tokens": 2}}


def tu(input, id="toolu_1", name="lookup"):
    return {"type": "tool_use", "id": id, "name": name, "input": input}


ANTHROPIC_FAULTS = {
    "a server tool": (anthropic([{"type": "server_tool_use", "id": "s", "name": "web_search"}]), "server_tool_use"),
    "cut off at max tokens": (anthropic([{"type": "text", "text": "The"}], "max_tokens"), "max_tokens"),
    "a refusal": (anthropic([], "refusal"), "refused"),
    "a context window exceeded": (anthropic([], "model_context_window_exceeded"), "context window"),
}


@pytest.mark.parametrize("case", sorted(ANTHROPIC_FAULTS))
def test_anthropic_faults(case):
    response, phrase = ANTHROPIC_FAULTS[case]
    with pytest.raises(ModelOutputError, match=phrase) as caught:
        anthropic_format.decision_from(response)
    assert caught.value.rejected is not None


def test_token_usage_comes_with_the_decision():
    text = {"type": "message", "content": [{"type": "output_text", "text": "done"}]}
    assert responses_format.decision_from(responses([text]))["usage"] == {"input_tokens": 10, "output_tokens": 3}
    body = chat(content="done", finish="stop") | {"usage": {"prompt_tokens": 5, "completion_tokens": 1}}
    assert chat_format.decision_from(body) == {
        "kind": "final",
        "text": "done",
        "usage": {"input_tokens": 5, "output_tokens": 1},
    }
    assert "usage" not in chat_format.decision_from(chat(content="done", finish="stop"))


# -- tools a model can be told about --------------------------------------------


def test_example_tools_describe_themselves_in_each_format():
    tools = {**weather_tools(), **lookup_tools()}
    assert chat_format.tool_specs(tools)[1]["function"]["parameters"] == LOOKUP_PARAMETERS
    assert responses_format.tool_specs(tools)[0]["name"] == "getWeather"
    assert anthropic_format.tool_specs(tools)[1]["input_schema"]["required"] == ["id"]


def test_a_tool_without_a_schema_cannot_be_described():
    with pytest.raises(ConfigError, match="no parameters schema"):
        chat_format.tool_specs({"x": Tool(validate=lambda a: None, run=lambda a: 1)})


@pytest.mark.parametrize("schema", [{"type": "string"}, [1], {"properties": {}}, {"type": "object", "x": object()}])
def test_parameters_must_be_an_object_schema_of_json_data(schema):
    with pytest.raises(ConfigError, match="parameters"):
        Tool(validate=lambda a: None, run=lambda a: 1, parameters=schema)


ARGS = [{"city": "Pune"}, {"city": 42}, {"city": "x" * 81}, {"id": "A"}, {"id": ""}, {"id": "x" * 65}, {}, [1]]


@pytest.mark.parametrize("tools", [weather_tools, lookup_tools])
def test_each_example_tools_schema_agrees_with_its_validate(tools):
    """What the model is told and what the application checks accept and refuse the same args.

    (getWeather's check, the tutorial's, ignores extra keys that its schema forbids: not tried here.)
    """
    for tool in tools().values():
        check = validator(tool.parameters)
        for args in ARGS:
            assert _accepts(check, args) == _accepts(tool.validate, args), args


def _accepts(check, args) -> bool:
    try:
        check(args)
    except ValueError:
        return False
    return True


def test_validator_names_every_problem():
    check = validator(LOOKUP_PARAMETERS)
    with pytest.raises(ValueError, match=r"args: Additional properties.*'x' was unexpected.*args.id: 42 is not"):
        check({"id": 42, "x": 1})


def test_validator_refuses_a_schema_that_is_not_one():
    with pytest.raises(ConfigError, match="not a valid JSON Schema"):
        validator({"type": "object", "properties": {"id": {"type": 12}}})
