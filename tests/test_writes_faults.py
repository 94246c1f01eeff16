"""Fault injection on a real SQLite file: a failure before the commit, SIGKILL mid-write, concurrent runs.

Every test ends with `store.problems() == []` (SQLite's integrity check, copies on hand + reserved = copies
owned, one recorded key per applied or rejected write) and counts how often each call id took effect.
The child processes import this module for the same model and options as the parent (`python -c`).
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import agentlab.loop as loop_module
import agentlab.store as store_module
from agentlab import DeadlineError, ToolError, agent_loop, agent_loop_sync
from agentlab.fakes import Scripted, call, calls, final
from agentlab.store import Store
from agentlab.trace import render_text

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL and fork-free child processes: POSIX only")

HERE = Path(__file__).resolve().parent
COPIES = 100


def books(copies: int = COPIES) -> list[dict]:
    return [{"id": "A", "title": "The Pragmatic Programmer", "author": "Hunt, Thomas", "year": 1999, "copies": copies}]


def writer(prefix: str, count: int, per_turn: int = 4) -> Scripted:
    """A model that reserves one copy of A per call, `per_turn` calls a turn, ids `{prefix}1` ... in order."""
    ids = [f"{prefix}{n}" for n in range(1, count + 1)]
    batches = [ids[i : i + per_turn] for i in range(0, count, per_turn)]
    return Scripted(
        *(
            calls(*(call("reserve", {"book": "A", "customer": f"cust-{i}", "quantity": 1}, i) for i in b))
            for b in batches
        ),
        final("done"),
    )


def stable(proposed) -> str:
    """The key: these tests play an application whose writes keep their ids across runs (like order numbers).

    A run retried after a crash, or a message delivered twice, is then the same writes: each must apply once.
    With the store's default key, scoped by run, a new run would be new writes (tests/test_store_keys.py).
    """
    return proposed.id


def options(count: int, per_turn: int = 4) -> dict:
    turns = -(-count // per_turn) + 1
    return {"max_turns": turns, "max_calls": count, "max_writes": count, "timeout_ms": 20_000}


def approve_all(proposed) -> bool:
    return True


def applied_ids(store: Store) -> list[str]:
    rows = store.sql("SELECT call_id FROM reservations WHERE call_id IS NOT NULL ORDER BY id")
    return [row["call_id"] for row in rows]


def effects_per_id(store: Store) -> dict[str, int]:
    rows = store.sql("SELECT call_id, COUNT(*) AS n FROM reservations WHERE call_id IS NOT NULL GROUP BY call_id")
    return {row["call_id"]: row["n"] for row in rows}


def outcomes(store: Store) -> dict[str, int]:
    return {r["outcome"]: r["n"] for r in store.sql("SELECT outcome, COUNT(*) AS n FROM audit GROUP BY outcome")}


def child(path: Path, *args: str) -> subprocess.Popen:
    """A fresh Python process running `child_main` of this module."""
    code = f"import sys; sys.path.insert(0, {str(HERE)!r}); import test_writes_faults as t; t.child_main(sys.argv[1:])"
    return subprocess.Popen(
        [sys.executable, "-c", code, str(path), *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def child_main(argv: list[str]) -> None:
    """In a child process: run the writer's loops (one thread each), pausing forever before commit `pause_at`."""
    path, pause_at, runs = argv[0], argv[1], json.loads(argv[2])

    def before_commit(proposed, signal) -> None:
        if proposed.id == pause_at:
            print("committing", proposed.id, flush=True)
            threading.Event().wait()  # until SIGKILL

    store = Store(path, before_commit=before_commit)
    print("ready", flush=True)
    sys.stdin.readline()  # "go": every child starts at once
    threads = [
        threading.Thread(
            target=agent_loop_sync,
            args=("q", writer(prefix, count), store.tools(key=stable)),
            kwargs=loop_kwargs(count),
        )
        for prefix, count in runs
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    print("done", flush=True)
    # Then wait for stdin to close: a test that kills this process at a random moment must find it alive even
    # if every write was done first (on a loaded machine the killer may wake late): it was flaky otherwise.
    sys.stdin.readline()


def loop_kwargs(count: int) -> dict:
    return {"approve": approve_all, **options(count)}


def read_line(process: subprocess.Popen) -> str:
    line = process.stdout.readline().strip()
    if not line:
        raise AssertionError(f"the child ended early: {process.stderr.read()}")
    return line


def kill(process: subprocess.Popen) -> None:
    os.kill(process.pid, signal.SIGKILL)
    process.wait(timeout=10)
    process.stdout.close()
    process.stderr.close()
    process.stdin.close()
    assert process.returncode == -signal.SIGKILL


async def replay(store: Store, prefix: str, count: int) -> None:
    await agent_loop("q", writer(prefix, count), store.tools(key=stable), **loop_kwargs(count))


# -- an exception between the effect and the commit ----------------------------------------


async def test_an_exception_between_the_effect_and_the_commit_leaves_nothing_applied(tmp_path) -> None:
    def disk_on_fire(proposed, signal) -> None:
        raise OSError("disk on fire")

    faulty = Store(tmp_path / "shop.db", books=books(), before_commit=disk_on_fire)
    with pytest.raises(ToolError, match="rolled back") as raised:
        await replay(faulty, "w", 3)
    assert "disk on fire" in str(raised.value)
    store = Store(faulty.path)
    assert applied_ids(store) == [] and store.sql("SELECT on_hand FROM books")[0]["on_hand"] == COPIES
    assert outcomes(store) == {"rolled back": 1} and store.problems() == []
    await replay(store, "w", 3)  # the retry, once the disk is fixed: each write once
    assert applied_ids(store) == ["w1", "w2", "w3"] and store.problems() == []


async def test_an_operation_that_fails_halfway_through_its_effect_leaves_nothing_applied(tmp_path, monkeypatch) -> None:
    reserve = store_module._OPERATIONS["reserve"]

    def half_then_fail(db, value, proposed):
        reserve(db, value, proposed)  # the copies are taken and the reservation is written...
        raise RuntimeError("crash before the key is recorded")  # ...and then this

    monkeypatch.setitem(store_module._OPERATIONS, "reserve", half_then_fail)
    store = Store(tmp_path / "shop.db", books=books())
    with pytest.raises(ToolError, match="rolled back"):
        await replay(store, "w", 1)
    assert applied_ids(store) == [] and store.sql("SELECT on_hand FROM books")[0]["on_hand"] == COPIES
    assert store.sql("SELECT COUNT(*) AS n FROM writes")[0]["n"] == 0 and store.problems() == []


async def test_a_write_that_outlives_the_grace_is_unknown_to_the_loop_and_settled_in_the_audit_log(
    tmp_path, monkeypatch
) -> None:
    monkeypatch.setattr(loop_module, "WRITE_GRACE_MS", 20)

    def deaf_disk(proposed, signal) -> None:
        time.sleep(0.3)  # ignores the stop

    store = Store(tmp_path / "shop.db", books=books(), before_commit=deaf_disk)
    with pytest.raises(DeadlineError) as raised:
        await agent_loop("q", writer("w", 1), store.tools(key=stable), **loop_kwargs(1) | {"timeout_ms": 20})
    assert json.loads(raised.value.history[-1]["content"])["outcome"] == "unknown"
    assert "? outcome unknown" in render_text(raised.value)
    await asyncio.sleep(0.5)  # the write ends on its own: it sees the stop before its commit
    assert outcomes(store) == {"rolled back": 1} and applied_ids(store) == [] and store.problems() == []


# -- SIGKILL in the middle of a write ---------------------------------------------------------


@pytest.mark.parametrize("killed", ["w3"])  # in the second batch, after two commits
async def test_a_process_killed_before_a_commit_leaves_the_last_commit_and_a_replay_applies_each_write_once(
    tmp_path, killed
) -> None:
    path = tmp_path / "shop.db"
    Store(path, books=books())
    process = child(path, killed, json.dumps([["w", 4]]))
    assert read_line(process) == "ready"
    process.stdin.write("go\n")
    process.stdin.flush()
    assert read_line(process) == f"committing {killed}"  # the effect is done, the commit is not
    kill(process)

    store = Store(path)
    number = int(killed[1:])
    assert store.problems() == []
    assert applied_ids(store) == [f"w{n}" for n in range(1, number)]  # everything before it, nothing of it
    await replay(store, "w", 4)
    assert effects_per_id(store) == {f"w{n}": 1 for n in range(1, 5)}
    assert outcomes(store).get("replayed", 0) == number - 1 and store.problems() == []


@pytest.mark.parametrize("seed", [1, 2])
async def test_a_process_killed_at_a_random_moment_leaves_a_consistent_database(tmp_path, seed) -> None:
    count = 60
    path = tmp_path / "shop.db"
    Store(path, books=books())
    process = child(path, "-", json.dumps([["w", count]]))
    assert read_line(process) == "ready"
    process.stdin.write("go\n")
    process.stdin.flush()
    threading.Event().wait(random.Random(seed).uniform(0.02, 0.12))
    kill(process)

    store = Store(path)
    assert store.problems() == []
    done = applied_ids(store)
    assert done == [f"w{n}" for n in range(1, len(done) + 1)]  # one at a time, in call order: a prefix
    await replay(store, "w", count)
    assert effects_per_id(store) == {f"w{n}": 1 for n in range(1, count + 1)}
    assert store.sql("SELECT on_hand FROM books")[0]["on_hand"] == COPIES - count and store.problems() == []


# -- concurrent runs ------------------------------------------------------------------------------


def test_concurrent_loops_in_threads_neither_lose_an_update_nor_apply_one_twice(tmp_path) -> None:
    copies = 25
    store = Store(tmp_path / "shop.db", books=books(copies))
    prefixes = ["dup-", "dup-", "t2-", "t3-"]  # two threads run the very same run: a duplicated message
    threads = [
        threading.Thread(
            target=agent_loop_sync, args=("q", writer(p, 10), store.tools(key=stable)), kwargs=loop_kwargs(10)
        )
        for p in prefixes
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert store.problems() == []
    per_id = effects_per_id(store)
    assert set(per_id.values()) == {1} and len(per_id) == copies  # 30 distinct writes for 25 copies
    assert store.sql("SELECT on_hand FROM books")[0]["on_hand"] == 0
    counts = outcomes(store)
    assert counts["applied"] == copies and counts["rejected"] == 30 - copies and counts["replayed"] == 10


def test_concurrent_loops_in_processes_neither_lose_an_update_nor_apply_one_twice(tmp_path) -> None:
    path = tmp_path / "shop.db"
    Store(path, books=books())
    plans = [[["dup-", 10], ["a-", 10]], [["dup-", 10], ["b-", 10]]]  # two processes, two loops (threads) each
    processes = [child(path, "-", json.dumps(plan)) for plan in plans]
    for process in processes:
        assert read_line(process) == "ready"
    for process in processes:
        process.stdin.write("go\n")
        process.stdin.flush()
    for process in processes:
        out, err = process.communicate(timeout=60)
        assert process.returncode == 0 and out.strip() == "done", err

    store = Store(path)
    assert store.problems() == []
    per_id = effects_per_id(store)
    assert set(per_id.values()) == {1} and len(per_id) == 30
    assert store.sql("SELECT on_hand FROM books")[0]["on_hand"] == COPIES - 30
    assert outcomes(store) == {"applied": 30, "replayed": 10}


def test_a_writer_that_holds_the_lock_too_long_makes_the_other_fail_clearly(tmp_path) -> None:
    path = tmp_path / "shop.db"
    Store(path, books=books())
    impatient = Store(path, busy_timeout_ms=50)
    with store_module.sqlite3.connect(path, isolation_level=None) as db:
        db.execute("BEGIN IMMEDIATE")  # another program holds the write lock
        with pytest.raises(ToolError, match="database is busy"):
            agent_loop_sync("q", writer("w", 1), impatient.tools(key=stable), **loop_kwargs(1))
        db.execute("ROLLBACK")
    db.close()
    assert applied_ids(impatient) == [] and impatient.problems() == []
