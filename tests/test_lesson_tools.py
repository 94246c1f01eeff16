"""The lessons' tools, attacked: the naive loop in a playground, the expected failure of a check, the quizzes, the
JavaScript beside the Python.

Each naive loop here is written from scratch, as a learner would write a first loop, not as an edit of agentlab's.
"""

from __future__ import annotations

import asyncio
import gc
import json
import time
from typing import Any

import pytest

from agentlab import Tool, agent_loop, parse_lookup_args
from agentlab.abort import AbortController
from agentlab.behaviours import REFERENCE, BehaviourFailed, verify
from agentlab.errors import AbortError, ConfigError
from agentlab.lab import naive as naive_module
from agentlab.lab.naive import Answer, NaiveCrash, NaiveRun, run_naive
from agentlab.lab.quiz import Quiz, names, questions, quiz
from agentlab.lab.reference import JAVASCRIPT, side_by_side
from agentlab.lab.scenarios import run_scenario

LIMITS = {"max_turns": 6, "max_calls": 8, "timeout_ms": 2000, "max_chars": 2000}


async def trusting_loop(question, model, tools, **limits):
    """A first loop: no checks at all, results tied to their ids."""
    history = [{"role": "user", "content": question}]
    while True:
        decision = await model(history, None)
        if decision["kind"] == "final":
            return Answer(decision["text"], [*history, {"role": "assistant", "content": decision["text"]}])
        history.append({"role": "assistant", "calls": decision["calls"]})
        for c in decision["calls"]:
            result = await tools[c["name"]].run(c["args"])
            history.append({"role": "tool", "call_id": c["id"], "content": json.dumps(result, separators=(",", ":"))})


async def gather_loop(question, model, tools):
    """Another style: every call of a batch at once with gather, no **limits parameter, returns a bare string."""
    history: list[dict[str, Any]] = [{"role": "user", "content": question}]
    for _ in range(100):
        d = await model(history)
        if d["kind"] != "tools":
            return d["text"]
        results = await asyncio.gather(*(tools[c["name"]].run(c["args"]) for c in d["calls"]))
        history += [{"role": "tool", "content": json.dumps(r)} for r in results]
    return "gave up"


def lookup_model(*batches):
    turns = iter(batches)

    async def model(messages, signal=None):
        batch = next(turns, None)
        if batch is None:
            return {"kind": "final", "text": "done"}
        return {"kind": "tools", "calls": batch}

    return model


def lookup_tools(ran=None):
    async def run(args):
        if ran is not None:
            ran.append(args)
        return {"id": args["id"]}

    return {"lookup": Tool(validate=parse_lookup_args, run=run)}


# -- the naive loop, watched ---------------------------------------------------------------------------------------


async def test_a_naive_answer_comes_back_with_the_run_as_the_model_saw_it() -> None:
    model = lookup_model([{"id": "c1", "name": "lookup", "args": {"id": "A"}}])
    run = await run_naive(trusting_loop, "q", model, lookup_tools(), LIMITS)
    assert isinstance(run, NaiveRun)
    assert run.text == "done"
    assert run.usage.turns == 2 and run.usage.calls == 1
    assert run.history[-1] == {"role": "assistant", "content": "done"}
    assert {"role": "tool", "call_id": "c1", "content": '{"id":"A"}'} in run.history


async def test_a_naive_crash_is_returned_not_raised_and_keeps_what_was_seen() -> None:
    model = lookup_model([{"id": "c1", "name": "toString", "args": {}}])
    run = await run_naive(gather_loop, "q", model, lookup_tools(), LIMITS)
    assert isinstance(run, NaiveCrash)
    assert str(run) == "KeyError: 'toString'"
    assert run.history[-1]["calls"][0]["name"] == "toString"


async def test_a_naive_loop_that_never_ends_is_given_up_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(naive_module, "NAIVE_BOUND_S", 0.2)

    async def forever(messages, signal=None):
        return {"kind": "tools", "calls": [{"id": str(time.perf_counter()), "name": "lookup", "args": {"id": "A"}}]}

    started = time.perf_counter()
    run = await run_naive(trusting_loop, "q", forever, lookup_tools(), LIMITS)
    assert isinstance(run, NaiveCrash) and "still running after 0.2 s" in str(run)
    assert time.perf_counter() - started < 5
    assert run.usage.turns > LIMITS["max_turns"]  # what the gauges show: far past the turn budget


async def test_stop_reaches_a_naive_loop_waiting_on_a_model_that_never_answers() -> None:
    controller = AbortController()

    async def silent(messages, signal=None):
        await asyncio.Event().wait()

    asyncio.get_running_loop().call_later(0.05, controller.abort, AbortError("aborted: Stop"))
    started = time.perf_counter()
    run = await run_naive(trusting_loop, "q", silent, {}, LIMITS, controller.signal)
    assert isinstance(run, NaiveCrash) and "Stop" in str(run)
    assert time.perf_counter() - started < 2


async def test_a_naive_loop_that_drops_a_tool_coroutine_leaves_no_warning(recwarn: pytest.WarningsRecorder) -> None:
    async def drops(question, model, tools):
        decision = await model([{"role": "user", "content": question}])
        pending = [tools[c["name"]].run(c["args"]) for c in decision["calls"]]  # the second name is unknown
        return await pending[0]

    model = lookup_model([{"id": "1", "name": "lookup", "args": {"id": "A"}}, {"id": "2", "name": "nope", "args": {}}])
    run = await run_naive(drops, "q", model, lookup_tools(), LIMITS)
    gc.collect()
    assert isinstance(run, NaiveCrash)
    assert not [w for w in recwarn if "never awaited" in str(w.message)]


async def test_a_scenario_runs_through_a_naive_loop_and_through_agent_loop() -> None:
    agentlab_run = await run_scenario("tool_names")
    naive_run = await run_scenario("tool_names", gather_loop)
    assert type(agentlab_run).__name__ == "UnknownToolError"
    assert isinstance(naive_run, NaiveCrash) and "KeyError" in str(naive_run)


# -- a check expected to fail ----------------------------------------------------------------------------------------


async def test_expect_failure_prints_why_a_naive_loop_fails(capsys: pytest.CaptureFixture[str]) -> None:
    await verify("unknown_tool", trusting_loop, expect_failure=True)
    out = capsys.readouterr().out
    assert out.startswith("✗ A bad name, including an inherited one, doesn't run a tool")
    assert "unknown tool" in out and "KeyError" in out
    assert all(len(line) <= 100 for line in out.splitlines())


async def test_expect_failure_raises_when_the_loop_has_the_rule_after_all() -> None:
    with pytest.raises(BehaviourFailed, match="to fail 'unknown_tool'"):
        await verify("unknown_tool", agent_loop, expect_failure=True)


async def test_a_plain_verify_still_raises_on_a_naive_loop() -> None:
    with pytest.raises(BehaviourFailed):
        await verify("invalid_args_never_run", trusting_loop)


# -- the JavaScript beside the Python --------------------------------------------------------------------------------


def test_each_of_the_seven_has_its_javascript_and_its_python_port() -> None:
    assert set(JAVASCRIPT) == {b.key for b in REFERENCE}
    for behaviour in REFERENCE:
        shown = side_by_side(behaviour.key)
        assert shown.python.startswith(f"async def {behaviour.key}(")
        assert shown.javascript.startswith("test(") and shown.javascript.endswith("});")
        bundle = shown._repr_mimebundle_()
        assert "The exercise’s test (JavaScript)" in bundle["text/html"]
        assert shown.javascript in bundle["text/plain"] and shown.python in bundle["text/plain"]


def test_the_javascript_matches_the_phrase_its_port_matches() -> None:
    for key, phrase in (
        ("unknown_tool", "unknown tool"),
        ("tool_and_turn_budgets", "turn budget"),
        ("duplicate_call_id", "duplicate call id"),
        ("deadline_ignoring_signal", "deadline"),
        ("context_output_cancellation", "output budget"),
    ):
        shown = side_by_side(key)
        assert f"/{phrase}/" in shown.javascript and f'"{phrase}"' in shown.python


def test_side_by_side_names_the_seven_when_asked_for_another() -> None:
    with pytest.raises(ConfigError, match="not one of the seven reference tests"):
        side_by_side("history_shape")


# -- the quizzes -----------------------------------------------------------------------------------------------------


def test_every_quiz_is_well_formed() -> None:
    assert names(), "no quiz at all"
    for notebook in names():
        asked = questions(notebook)
        assert 3 <= len(asked) <= 5, f"{notebook}: {len(asked)} questions"
        for question in asked:
            assert 3 <= len(question.choices) <= 4 and len(set(question.choices)) == len(question.choices)
            assert isinstance(question.answer, int) and 0 <= question.answer < len(question.choices), notebook
            assert question.text.endswith("?") and len(question.why) > 20, (notebook, question.text)


def test_a_quiz_checks_each_answer_and_a_saved_one_gives_none_away() -> None:
    for notebook in names():
        shown = quiz(notebook)
        for number, question in enumerate(shown.questions, 1):
            for choice in range(len(question.choices)):
                verdict = shown.verdict(number, choice)
                assert verdict.startswith("✓" if choice == question.answer else "✗")
                assert question.why in verdict
        saved = shown._repr_mimebundle_()
        for question in shown.questions:
            assert question.why not in saved["text/html"] and question.why not in saved["text/plain"]


def test_quiz_mistakes_are_config_errors() -> None:
    with pytest.raises(ConfigError, match="no quiz for 'nope'"):
        quiz("nope")
    shown = Quiz(names()[0])
    with pytest.raises(ConfigError):
        shown.verdict(0, 0)
    with pytest.raises(ConfigError):
        shown.verdict(1, 99)


def test_a_quiz_answers_when_a_learner_picks_a_choice() -> None:
    shown = quiz(names()[0])
    widget = shown._widget()
    first = widget.children[0]
    buttons, verdict = first.children[1], first.children[2]
    buttons.value = shown.questions[0].answer
    assert "✓ Right." in verdict.value
    buttons.value = (shown.questions[0].answer + 1) % len(shown.questions[0].choices)
    assert "✗ Not quite" in verdict.value


# -- the playground's toggle -----------------------------------------------------------------------------------------


async def test_the_toggle_runs_the_same_scenario_through_the_naive_loop() -> None:
    from agentlab.lab.widgets import NAIVE, playground

    plain = playground("tool_names")
    assert plain.loop not in plain.box.children  # no naive loop given: no toggle
    shown = playground("tool_names", naive=gather_loop)
    try:
        assert shown.loop in shown.box.children and shown.status.startswith("✗ UnknownToolError")
        shown.loop.value = True
        await shown.settled()
        assert shown.status.startswith("✗ the naive loop failed: KeyError")
        saved = shown._repr_mimebundle_()["text/plain"].splitlines()
        assert saved[1].startswith(f"playground tool_names: {NAIVE} · ")
        shown.loop.value = False
        await shown.settled()
        assert shown.status.startswith("✗ UnknownToolError")
    finally:
        shown.close()
        plain.close()


def test_a_naive_loop_must_be_a_function() -> None:
    from agentlab.lab.widgets import playground

    with pytest.raises(ConfigError, match="naive must be a loop function"):
        playground("tool_names", naive="naive_loop")
