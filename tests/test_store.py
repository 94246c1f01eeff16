"""The bookshop store, rule by rule, on a real SQLite file: what the loop and the store enforce together.

Fault injection (an exception before the commit, SIGKILL, concurrent runs) is in test_writes_faults.py.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import threading
import time

import pytest

from agentlab import (
    AbortController,
    Approval,
    ApprovalError,
    ConfigError,
    DeadlineError,
    ToolArgsError,
    ToolCall,
    ToolError,
    UnknownToolError,
    WriteBudgetError,
    agent_loop,
)
from agentlab.lab.fakes import Scripted, call, calls, final
from agentlab.lab.trace import render_text
from agentlab.writes.approval import EXPIRED, UNANSWERED, WAITING, ApprovalDesk
from agentlab.writes.store import SAMPLE_BOOKS, Store, StoreError, WriteRolledBack

RESERVE = call("reserve", {"book": "A", "customer": "ada", "quantity": 2}, "w1")
CANCEL = call("cancel", {"reservation": 1}, "w2")


@pytest.fixture
def store(tmp_path) -> Store:
    return Store(tmp_path / "shop.db")


def on_hand(store: Store, book: str = "A") -> int:
    return store.sql("SELECT on_hand FROM books WHERE id = ?", book)[0]["on_hand"]


def snapshot(store: Store) -> tuple:
    """Everything but the audit log: what a write may change."""
    return tuple(store.sql(f"SELECT * FROM {table} ORDER BY 1") for table in ("books", "reservations", "writes"))


def audit(store: Store) -> list[tuple[str, str, str]]:
    return [(r["call_id"], r["tool"], r["outcome"]) for r in store.sql("SELECT * FROM audit ORDER BY seq")]


def yes(proposed: ToolCall) -> bool:
    return True


# -- the database ---------------------------------------------------------------------


def test_a_fresh_shop_has_the_sample_data_and_is_consistent(store) -> None:
    books = store.sql("SELECT id, copies, on_hand FROM books ORDER BY id")
    assert [b["id"] for b in books] == [b["id"] for b in SAMPLE_BOOKS]
    assert [(r["book"], r["quantity"]) for r in store.sql("SELECT * FROM reservations")] == [("B", 1), ("C", 2)]
    assert store.problems() == []
    assert store.sql("SELECT journal_mode FROM pragma_journal_mode")[0]["journal_mode"] == "wal"


def test_reopening_keeps_the_data_and_a_temporary_shop_is_removed_on_close(tmp_path) -> None:
    first = Store(tmp_path / "shop.db", books=[{"id": "X", "title": "t", "author": "a", "year": 2000, "copies": 9}])
    again = Store(first.path)  # the sample data is only for a new file
    assert [b["id"] for b in again.sql("SELECT id FROM books")] == ["X"]
    temporary = Store()
    assert temporary.path.exists() and "a temporary shop" in repr(temporary)
    temporary.close()
    assert not temporary.path.parent.exists() and first.path.exists()


def test_a_file_that_is_not_a_shop_or_a_missing_folder_is_refused_clearly(tmp_path) -> None:
    other = tmp_path / "other.db"
    with sqlite3.connect(other) as db:
        db.execute("CREATE TABLE notes (text TEXT)")
    db.close()
    with pytest.raises(StoreError, match="not an agentlab shop"):
        Store(other)
    (tmp_path / "text.db").write_text("hello, I am not a database" * 100)
    with pytest.raises(StoreError, match="cannot use"):
        Store(tmp_path / "text.db")
    with pytest.raises(ConfigError, match="folder does not exist"):
        Store(tmp_path / "nowhere" / "shop.db")
    with pytest.raises(ConfigError, match="does not fit"):
        Store(tmp_path / "bad.db", books=[{"id": "X"}])


def test_sql_only_reads(store) -> None:
    with pytest.raises(StoreError, match="only reads"):
        store.sql("DELETE FROM books")
    assert len(store.sql("SELECT * FROM books")) == len(SAMPLE_BOOKS)


# -- reads and args -------------------------------------------------------------------


async def test_the_read_tools_look_books_and_reservations_up(store) -> None:
    model = Scripted(
        calls(
            call("lookup", {"id": "B"}, "r1"),
            call("lookup", {"id": "Z"}, "r2"),
            call("reservation", {"reservation": 2}, "r3"),
            call("reservation", {"reservation": 9}, "r4"),
        ),
        final("ok"),
    )
    result = await agent_loop("q", model, store.tools())  # reads need no approval
    contents = [json.loads(m["content"]) for m in result.history if m["role"] == "tool"]
    assert contents[0]["on_hand"] == 0 and contents[0]["found"] is True
    assert contents[1] == {"id": "Z", "found": False}
    assert contents[2] == {"reservation": 2, "book": "C", "customer": "alan", "quantity": 2, "status": "active"}
    assert contents[3] == {"reservation": 9, "found": False}


@pytest.mark.parametrize(
    ("name", "args", "phrase"),
    [
        ("reserve", {"book": "A", "customer": "ada"}, "expected exactly the keys"),
        ("reserve", {"book": "A", "customer": "ada", "quantity": 0}, "quantity"),
        ("reserve", {"book": "A", "customer": "ada", "quantity": True}, "quantity"),
        ("reserve", {"book": "A", "customer": " ", "quantity": 1}, "customer"),
        ("update", {"reservation": "1", "quantity": 1}, "reservation"),
        ("cancel", {"reservation": 1, "why": "x"}, "expected exactly the keys"),
    ],
)
async def test_bad_args_are_refused_before_anything_runs_or_is_audited(store, name, args, phrase) -> None:
    before = snapshot(store)
    with pytest.raises(ToolArgsError, match=phrase):
        await agent_loop("q", Scripted(calls(call(name, args, "w1"))), store.tools(), approve=store.audited(yes))
    assert snapshot(store) == before and audit(store) == []


# -- approval -------------------------------------------------------------------------


async def test_a_write_without_a_policy_changes_nothing(store) -> None:
    before = snapshot(store)
    with pytest.raises(ApprovalError, match="approval required"):
        await agent_loop("q", Scripted(calls(RESERVE)), store.tools())
    assert snapshot(store) == before and audit(store) == []


async def test_an_approved_write_applies_and_both_the_approval_and_the_effect_are_audited(store) -> None:
    result = await agent_loop("q", Scripted(calls(RESERVE), final("ok")), store.tools(), approve=store.audited(yes))
    assert json.loads(result.history[-2]["content"]) == {
        "reservation": 3,
        "book": "A",
        "customer": "ada",
        "quantity": 2,
        "status": "active",
        "on_hand": 1,
    }
    assert on_hand(store) == 1 and result.usage.writes == 1
    assert audit(store) == [("run-1/w1", "reserve", "approved"), ("run-1/w1", "reserve", "applied")]
    assert store.problems() == []


@pytest.mark.parametrize("kind", ["sync", "async"])
async def test_a_denial_changes_nothing_is_audited_with_its_reason_and_reaches_the_model(store, kind) -> None:
    def deny(proposed):
        return Approval(False, "grace still wants it")

    async def deny_async(proposed, signal):
        return deny(proposed)

    before = snapshot(store)
    model = Scripted(calls(CANCEL), final("understood"))
    result = await agent_loop("q", model, store.tools(), approve=store.audited(deny if kind == "sync" else deny_async))
    assert json.loads(model.seen[1]["content"]) == {"denied": True, "reason": "grace still wants it"}
    assert "✗ denied: nothing ran" in render_text(result)
    assert snapshot(store) == before
    assert store.sql("SELECT outcome, detail FROM audit") == [{"outcome": "denied", "detail": "grace still wants it"}]


async def test_a_policy_answer_that_is_not_an_answer_is_not_audited_and_the_loop_refuses_it(store) -> None:
    with pytest.raises(ApprovalError, match="must answer"):
        await agent_loop("q", Scripted(calls(RESERVE)), store.tools(), approve=store.audited(lambda c: "yes"))
    assert audit(store) == [] and on_hand(store) == 3


# -- the shop's own rules, update and cancel ------------------------------------------------


async def test_update_and_cancel_move_copies_between_the_shelf_and_the_reservation(store) -> None:
    model = Scripted(
        calls(call("update", {"reservation": 2, "quantity": 4}, "w1")),
        calls(call("cancel", {"reservation": 2}, "w2")),
        final("ok"),
    )
    result = await agent_loop("q", model, store.tools(), approve=yes)
    updated, cancelled = (json.loads(m["content"]) for m in result.history if m["role"] == "tool")
    assert (updated["quantity"], updated["on_hand"]) == (4, 1)
    assert (cancelled["status"], cancelled["on_hand"]) == ("cancelled", 5)
    assert store.problems() == []


@pytest.mark.parametrize(
    ("proposed", "reason"),
    [
        (call("reserve", {"book": "B", "customer": "ada", "quantity": 1}, "w1"), "only 0 of book B on hand"),
        (call("reserve", {"book": "Z", "customer": "ada", "quantity": 1}, "w1"), "there is no book 'Z'"),
        (call("update", {"reservation": 2, "quantity": 6}, "w1"), "only 3 more of book C on hand"),
        (call("cancel", {"reservation": 7}, "w1"), "there is no reservation 7"),
    ],
)
async def test_a_write_the_shop_cannot_do_is_rejected_to_the_model_and_changes_nothing(store, proposed, reason) -> None:
    before = snapshot(store)[:2]
    model = Scripted(calls(proposed), final("ok"))
    await agent_loop("q", model, store.tools(), approve=yes)
    answer = json.loads(model.seen[1]["content"])
    assert answer["rejected"] is True and reason in answer["reason"]
    assert snapshot(store)[:2] == before
    assert audit(store) == [("run-1/w1", proposed["name"], "rejected")] and store.problems() == []


async def test_cancelling_twice_with_two_call_ids_cancels_once(store) -> None:
    model = Scripted(calls(CANCEL), calls(CANCEL | {"id": "w3"}), final("ok"))
    await agent_loop("q", model, store.tools(), approve=yes)
    assert json.loads(model.seen[2]["content"]) == {"rejected": True, "reason": "reservation 1 is cancelled"}
    assert on_hand(store, "B") == 1 and store.problems() == []


# -- idempotency: the key (the call id in its run, or the application's key) ---------------------------
# The default key is scoped by run (tests/test_store_keys.py): a retry across runs replays only with a key from
# the application. `by_call_id` plays an application whose writes keep their ids across runs.


def by_call_id(proposed: ToolCall) -> str:
    return proposed.id


@pytest.mark.parametrize(
    "proposed",
    [RESERVE, call("update", {"reservation": 2, "quantity": 3}, "w1"), call("cancel", {"reservation": 2}, "w1")],
)
async def test_replaying_a_key_returns_the_first_result_and_changes_nothing(store, proposed) -> None:
    tools = store.tools(key=by_call_id)
    first = await agent_loop("q", Scripted(calls(proposed), final("ok")), tools, approve=yes)
    after_first = snapshot(store)
    retried = await agent_loop("q", Scripted(calls(proposed), final("ok")), tools, approve=yes)  # a retry
    assert retried.history[-2] == first.history[-2]  # the very same text
    assert snapshot(store) == after_first
    assert [outcome for _, _, outcome in audit(store)] == ["applied", "replayed"]


async def test_the_same_key_with_other_args_is_refused_and_changes_nothing(store) -> None:
    tools = store.tools(key=by_call_id)
    await agent_loop("q", Scripted(calls(RESERVE), final("ok")), tools, approve=yes)
    before = snapshot(store)
    other = RESERVE | {"args": {"book": "A", "customer": "ada", "quantity": 1}}
    with pytest.raises(ToolError, match=r"idempotency key reused: key .w1. .* Your key function made it"):
        await agent_loop("q", Scripted(calls(other)), tools, approve=yes)
    assert snapshot(store) == before
    assert audit(store)[-1] == ("w1", "reserve", "conflict")


async def test_the_same_args_in_another_key_order_are_the_same_write(store) -> None:
    tools = store.tools(key=by_call_id)
    await agent_loop("q", Scripted(calls(RESERVE), final("ok")), tools, approve=yes)
    shuffled = RESERVE | {"args": {"quantity": 2, "customer": "ada", "book": "A"}}
    await agent_loop("q", Scripted(calls(shuffled), final("ok")), tools, approve=yes)
    assert on_hand(store) == 1 and audit(store)[-1][2] == "replayed"


# -- order, budget and time -----------------------------------------------------------------------


async def test_writes_of_a_batch_run_in_call_order_and_a_bad_batch_runs_none(store) -> None:
    batch = calls(*(call("reserve", {"book": "E", "customer": c, "quantity": 1}, f"w{n}") for n, c in enumerate("xyz")))
    await agent_loop("q", Scripted(batch, final("ok")), store.tools(), approve=yes)
    assert [r["customer"] for r in store.sql("SELECT customer FROM reservations WHERE book = 'E' ORDER BY id")] == [
        "x",
        "y",
        "z",
    ]
    before = snapshot(store)
    bad = calls(call("reserve", {"book": "E", "customer": "q", "quantity": 1}, "w9"), call("nope", {}, "n1"))
    with pytest.raises(UnknownToolError):
        await agent_loop("q", Scripted(bad), store.tools(), approve=yes)
    too_many = calls(*(call("cancel", {"reservation": n}, f"c{n}") for n in (1, 2, 3)))
    with pytest.raises(WriteBudgetError, match="write budget"):
        await agent_loop("q", Scripted(too_many), store.tools(), approve=yes, max_writes=2)
    assert snapshot(store) == before


async def test_a_write_stopped_by_the_deadline_before_its_commit_rolls_back_and_says_so(tmp_path) -> None:
    def slow_disk(proposed, signal):
        signal.wait_sync(10.0)  # a slow commit, cut short by the stop

    store = Store(tmp_path / "shop.db", before_commit=slow_disk)
    before = snapshot(store)
    started = time.perf_counter()
    with pytest.raises(DeadlineError) as raised:
        # time enough to reach the commit on a loaded machine: the deadline must strike during it
        await agent_loop("q", Scripted(calls(RESERVE)), store.tools(), approve=yes, timeout_ms=1000)
    assert time.perf_counter() - started < 5.0  # not the disk's 10 s
    outcome = json.loads(raised.value.history[-1]["content"])
    assert outcome["rolled_back"] is True and "before its commit" in outcome["error"]
    trace = render_text(raised.value)
    assert "→ w1: ↺ rolled back: nothing of it was applied" in trace and "stopped in turn 1, during call w1" in trace
    assert snapshot(store) == before
    assert audit(store) == [("run-1/w1", "reserve", "rolled back")] and store.problems() == []


def test_a_write_whose_run_is_already_stopped_does_not_start(store) -> None:
    controller = AbortController()
    controller.abort("stop")
    run = store.tools()["reserve"].run
    with pytest.raises(WriteRolledBack, match="before it started"):
        run({"book": "A", "customer": "ada", "quantity": 1}, controller.signal, ToolCall("w1", "reserve", {}))
    assert on_hand(store) == 3 and audit(store) == [("run-1/w1", "reserve", "rolled back")]


# -- preview and the approval desk --------------------------------------------------------------


def test_a_preview_shows_the_rows_before_and_after_and_changes_nothing(store) -> None:
    before = snapshot(store)
    change = store.preview(ToolCall("w1", "reserve", RESERVE["args"]))
    books, new = change.rows
    assert (books.table, books.key, books.changed) == ("books", "A", ["on_hand"])
    assert (books.before["on_hand"], books.after["on_hand"]) == (3, 1)
    assert new.before is None and new.after["customer"] == "ada"
    assert change.result["reservation"] == 3 and not change.replay
    assert "books A.on_hand: 3 → 1" in str(change) and "<table " in change._repr_html_()
    assert snapshot(store) == before and audit(store) == []
    with pytest.raises(StoreError, match="not one of the shop's write tools"):
        store.preview(ToolCall("r1", "lookup", {"id": "A"}))


async def test_a_preview_of_a_replay_says_it_changes_nothing(store) -> None:
    first = await agent_loop("q", Scripted(calls(RESERVE), final("ok")), store.tools(key=by_call_id), approve=yes)
    change = store.preview(ToolCall("w1", "reserve", RESERVE["args"]), key=by_call_id)
    assert (
        change.replay
        and change.key == "w1"
        and change.rows == ()
        and json.dumps(change.result, separators=(",", ":")) == (first.history[-2]["content"])
    )
    assert not store.preview(ToolCall("w1", "reserve", RESERVE["args"])).replay  # no run has written: never


async def test_a_scripted_desk_presses_its_buttons_in_order_and_the_audit_log_agrees(store) -> None:
    desk = ApprovalDesk(store, script=[True, Approval(False, "grace still wants it")])
    model = Scripted(calls(RESERVE, CANCEL), final("ok"))
    await agent_loop("q", model, store.tools(), approve=store.audited(desk))
    assert [card.verdict for card in desk.cards] == ["✓ approved", "✗ denied: grace still wants it"]
    assert all(card.approve.disabled and card.deny.disabled for card in desk.cards)
    bundle = desk._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle
    assert "✗ denied: grace still wants it" in bundle["text/plain"]
    assert ">before</th>" in bundle["text/html"] and "(no row)" in bundle["text/html"]
    assert [outcome for _, _, outcome in audit(store)] == ["approved", "applied", "denied"]


async def test_a_desk_whose_script_runs_out_stops_the_run(store) -> None:
    with pytest.raises(ApprovalError, match="run out of answers"):
        await agent_loop(
            "q", Scripted(calls(RESERVE, CANCEL)), store.tools(), approve=ApprovalDesk(store, script=[1 > 0])
        )
    with pytest.raises(ConfigError, match="True, False or Approval"):
        ApprovalDesk(store, script=["yes"])


async def test_nobody_at_the_desk_cannot_hold_the_run(store) -> None:
    desk = ApprovalDesk(store)
    with pytest.raises(DeadlineError):
        await agent_loop("q", Scripted(calls(RESERVE)), store.tools(), approve=desk, timeout_ms=60)
    await asyncio.sleep(0.05)
    assert desk.cards[0].verdict == EXPIRED and on_hand(store) == 3


def test_a_person_answers_a_started_run_with_the_buttons(store) -> None:
    desk = ApprovalDesk(store)
    model = Scripted(calls(RESERVE, CANCEL), calls(call("lookup", {"id": "A"}, "r1")), final("done"))
    done = desk.start("q", model, store.tools(), timeout_ms=5000)
    assert not done.done() and [card.verdict for card in desk.cards] == ["… waiting for Approve or Deny"]
    desk.cards[0].approve.click()  # what the kernel does when a person clicks

    def deny_second() -> None:
        while len(desk.cards) < 2:
            time.sleep(0.005)
        desk.cards[1].reason.value = "not today"
        desk.cards[1].deny.click()

    threading.Thread(target=deny_second).start()
    outcome = done.result(timeout=5)
    assert outcome.text == "done" and desk.outcome is outcome
    assert on_hand(store) == 1 and on_hand(store, "B") == 0
    assert [outcome for _, _, outcome in audit(store)] == ["approved", "applied", "denied"]
    assert "answered" in desk._repr_mimebundle_()["text/html"]


def test_a_saved_desk_that_was_waiting_says_it_is_a_snapshot_not_waiting(tmp_path) -> None:
    store = Store(tmp_path / "shop.db")
    desk = ApprovalDesk(store)
    model = Scripted(calls(call("reserve", {"book": "A", "customer": "ada", "quantity": 1}, id="w1")), final("done"))
    done = desk.start("q", model, store.tools(), timeout_ms=5000)
    saved = desk._repr_mimebundle_()
    assert [card.verdict for card in desk.cards] == [WAITING]  # live: the card still waits for a click
    for shown in (saved["text/html"], saved["text/plain"]):
        assert UNANSWERED in shown and WAITING not in shown and "in progress" not in shown
    desk.cards[0].approve.click()
    assert done.result(timeout=5).text == "done"
    after = desk._repr_mimebundle_()
    assert "✓ approved" in after["text/plain"] and UNANSWERED not in after["text/html"]
