"""Idempotency keys with real ids: ids are per run, so on a shared store the key must be scoped, or come from
the application when it must survive a restart (issue 12)."""

from __future__ import annotations

import contextlib
import json
import sqlite3
import subprocess
import sys
import threading

import pytest

from agentlab import AbortController, ConfigError, ToolCall, ToolError, agent_loop, agent_loop_sync, from_decider
from agentlab.approval import ApprovalDesk
from agentlab.examples import ScriptedDecider
from agentlab.schema import validator
from agentlab.store import Store, StoreError


def reserve(book: str, customer: str) -> ScriptedDecider:
    """A decider (the tutorial's model interface): from_decider numbers its calls call_1, call_2, ... every run."""
    return ScriptedDecider(
        {"type": "tool_call", "name": "reserve", "arguments": {"book": book, "customer": customer, "quantity": 1}},
        {"type": "final", "text": "done"},
    )


def yes(call) -> bool:
    return True


def keys(store: Store) -> list[str]:
    return [r["call_id"] for r in store.sql("SELECT call_id FROM writes ORDER BY rowid")]


def reservations(store: Store) -> list[tuple[str, str]]:
    return [(r["customer"], r["book"]) for r in store.sql("SELECT * FROM reservations WHERE call_id IS NOT NULL")]


async def test_two_unrelated_runs_with_the_same_call_ids_both_write(tmp_path):
    """The measured bug: from_decider's call_1 in a second conversation was refused as a reused key."""
    store = Store(tmp_path / "shop.db")
    first = await agent_loop("q", from_decider(reserve("A", "ada")), store.tools(), approve=yes)
    second = await agent_loop("q", from_decider(reserve("D", "bob")), store.tools(), approve=yes)
    assert first.history[1]["calls"][0]["id"] == second.history[1]["calls"][0]["id"] == "call_1"
    assert reservations(store) == [("ada", "A"), ("bob", "D")]
    assert keys(store) == ["run-1/call_1", "run-2/call_1"] and store.problems() == []


async def test_the_same_request_in_a_new_run_is_a_new_write_with_the_default_key(tmp_path):
    """The other half of the bug: a new conversation silently got the old result and reserved nothing."""
    store = Store(tmp_path / "shop.db")
    for _ in range(2):
        result = await agent_loop("q", from_decider(reserve("A", "ada")), store.tools(), approve=yes)
        assert json.loads(result.history[2]["content"])["on_hand"] in (2, 1)
    assert reservations(store) == [("ada", "A"), ("ada", "A")]  # the double reservation only a key can prevent
    assert [r["outcome"] for r in store.sql("SELECT outcome FROM audit ORDER BY seq")] == ["applied", "applied"]


async def test_runs_on_two_store_objects_of_one_file_never_share_a_number(tmp_path):
    one, other = Store(tmp_path / "shop.db"), Store(str(tmp_path / "." / "shop.db"))
    for store, customer in ((one, "ada"), (other, "bob"), (one, "cy"), (other, "dee")):
        await agent_loop("q", from_decider(reserve("E", customer)), store.tools(), approve=yes)
    assert [c for c, _ in reservations(one)] == ["ada", "bob", "cy", "dee"]
    assert keys(one) == [f"run-{n}/call_1" for n in (1, 2, 3, 4)] and one.problems() == []


async def test_one_run_writing_through_two_store_objects_of_one_file_has_one_number(tmp_path):
    """Both objects look the run up by its signal and the file: the same run, the same key, one write."""
    one, other = Store(tmp_path / "shop.db"), Store(tmp_path / "shop.db")
    signal = AbortController().signal
    value = {"book": "A", "customer": "ada", "quantity": 1}
    first = one.tools()["reserve"].run(value, signal, ToolCall("call_1", "reserve", value))
    again = other.tools()["reserve"].run(value, signal, ToolCall("call_1", "reserve", value))
    assert first == again and reservations(one) == [("ada", "A")]


CHILD = """
import sys
from agentlab import agent_loop_sync, from_decider
from agentlab.approval import ApprovalDesk
from agentlab.examples import ScriptedDecider
from agentlab.store import Store

store = Store(sys.argv[1])
decider = ScriptedDecider(
    {"type": "tool_call", "name": "reserve", "arguments": {"book": "C", "customer": sys.argv[2], "quantity": 1}},
    {"type": "final", "text": "done"},
)
for _ in range(3):
    agent_loop_sync("q", from_decider(decider), store.tools(), approve=lambda call: True)
"""


def test_runs_in_two_processes_on_one_file_both_write(tmp_path):
    path = tmp_path / "shop.db"
    Store(path, books=[{"id": "C", "title": "t", "author": "a", "year": 2000, "copies": 10}])
    children = [
        subprocess.Popen([sys.executable, "-c", CHILD, str(path), name], stderr=subprocess.PIPE, text=True)
        for name in ("ada", "bob")
    ]
    for child in children:
        _, err = child.communicate(timeout=60)
        assert child.returncode == 0, err
    store = Store(path)
    assert sorted(c for c, _ in reservations(store)) == ["ada"] * 3 + ["bob"] * 3
    assert sorted(keys(store)) == sorted(f"run-{n}/call_1" for n in range(1, 7)) and store.problems() == []


def test_runs_in_threads_each_get_their_own_number(tmp_path):
    store = Store(tmp_path / "shop.db", books=[{"id": "C", "title": "t", "author": "a", "year": 2000, "copies": 20}])

    def one_run(customer: str) -> None:
        agent_loop_sync("q", from_decider(reserve("C", customer)), store.tools(), approve=yes)

    threads = [threading.Thread(target=one_run, args=(f"c{n}",)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(keys(store)) == sorted(f"run-{n}/call_1" for n in range(1, 9))
    assert sorted(c for c, _ in reservations(store)) == [f"c{n}" for n in range(8)] and store.problems() == []


def test_a_retry_within_its_run_replays(tmp_path):
    """A tool retried with the same call in the same run (a busy database, say) applies once."""
    store = Store(tmp_path / "shop.db")
    run = store.tools()["reserve"].run
    signal = AbortController().signal
    value = {"book": "A", "customer": "ada", "quantity": 1}
    first = run(value, signal, ToolCall("call_1", "reserve", value))
    again = run(dict(reversed(value.items())), signal, ToolCall("call_1", "reserve", value))
    assert first == again and reservations(store) == [("ada", "A")]
    with pytest.raises(StoreError, match=r"key 'run-1/call_1' already ran .* call 'call_1' ran before in this run"):
        run(value | {"quantity": 2}, signal, ToolCall("call_1", "reserve", value | {"quantity": 2}))
    assert run(value, AbortController().signal, ToolCall("call_1", "reserve", value)) != first  # another run


def test_a_fresh_temporary_store_numbers_its_runs_from_one(tmp_path):
    with Store() as store:
        value = {"book": "E", "customer": "ada", "quantity": 1}
        for _ in range(3):
            store.tools()["reserve"].run(value, AbortController().signal, ToolCall("call_7", "reserve", value))
        assert keys(store) == ["run-1/call_7", "run-2/call_7", "run-3/call_7"]


def test_a_shop_made_before_runs_were_numbered_gets_the_table(tmp_path):
    path = tmp_path / "old.db"
    Store(path)
    with contextlib.closing(sqlite3.connect(path)) as db, db:
        db.execute("DROP TABLE runs")
        db.execute("PRAGMA user_version = 1")
    store = Store(path)
    value = {"book": "E", "customer": "ada", "quantity": 1}
    store.tools()["reserve"].run(value, AbortController().signal, ToolCall("call_1", "reserve", value))
    assert keys(store) == ["run-1/call_1"] and store.problems() == []


async def test_a_key_function_must_make_a_key(tmp_path):
    store = Store(tmp_path / "shop.db")
    with pytest.raises(ConfigError, match="key must be a function"):
        store.tools(key="order-7")
    with pytest.raises(ToolError, match="must make a non-empty string"):
        await agent_loop("q", from_decider(reserve("A", "ada")), store.tools(key=lambda call: ""), approve=yes)


ARGS = {
    "lookup": [{"id": "A"}, {"id": ""}, {"id": 3}, {}],
    "reservation": [{"reservation": 1}, {"reservation": 0}, {"reservation": "1"}, {"reservation": 1, "x": 1}],
    "reserve": [
        {"book": "A", "customer": "ada", "quantity": 2},
        {"book": "A", "customer": "ada", "quantity": 11},
        {"book": "A", "customer": "", "quantity": 1},
        {"book": "A", "quantity": 1},
    ],
    "update": [{"reservation": 3, "quantity": 1}, {"reservation": 3, "quantity": 0}],
    "cancel": [{"reservation": 3}, {"reservation": True}],
}


@pytest.mark.parametrize("name", sorted(ARGS))
def test_each_shop_tools_schema_agrees_with_its_check(tmp_path, name):
    tool = Store(tmp_path / "shop.db").tools()[name]
    check = validator(tool.parameters)
    for args in ARGS[name]:
        told = _accepts(check, args)
        assert told == _accepts(tool.validate, args), (name, args)


def _accepts(check, args) -> bool:
    try:
        check(args)
    except ValueError:
        return False
    return True


# -- the desk looks up the key the write will use ---------------------------------------------------


def order_key(call: ToolCall) -> str:
    return f"order-7/{call.name}"


@pytest.mark.parametrize("key", [None, order_key], ids=["default key", "application key"])
async def test_a_desk_card_says_replay_exactly_when_the_write_replays(tmp_path, key):
    store = Store(tmp_path / "shop.db")
    desk = ApprovalDesk(store, script=[True] * 3, key=key)
    for _ in range(3):  # the same request in three runs
        await agent_loop(
            "q", from_decider(reserve("A", "ada")), store.tools(key=key), approve=store.audited(desk, key=key)
        )
    written = [r["outcome"] for r in store.sql("SELECT outcome FROM audit WHERE outcome != 'approved' ORDER BY seq")]
    assert [card.change.replay for card in desk.cards] == [outcome == "replayed" for outcome in written]
    assert written == (["applied"] * 3 if key is None else ["applied", "replayed", "replayed"])
    approved = [r["call_id"] for r in store.sql("SELECT call_id FROM audit WHERE outcome = 'approved' ORDER BY seq")]
    assert approved == [card.change.key for card in desk.cards] == keys(store) * (1 if key is None else 3)


def test_a_preview_in_a_run_that_already_wrote_the_call_is_a_replay(tmp_path):
    store = Store(tmp_path / "shop.db")
    signal, value = AbortController().signal, {"book": "A", "customer": "ada", "quantity": 1}
    proposed = ToolCall("call_1", "reserve", value)
    assert not store.preview(proposed, signal).replay
    store.tools()["reserve"].run(value, signal, proposed)
    change = store.preview(proposed, signal)
    assert change.replay and change.key == "run-1/call_1" and "'run-1/call_1'" in str(change)
    assert not store.preview(proposed, AbortController().signal).replay  # another run: a new write


async def test_keys_given_wrong_are_refused_with_what_to_change(tmp_path):
    store = Store(tmp_path / "shop.db")
    with pytest.raises(ConfigError, match=r"store\.tools"):
        ApprovalDesk(store, key="order-7")
    with pytest.raises(ConfigError, match="key must be a function"):
        store.preview(ToolCall("c", "reserve", {"book": "A", "customer": "ada", "quantity": 1}), key=42)
    with pytest.raises(ConfigError, match="key must be a function"):
        store.audited(yes, key="order-7")
    with pytest.raises(ConfigError, match=r"give ApprovalDesk\(store, key=\.\.\.\) the function"):
        ApprovalDesk(store, script=[True]).start("q", from_decider(reserve("A", "ada")), store.tools(key=order_key))
    with pytest.raises(ToolError, match="must make a non-empty string"):
        await agent_loop("q", from_decider(reserve("A", "ada")), store.tools(key=lambda call: 7), approve=yes)
    with pytest.raises(ConfigError, match="must be its run's AbortSignal"):
        store.tools()["cancel"].run({"reservation": 1}, "stop", ToolCall("c", "cancel", {"reservation": 1}))
    assert reservations(store) == [] and store.sql("SELECT * FROM audit") == []
