"""Idempotency keys with real ids: ids are per run, so on a shared store the key must be scoped, or come from
the application when it must survive a restart (issue 12)."""

from __future__ import annotations

import pytest

from agentlab import ConfigError, ToolError, agent_loop, from_decider
from agentlab.lab.examples import ScriptedDecider
from agentlab.schema import validator
from agentlab.writes.store import Store


def reserve(book: str, customer: str) -> ScriptedDecider:
    """A decider (the tutorial's model interface): from_decider numbers its calls call_1, call_2, ... every run."""
    return ScriptedDecider(
        {"type": "tool_call", "name": "reserve", "arguments": {"book": book, "customer": customer, "quantity": 1}},
        {"type": "final", "text": "done"},
    )


def yes(call) -> bool:
    return True


def reservations(store: Store) -> list[tuple[str, str]]:
    return [(r["customer"], r["book"]) for r in store.sql("SELECT * FROM reservations WHERE call_id IS NOT NULL")]


async def test_unscoped_call_ids_collide_across_unrelated_conversations(tmp_path):
    """The hazard the default key leaves: two conversations, one store, the same call_1."""
    store = Store(tmp_path / "shop.db")
    await agent_loop("q", from_decider(reserve("A", "ada")), store.tools(), approve=yes)
    with pytest.raises(ToolError, match="idempotency key reused"):
        await agent_loop("q", from_decider(reserve("D", "bob")), store.tools(), approve=yes)
    assert reservations(store) == [("ada", "A")]


async def test_keys_scoped_by_conversation_do_not_collide(tmp_path):
    store = Store(tmp_path / "shop.db")
    for conversation, customer, book in (("conv-1", "ada", "A"), ("conv-2", "bob", "D"), ("conv-3", "ada", "A")):
        tools = store.tools(key=lambda call, conversation=conversation: f"{conversation}/{call.id}")
        result = await agent_loop("q", from_decider(reserve(book, customer)), tools, approve=yes)
        assert '"rejected"' not in result.history[2]["content"]
    assert reservations(store) == [("ada", "A"), ("bob", "D"), ("ada", "A")]  # the third is a new request
    assert [r["call_id"] for r in store.sql("SELECT call_id FROM writes ORDER BY call_id")] == [
        "conv-1/call_1",
        "conv-2/call_1",
        "conv-3/call_1",
    ]


async def test_a_key_from_the_application_survives_a_restart_with_fresh_ids(tmp_path):
    """The same order retried in a new conversation, where the provider issued a new call id: placed once."""
    store = Store(tmp_path / "shop.db")
    for fresh_id in ("call_a81f", "call_93c2"):
        tools = store.tools(key=lambda call: f"order-7/{call.name}")
        await agent_loop("q", with_ids(from_decider(reserve("A", "ada")), fresh_id), tools, approve=yes)
    assert reservations(store) == [("ada", "A")]
    outcomes = [r["outcome"] for r in store.sql("SELECT outcome FROM audit WHERE tool = 'reserve' ORDER BY seq")]
    assert outcomes == ["applied", "replayed"]


def with_ids(model, call_id: str):
    """A model whose calls carry `call_id`, as a provider's fresh id for each new response."""

    async def fresh(messages, signal):
        decision = await model(messages)
        if decision["kind"] == "tools":
            decision["calls"] = [{**c, "id": call_id} for c in decision["calls"]]
        return decision

    return fresh


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
