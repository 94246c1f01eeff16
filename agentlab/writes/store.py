"""A real database for tools that write: a small bookshop in SQLite.

    store = Store()                      # a fresh shop in a temporary folder
    store = Store("shop.db")             # or at a path you choose (created on first use)
    result = await agent_loop(question, model, store.tools(), approve=store.audited(policy))

The shop has books (`copies` it owns, `on_hand` not yet reserved) and
reservations. Two tools read (`lookup` a book, look a `reservation` up) and
three write (`reserve`, `update`, `cancel`). Every write keeps four promises,
each kept here, in `Store._write`, with the database's own transactions:

* Idempotent. Each write has an idempotency key: by default its call id
  scoped by its run, `run-<n>/<call id>`, where n is the number the store
  handed the run (table `runs`) the first time it saw it; or the key that
  `tools(key=...)` makes from the call, as it is. The effect, the record of
  the key (table `writes`) and the audit row commit in ONE transaction, so a
  key is recorded exactly when its effect is. Replaying a key (the same call
  retried in its run) returns the first result and changes nothing; the same
  key with other args is refused. A call id is unique only within its run:
  `from_decider` numbers calls call_1, call_2, ... in every run, and a
  provider issues fresh ids in every response. Scoped by run, ids of
  unrelated runs never collide; but a run retried from the start is a new
  run, and writes again. A key that must survive a restart comes from the
  application, not the model: `tools(key=...)`.
* Whole or nothing, in this database. The write's rows (the effect, its key,
  its audit row and its outbox message, if any) commit together or not at
  all. The write checks the run's signal before it starts and again just
  before it commits; if the run was stopped, or anything raises between the
  effect and the commit, the transaction rolls back and the tool raises, so
  the loop's history says "rolled_back". A process killed mid-write leaves
  the last committed state: SQLite's journal sees to that.
  That is all a transaction can promise. An effect outside the database (a
  card charged, an e-mail sent, a request to another service) is not in it,
  and a rollback does not undo it: made inside the transaction (in
  `before_commit`), it stands while the audit says "rolled back". Such an
  effect goes through the outbox instead: `Store(outbox=...)` writes the
  message to send in the write's own transaction, and `send_outbox(send)`
  sends it after the commit, with the write's idempotency key, which the
  outside service uses to do it once however often it is sent. A rollback
  leaves nothing to send. `problems(charged=...)` finds a charge that no
  applied write accounts for (notebook 09d).
* Audited. Table `audit` gets a row for every attempt: applied, rejected (the
  shop's own rules said no: not enough copies), replayed, conflict, rolled
  back; and, through `Store.audited(policy)`, approved and denied.
* Safe side by side. Every operation opens its own connection and takes the
  write lock up front (`BEGIN IMMEDIATE`), waiting up to `busy_timeout_ms` for
  it, so threads and processes sharing the file neither lose an update nor
  apply one twice. The file is in WAL mode: readers never wait for a writer.

Durability: WAL with `synchronous = NORMAL`, SQLite's advice for WAL. A commit
survives the crash of its process, SIGKILL included; a power cut may lose the
last few commits (whole: never half of one), and replaying their keys then
applies them, once.

Standard library only; `agentlab` does not import this module.
"""

from __future__ import annotations

import contextlib
import datetime
import html
import json
import shutil
import sqlite3
import tempfile
import threading
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentlab.abort import AbortSignal
from agentlab.callees import Callee, in_worker_thread
from agentlab.errors import AgentError, ConfigError
from agentlab.tools import Approval, Tool, ToolCall, parse_lookup_args

SCHEMA_VERSION = 3  # 2 added table runs, 3 table outbox; an older file gets them when it is opened
MAX_QUANTITY = 10  # copies one reservation may hold: a shop's rule, checked before anything runs

SAMPLE_BOOKS: tuple[dict[str, Any], ...] = (
    {"id": "A", "title": "The Pragmatic Programmer", "author": "Andrew Hunt, David Thomas", "year": 1999, "copies": 3},
    {
        "id": "B",
        "title": "Structure and Interpretation of Computer Programs",
        "author": "Harold Abelson, Gerald Jay Sussman",
        "year": 1985,
        "copies": 1,
    },
    {
        "id": "C",
        "title": "Designing Data-Intensive Applications",
        "author": "Martin Kleppmann",
        "year": 2017,
        "copies": 5,
    },
    {"id": "D", "title": "The Mythical Man-Month", "author": "Frederick P. Brooks Jr.", "year": 1975, "copies": 2},
    {"id": "E", "title": "Release It!", "author": "Michael T. Nygard", "year": 2007, "copies": 4},
)
# Made at the counter before the agent arrived: they have no call id.
SAMPLE_RESERVATIONS: tuple[dict[str, Any], ...] = (
    {"book": "B", "customer": "grace", "quantity": 1},
    {"book": "C", "customer": "alan", "quantity": 2},
)

# A number for each run the store sees, handed out once (AUTOINCREMENT never reuses one): the default key's scope.
_RUNS_TABLE = """
CREATE TABLE IF NOT EXISTS runs (
    n        INTEGER PRIMARY KEY AUTOINCREMENT,
    at       TEXT NOT NULL
);
"""

# The messages for services outside the database, one per write at most: written in the write's transaction,
# sent after its commit (`Store.send_outbox`), under the write's idempotency key.
_OUTBOX_TABLE = """
CREATE TABLE IF NOT EXISTS outbox (
    seq      INTEGER PRIMARY KEY,
    key      TEXT NOT NULL UNIQUE,  -- the write's idempotency key, passed on to the service with the message
    message  TEXT NOT NULL,         -- JSON: what to send
    sent     TEXT,                  -- when the service took it (NULL: still to send)
    tries    INTEGER NOT NULL DEFAULT 0,
    error    TEXT NOT NULL DEFAULT ''  -- what the last failed try said
);
"""

OUTCOMES = ("approved", "denied", "applied", "rejected", "replayed", "conflict", "rolled back")

_SCHEMA = (
    f"""
CREATE TABLE books (
    id       TEXT PRIMARY KEY,
    title    TEXT NOT NULL,
    author   TEXT NOT NULL,
    year     INTEGER NOT NULL,
    copies   INTEGER NOT NULL CHECK (copies >= 0),
    on_hand  INTEGER NOT NULL CHECK (on_hand BETWEEN 0 AND copies)
);
CREATE TABLE reservations (
    id        INTEGER PRIMARY KEY,
    book      TEXT NOT NULL REFERENCES books(id),
    customer  TEXT NOT NULL,
    quantity  INTEGER NOT NULL CHECK (quantity BETWEEN 1 AND {MAX_QUANTITY}),
    status    TEXT NOT NULL CHECK (status IN ('active', 'cancelled')),
    call_id   TEXT UNIQUE  -- the idempotency key of the write that made it (NULL: made at the counter)
);
-- One row per idempotency key (run-<n>/<call id>, or the application's key): written with the effect.
CREATE TABLE writes (
    call_id  TEXT PRIMARY KEY,
    tool     TEXT NOT NULL,
    args     TEXT NOT NULL,
    result   TEXT NOT NULL
);
CREATE TABLE audit (
    seq      INTEGER PRIMARY KEY,
    at       TEXT NOT NULL,
    call_id  TEXT NOT NULL,  -- the idempotency key, as in table writes
    tool     TEXT NOT NULL,
    args     TEXT NOT NULL,
    outcome  TEXT NOT NULL CHECK (outcome IN ({", ".join(f"'{o}'" for o in OUTCOMES)})),
    detail   TEXT NOT NULL
);
"""
    + _RUNS_TABLE
    + _OUTBOX_TABLE
)


class StoreError(AgentError):
    """The store refused: not a shop database, a reused idempotency key, or a failed write."""


class WriteRolledBack(StoreError):
    """A write was stopped before its commit and rolled back: nothing of it was applied.

    `rolled_back = True` is how a tool tells the loop so; the loop records a rollback only on its word.
    """

    rolled_back = True


# -- what a proposed write would change -----------------------------------------


@dataclass(frozen=True)
class RowChange:
    """One row a write touches: its values before and after (None: the row does not exist)."""

    table: str
    key: Any
    before: dict[str, Any] | None
    after: dict[str, Any] | None

    @property
    def changed(self) -> list[str]:
        """The columns whose value differs (every column, for a new row)."""
        columns = list((self.after or self.before or {}).keys())
        return [c for c in columns if (self.before or {}).get(c) != (self.after or {}).get(c)]


@dataclass(frozen=True)
class Change:
    """What a proposed write would do, worked out on the real data and rolled back.

    `rows` are the rows it touches, before and after; `result` is what the tool
    would return; `key` is the write's idempotency key (None: a default key,
    previewed outside a run); `replay` says the key was already used, so the
    write would return its first result and change nothing.
    """

    call: ToolCall
    rows: tuple[RowChange, ...]
    result: dict[str, Any]
    replay: bool = False
    key: str | None = None

    def __str__(self) -> str:
        key = "" if self.key is None else f", key {self.key!r}"
        lines = [f"{self.call.name} {json.dumps(self.call.args)} (call {self.call.id!r}{key})"]
        if self.replay:
            lines.append("  a replay: this key already ran; it returns its first result and changes nothing")
        for row in self.rows:
            if not row.changed:
                lines.append(f"  {row.table} {row.key}: unchanged")
            for column in row.changed:
                before = "—" if row.before is None else json.dumps(row.before.get(column))
                after = "—" if row.after is None else json.dumps(row.after.get(column))
                lines.append(f"  {row.table} {row.key}.{column}: {before} → {after}")
        lines.append(f"  result: {json.dumps(self.result)}")
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        from agentlab.writes.change_view import change_html  # imported only when a notebook shows a Change

        return change_html(self)


class Table(list):
    """Rows from `Store.sql`: a list of dicts that shows itself as a table."""

    def __str__(self) -> str:
        if not self:
            return "(no rows)"
        columns = list(self[0])
        cells = [[_cell(row[c]) for c in columns] for row in self]
        widths = [max(len(c), *(len(r[i]) for r in cells)) for i, c in enumerate(columns)]
        lines = ["  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True)).rstrip()]
        lines += ["  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip() for r in cells]
        return "\n".join(lines)

    def __repr__(self) -> str:
        return str(self)

    def _repr_html_(self) -> str:
        if not self:
            return "<p><i>(no rows)</i></p>"
        columns = list(self[0])
        head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
        body = "".join(
            "<tr>" + "".join(f"<td>{html.escape(_cell(row[c]))}</td>" for c in columns) + "</tr>" for row in self
        )
        return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _cell(value: Any) -> str:
    return "NULL" if value is None else str(value)


# -- the store ---------------------------------------------------------------------

# The number of each run a store has seen, by the run's signal (the loop gives every run its own, and hands it
# to every tool) and the database file, so that two Store objects on one file agree. Weak: a run's entry goes
# with its signal. The numbers come from the file's table `runs`, so other processes never get the same one.
_RUNS: weakref.WeakKeyDictionary[AbortSignal, dict[Path, int]] = weakref.WeakKeyDictionary()
_RUNS_LOCK = threading.Lock()  # thread-safe: writes run in worker threads

Effect = tuple[dict[str, Any], list[tuple[str, Any]]]  # the result, and the (table, key) rows touched


class Store:
    """A bookshop in an SQLite file, with read and write tools for `agent_loop`.

    `path`: the database file, created with the sample data if it does not
    exist yet (its folder must exist); None makes a fresh temporary folder,
    removed by `close()`. `books` and `reservations` replace the sample data
    of a new file (`reservations` defaults to the sample ones with the sample
    books, and to none with books of your own). `busy_timeout_ms` is how long an operation waits for another
    writer's lock before it fails.

    `before_commit(call, signal)` is a local step only. It is called inside each write's transaction
    (`call.id` is the write's idempotency key), after the effect and just before the commit: a seam for a check
    or local bookkeeping, and for fault injection (raise to simulate a crash, wait to simulate a slow disk).
    Whatever it does to this database rolls back with the write; nothing else does. An effect outside the
    database made there (a card charged, a message sent, a request to another service) is NOT undone by a
    rollback: the write rolls back, the audit says "rolled back", and the effect stands.

    `outbox(call, result)` is how a write reaches outside the database: called inside the transaction of each
    write that applied, it returns the message for the outside service (a dict of JSON values), or None for
    none. The message is written to table `outbox` under the write's idempotency key, in the write's own
    transaction: it exists exactly when the write committed. `send_outbox(send)` sends it, after the commit.
    """

    def __init__(
        self,
        path: str | Path | None = None,
        *,
        books: Sequence[Mapping[str, Any]] = SAMPLE_BOOKS,
        reservations: Sequence[Mapping[str, Any]] | None = None,
        before_commit: Callable[[ToolCall, AbortSignal], Any] | None = None,
        outbox: Callable[[ToolCall, dict[str, Any]], Mapping[str, Any] | None] | None = None,
        busy_timeout_ms: float = 5000,
    ) -> None:
        if before_commit is not None and not callable(before_commit):
            raise ConfigError("before_commit must be a function before_commit(call, signal), or None")
        if outbox is not None and not callable(outbox):
            raise ConfigError("outbox must be a function outbox(call, result) -> message or None, or None")
        if isinstance(busy_timeout_ms, bool) or not isinstance(busy_timeout_ms, (int, float)) or busy_timeout_ms < 0:
            raise ConfigError(f"busy_timeout_ms must be a number of milliseconds >= 0, got {busy_timeout_ms!r}")
        self._folder: Path | None = None
        if path is None:
            self._folder = Path(tempfile.mkdtemp(prefix="agentlab-shop-"))
            path = self._folder / "shop.db"
        self.path = Path(path)
        self._file = self.path.resolve()  # which file, however it was named: the key of its run numbers
        if not self.path.parent.is_dir():
            raise ConfigError(f"cannot create the shop database {str(self.path)!r}: its folder does not exist")
        self.before_commit = before_commit
        self.outbox = outbox
        self.busy_timeout_s = busy_timeout_ms / 1000
        if reservations is None:
            reservations = SAMPLE_RESERVATIONS if books is SAMPLE_BOOKS else ()
        try:
            self._create(books, reservations)
            # Held open (never used) so that the write-ahead log outlives each operation's connection:
            # otherwise the close of each one would checkpoint and delete it, and every write would pay for that.
            keeper = sqlite3.connect(self.path, check_same_thread=False)
            keeper.execute("SELECT COUNT(*) FROM books").fetchone()
        except BaseException:
            _release(None, self._folder)
            raise
        self._release = weakref.finalize(self, _release, keeper, self._folder)

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    def close(self) -> None:
        """Let go of the file; a temporary shop's folder is removed, a file at your path is kept."""
        self._release()

    def __repr__(self) -> str:
        return f"Store({'a temporary shop' if self._folder else str(self.path)!r})"

    # -- tools ---------------------------------------------------------------

    def tools(self, *, key: Callable[[ToolCall], str] | None = None) -> dict[str, Tool]:
        """The shop's tools for `agent_loop`: two that read, three that write (and need approval).

        Each write has an idempotency key. By default it is the call id scoped by its run,
        `run-<n>/<call id>`: the store numbers each run (each `agent_loop` call) the first time it sees it,
        from the database, so runs never collide, even in other processes on the same file. A call id is
        unique only within its run (`from_decider` numbers calls call_1, call_2, ... in every run, a provider
        issues fresh ids in every response), so the default key replays a retry only within its run: the
        same request in a new run, even a retry of a failed one, is a new write.

        `key(call)` makes the key instead, and is used as it is, unscoped. It is THE way to make a key that
        survives a restart: the same order, retried in a new conversation, must not be placed twice, and
        only the application knows it is the same order; the model's ids cannot tell. For instance
        `key=lambda call: f"order-{order.id}/{call.name}"`. Give the same function to `preview`, `audited`
        and `ApprovalDesk`, so that they look up the key the write will use.
        """
        _check_key(key)
        return {
            "lookup": Tool(
                parse_lookup_args,
                self._lookup,
                description="Look a book up by id: title, copies on hand.",
                parameters=_schema(id=_BOOK),
            ),
            "reservation": Tool(
                _check_reservation,
                self._reservation,
                description="Look a reservation up by number.",
                parameters=_schema(reservation=_NUMBER),
            ),
            "reserve": Tool(
                _check_reserve,
                self._tool_runner("reserve", key),
                writes=True,
                description=f"Reserve 1-{MAX_QUANTITY} copies of a book for a customer.",
                parameters=_schema(book=_BOOK, customer=_CUSTOMER, quantity=_QUANTITY),
            ),
            "update": Tool(
                _check_update,
                self._tool_runner("update", key),
                writes=True,
                description="Change how many copies a reservation holds.",
                parameters=_schema(reservation=_NUMBER, quantity=_QUANTITY),
            ),
            "cancel": Tool(
                _check_reservation,
                self._tool_runner("cancel", key),
                writes=True,
                description="Cancel a reservation; its copies go back on hand.",
                parameters=_schema(reservation=_NUMBER),
            ),
        }

    def _lookup(self, value: dict[str, str]) -> dict[str, Any]:
        with self._connect() as db:
            row = db.execute(
                "SELECT id, title, author, year, on_hand FROM books WHERE id = ?", (value["id"],)
            ).fetchone()
        return dict(row, found=True) if row else {"id": value["id"], "found": False}

    def _reservation(self, value: dict[str, int]) -> dict[str, Any]:
        with self._connect() as db:
            row = _reservation_row(db, value["reservation"])
        return _reservation_result(row) if row else {"reservation": value["reservation"], "found": False}

    def _tool_runner(
        self, name: str, key: Callable[[ToolCall], str] | None
    ) -> Callable[[Any, AbortSignal, ToolCall], dict[str, Any]]:
        def run(value: Any, signal: AbortSignal, call: ToolCall) -> dict[str, Any]:
            made = self._key(call, signal, key)
            return self._write(name, value, signal, ToolCall(made, call.name, call.args), call.id, key is not None)

        run.__name__ = run.__qualname__ = name
        run.store_key = key  # type: ignore[attr-defined]  # so that ApprovalDesk.start can check it previews alike
        return run

    # -- idempotency keys --------------------------------------------------------

    def _key(self, call: ToolCall, signal: AbortSignal | None, key: Callable[[ToolCall], str] | None) -> str | None:
        """The write's idempotency key: the application's `key(call)` as it is, else `run-<n>/<call id>`.

        None only for a default key without a run (a preview without a signal): it can never replay.
        """
        if key is not None:
            made = key(call)
            if not isinstance(made, str) or not made:
                raise StoreError(
                    f"the key function made {made!r} for call {call.id!r}; it must make a non-empty string, "
                    f"the same one for the same write"
                )
            return made
        if signal is None:
            return None
        if not isinstance(signal, AbortSignal):
            raise ConfigError(f"a write's signal must be its run's AbortSignal, not {type(signal).__name__}")
        return f"run-{self._run_number(signal)}/{call.id}"

    def _run_number(self, signal: AbortSignal) -> int:
        """The number of the run whose signal this is, handed out by the database the first time it is asked."""
        with _RUNS_LOCK:  # taken before the database's lock, never while holding it: no deadlock
            numbers = _RUNS.setdefault(signal, {})
            if self._file not in numbers:
                at = _now()
                with self._connect() as db:
                    _begin(db)
                    numbers[self._file] = db.execute("INSERT INTO runs (at) VALUES (?)", (at,)).lastrowid
                    db.execute("COMMIT")
            return numbers[self._file]

    # -- the write: idempotent, whole or nothing in the database, audited --------

    def _write(
        self, tool: str, value: Any, signal: AbortSignal, call: ToolCall, asked: str, own_key: bool
    ) -> dict[str, Any]:
        """Run one write in one transaction: replay, or effect + key + audit row, then commit.

        `call.id` is the write's idempotency key; `asked` the call id the model gave; `own_key` says the
        application made the key.
        """
        args = _canonical(value)
        with self._connect() as db:
            _begin(db)
            try:
                first = db.execute("SELECT tool, args, result FROM writes WHERE call_id = ?", (call.id,)).fetchone()
                if first is not None:
                    return self._replay(db, tool, args, call, first, asked, own_key)
                _throw_if_stopped(signal, tool, call, "before it started")
                result, _ = _OPERATIONS[tool](db, value, call)
                outcome = "rejected" if result.get("rejected") else "applied"
                db.execute("INSERT INTO writes VALUES (?, ?, ?, ?)", (call.id, tool, args, _as_sent(result)))
                _audit(db, call.id, tool, args, outcome, result.get("reason", ""))
                if self.outbox is not None and outcome == "applied":
                    _queue(db, self.outbox, call, result)
                if self.before_commit is not None:  # a local step: an effect outside is not undone by a rollback
                    self.before_commit(call, signal)
                _throw_if_stopped(signal, tool, call, "before its commit")
                db.execute("COMMIT")
                return result
            except BaseException as error:
                if not db.in_transaction:
                    raise
                db.execute("ROLLBACK")
                self._record_rollback(call.id, tool, args, error)
                if isinstance(error, (StoreError, KeyboardInterrupt, SystemExit)):
                    raise
                raise WriteRolledBack(
                    f"rolled back: {tool} (key {call.id!r}) failed before its commit ({_describe(error)}); "
                    f"nothing of it was applied"
                ) from error

    def _replay(
        self, db: sqlite3.Connection, tool: str, args: str, call: ToolCall, first: sqlite3.Row, asked: str, own: bool
    ) -> Any:
        """A key that already ran: its first result if it is the same write, else a refusal."""
        if (first["tool"], first["args"]) != (tool, args):
            detail = f"the key was first used by {first['tool']} {first['args']}"
            _audit(db, call.id, tool, args, "conflict", detail)
            db.execute("COMMIT")
            change = (
                f"Your key function made it for call {asked!r}: make it give each write of the application its "
                f"own key (the same key only to a retry of the same write)"
                if own
                else f"The default key is the call id in its run, and call {asked!r} ran before in this run: a "
                f"retry must repeat the same call, and a new write needs a new call id"
            )
            raise StoreError(
                f"idempotency key reused: key {call.id!r} already ran as {first['tool']} {first['args']}, "
                f"not {tool} {args}; nothing was changed. {change}"
            )
        _audit(db, call.id, tool, args, "replayed", "returned the first result; nothing changed")
        db.execute("COMMIT")
        return json.loads(first["result"])

    def _record_rollback(self, call_id: str, tool: str, args: str, error: BaseException) -> None:
        """The audit row of a rolled-back write, in a transaction of its own (the write's is gone)."""
        with contextlib.suppress(sqlite3.Error, StoreError), self._connect() as db:  # a broken file cannot take it
            _begin(db)
            _audit(db, call_id, tool, args, "rolled back", _describe(error))
            db.execute("COMMIT")

    # -- approval, preview, queries --------------------------------------------

    def audited(
        self, policy: Callable[..., Any], *, key: Callable[[ToolCall], str] | None = None
    ) -> Callable[[ToolCall, AbortSignal], Any]:
        """Wrap an approve policy so that each of its answers is recorded in the audit log.

        The policy may be sync or async and take `(call)` or `(call, signal)`,
        like any policy of `agent_loop`; its answer is passed on unchanged. The
        audit row names the write's idempotency key: pass the `key` function
        given to `tools(key=...)`, if any.
        """
        if not callable(policy):
            raise ConfigError("audited(policy) needs an approve policy: a function policy(call, signal)")
        _check_key(key)
        ask = Callee(policy, 2, "approval")

        async def audited_policy(call: ToolCall, signal: AbortSignal) -> Any:
            answer = await ask(call, signal)
            if isinstance(answer, (bool, Approval)):
                approval = answer if isinstance(answer, Approval) else Approval(answer)
                await in_worker_thread(self._record_decision, (call, signal, key, approval), "audit")
            return answer

        return audited_policy

    def _record_decision(
        self, call: ToolCall, signal: AbortSignal, key: Callable[[ToolCall], str] | None, approval: Approval
    ) -> None:
        outcome = "approved" if approval.allowed else "denied"
        made = self._key(call, signal, key)
        with self._connect() as db:
            _begin(db)
            _audit(db, made or call.id, call.name, _canonical(call.args), outcome, approval.reason)
            db.execute("COMMIT")

    def preview(
        self, call: ToolCall, signal: AbortSignal | None = None, *, key: Callable[[ToolCall], str] | None = None
    ) -> Change:
        """What `call` would change, worked out on the real data in a transaction that is then rolled back.

        The write's key is the one its tool would use: `key(call)` if given (the function given to
        `tools(key=...)`), else `run-<n>/<call id>` for the run whose `signal` this is. The change is a
        replay exactly when the write would be one. Without `signal` or `key` the call belongs to no run,
        so it is never a replay.
        """
        _check_key(key)
        tool = self.tools().get(call.name)
        if tool is None or not tool.writes:
            raise StoreError(f"cannot preview {call.name!r}: it is not one of the shop's write tools")
        try:
            value = tool.validate(call.args)
        except ValueError as error:
            raise StoreError(f"cannot preview {call.name} (call {call.id!r}): invalid args: {error}") from error
        made = self._key(call, signal, key)
        with self._connect() as db:
            _begin(db)
            try:
                first = db.execute("SELECT result FROM writes WHERE call_id = ?", (made,)).fetchone()
                if first is not None:
                    return Change(call, (), json.loads(first["result"]), replay=True, key=made)
                db.execute("SAVEPOINT proposal")
                # The reservation's key column is unique: a default key outside a run gets one no run can have.
                proposed = ToolCall(made or f"run-?/{call.id}", call.name, call.args)
                result, touched = _OPERATIONS[call.name](db, value, proposed)
                after = [_read_row(db, table, key) for table, key in touched]
                db.execute("ROLLBACK TO proposal")
                before = [_read_row(db, table, key) for table, key in touched]
            finally:
                db.execute("ROLLBACK")
        rows = tuple(RowChange(t, k, b, a) for (t, k), b, a in zip(touched, before, after, strict=True))
        return Change(call, rows, result, key=made)

    def sql(self, query: str, *params: Any) -> Table:
        """Run a read-only SQL query on the shop; the rows come back as a `Table` of dicts."""
        try:
            with self._connect() as db:
                db.execute("PRAGMA query_only = ON")
                return Table(dict(row) for row in db.execute(query, params))
        except sqlite3.Error as error:
            raise StoreError(f"the query failed: {error} (store.sql only reads: use SELECT)") from error

    def problems(self, *, charged: Iterable[str] | None = None) -> list[str]:
        """Every broken invariant of the shop; [] means consistent.

        SQLite's own integrity check; copies on hand plus copies in active
        reservations equal the copies owned; every recorded key has exactly
        one applied-or-rejected audit row, and every agent-made reservation
        and every outbox message a key.

        These are the database's own rows: what a service outside it did,
        the store cannot see. Pass what that service says it did, `charged`:
        the idempotency keys it holds a charge under (say, the card service's
        ledger), and each key that no applied write accounts for (its write
        rolled back, was rejected, or never ran) is a problem too: a charge
        for nothing, to refund.
        """
        keys = _keys(charged, "charged")
        checks = {
            "integrity": "SELECT integrity_check AS problem FROM pragma_integrity_check WHERE integrity_check != 'ok'",
            "stock": """SELECT 'book ' || b.id || ': ' || b.on_hand || ' on hand + ' || COALESCE(SUM(r.quantity), 0)
                               || ' reserved != ' || b.copies || ' copies' AS problem
                        FROM books b LEFT JOIN reservations r ON r.book = b.id AND r.status = 'active'
                        GROUP BY b.id HAVING b.on_hand + COALESCE(SUM(r.quantity), 0) != b.copies""",
            "keys": """SELECT 'call ' || w.call_id || ': ' || COUNT(a.seq) || ' applied/rejected audit rows'
                               AS problem
                        FROM writes w LEFT JOIN audit a
                          ON a.call_id = w.call_id AND a.outcome IN ('applied', 'rejected')
                        GROUP BY w.call_id HAVING COUNT(a.seq) != 1""",
            "audit": """SELECT 'call ' || a.call_id || ': audited as ' || a.outcome || ' but has no key' AS problem
                        FROM audit a WHERE a.outcome IN ('applied', 'rejected')
                          AND a.call_id NOT IN (SELECT call_id FROM writes)""",
            "made": """SELECT 'reservation ' || r.id || ': made by call ' || r.call_id || ' with no key' AS problem
                        FROM reservations r WHERE r.call_id IS NOT NULL
                          AND r.call_id NOT IN (SELECT call_id FROM writes)""",
            "outbox": """SELECT 'outbox ' || o.key || ': a message with no applied write' AS problem
                         FROM outbox o WHERE o.key NOT IN (SELECT call_id FROM audit WHERE outcome = 'applied')""",
        }
        found = [row["problem"] for query in checks.values() for row in self.sql(query)]
        return found + [
            f"charge {key}: taken outside the database, with no applied write of that key: refund it"
            for key in (self.unapplied(keys) if keys else [])
        ]

    def unapplied(self, keys: Iterable[str]) -> list[str]:
        """The keys, of `keys`, that no applied write of this shop has: rolled back, rejected, or never made.

        An outside service's record (the keys it charged under) checked against the shop's: each key
        returned is an effect outside the database that no write accounts for, to undo (compensation:
        refund it). The check takes the write lock first, so that a write still in flight commits or rolls
        back before it is looked at: a charge its write is about to commit is never taken for an orphan.
        """
        wanted = _keys(keys, "keys")
        with self._connect() as db:
            _begin(db)  # waits for a write in flight to settle
            try:
                applied = {
                    row[0]
                    for row in db.execute(
                        "SELECT call_id FROM audit WHERE outcome = 'applied' AND call_id IN "
                        "(SELECT value FROM json_each(?))",
                        (json.dumps(wanted),),
                    )
                }
            finally:
                db.execute("ROLLBACK")
        return [key for key in wanted if key not in applied]

    def send_outbox(self, send: Callable[[str, dict[str, Any]], Any]) -> Table:
        """Send each message still in the outbox, oldest first, now that its write has committed.

        `send(key, message)` hands one message to the outside service, with the write's idempotency key, and
        returns once the service has taken it; the message is then marked sent, in a transaction of its
        own. One whose `send` raises stays in the outbox with its error, to be sent by the next call; the
        others are still sent. A process that dies between the send and the mark (anything that is not an
        Exception passes through, leaving the message unmarked) sends it again next time: delivery is at
        least once, so the service must do one thing per key, as a card provider's idempotency key does.
        The key is what makes a message sent twice take effect once.

        Returns a Table, a row per message tried: its key, "sent" or "failed", and what `send` answered
        or raised.
        """
        if not callable(send):
            raise ConfigError("send_outbox needs a function send(key, message) that hands a message to the service")
        with self._connect() as db:
            waiting = db.execute("SELECT key, message FROM outbox WHERE sent IS NULL ORDER BY seq").fetchall()
        report = Table()
        for row in waiting:
            try:
                answer = send(row["key"], json.loads(row["message"]))
            except Exception as error:
                self._mark(row["key"], None, _describe(error))
                report.append({"key": row["key"], "outcome": "failed", "detail": _describe(error)})
            else:
                self._mark(row["key"], _now(), "")
                detail = "" if answer is None else answer if isinstance(answer, str) else _shown(answer)
                report.append({"key": row["key"], "outcome": "sent", "detail": detail})
        return report

    def _mark(self, key: str, sent: str | None, error: str) -> None:
        """One try of an outbox message: sent (when), or failed (why); in a transaction of its own."""
        with self._connect() as db:
            _begin(db)
            db.execute(
                "UPDATE outbox SET sent = ?, tries = tries + 1, error = ? WHERE key = ? AND sent IS NULL",
                (sent, error, key),
            )
            db.execute("COMMIT")

    # -- connections -----------------------------------------------------------

    @contextlib.contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        """A connection of our own for one operation: threads and processes never share one."""
        try:
            db = sqlite3.connect(self.path, timeout=self.busy_timeout_s, isolation_level=None)
        except sqlite3.Error as error:
            raise StoreError(f"cannot open the shop database {str(self.path)!r}: {error}") from error
        try:
            db.row_factory = sqlite3.Row
            db.execute("PRAGMA foreign_keys = ON")
            db.execute("PRAGMA synchronous = NORMAL")  # WAL's own recommendation; see the module docstring
            yield db
        finally:
            db.close()

    def _create(self, books: Sequence[Mapping[str, Any]], reservations: Sequence[Mapping[str, Any]]) -> None:
        """Create the schema and the sample data, once, even if several processes open a new file at once."""
        try:
            with self._connect() as db:
                db.execute("PRAGMA journal_mode = WAL")
                _begin(db)
                try:
                    version = db.execute("PRAGMA user_version").fetchone()[0]
                    if version == 0:
                        if db.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()[0]:
                            raise StoreError(
                                f"{str(self.path)!r} is an SQLite database, but not an agentlab shop; "
                                f"give Store a new path"
                            )
                        for statement in _SCHEMA.split(";"):
                            if statement.strip():
                                db.execute(statement)
                        _fill(db, books, reservations)
                        db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
                    elif version in (1, 2):  # a shop made before runs were numbered, or before the outbox
                        db.execute(_RUNS_TABLE)
                        db.execute(_OUTBOX_TABLE)
                        db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
                    elif version != SCHEMA_VERSION:
                        raise StoreError(
                            f"{str(self.path)!r} is a shop of schema version {version}; this agentlab reads "
                            f"version {SCHEMA_VERSION}"
                        )
                    db.execute("COMMIT")
                except BaseException:
                    if db.in_transaction:
                        db.execute("ROLLBACK")
                    raise
        except sqlite3.DatabaseError as error:
            raise StoreError(f"cannot use {str(self.path)!r} as the shop database: {error}") from error


# -- the writes themselves: each runs inside the caller's transaction ---------------


def _reserve(db: sqlite3.Connection, value: dict[str, Any], call: ToolCall) -> Effect:
    book = db.execute("SELECT id, on_hand FROM books WHERE id = ?", (value["book"],)).fetchone()
    if book is None:
        return _rejected(f"there is no book {value['book']!r}"), []
    if book["on_hand"] < value["quantity"]:
        reason = f"only {book['on_hand']} of book {book['id']} on hand; {value['quantity']} asked for"
        return _rejected(reason), [("books", book["id"])]
    # The decrement happens in SQL, under the write lock: no read-modify-write race.
    db.execute("UPDATE books SET on_hand = on_hand - ? WHERE id = ?", (value["quantity"], book["id"]))
    cursor = db.execute(
        "INSERT INTO reservations (book, customer, quantity, status, call_id) VALUES (?, ?, ?, 'active', ?)",
        (book["id"], value["customer"], value["quantity"], call.id),
    )
    return _applied(db, cursor.lastrowid), [("books", book["id"]), ("reservations", cursor.lastrowid)]


def _update(db: sqlite3.Connection, value: dict[str, Any], call: ToolCall) -> Effect:
    row = _reservation_row(db, value["reservation"])
    if row is None or row["status"] != "active":
        return _no_active(value["reservation"], row), [("reservations", row["id"])] if row else []
    touched = [("reservations", row["id"]), ("books", row["book"])]
    more = value["quantity"] - row["quantity"]
    on_hand = db.execute("SELECT on_hand FROM books WHERE id = ?", (row["book"],)).fetchone()[0]
    if more > on_hand:
        return _rejected(f"only {on_hand} more of book {row['book']} on hand; {more} more asked for"), touched
    db.execute("UPDATE books SET on_hand = on_hand - ? WHERE id = ?", (more, row["book"]))
    db.execute("UPDATE reservations SET quantity = ? WHERE id = ?", (value["quantity"], row["id"]))
    return _applied(db, row["id"]), touched


def _cancel(db: sqlite3.Connection, value: dict[str, Any], call: ToolCall) -> Effect:
    row = _reservation_row(db, value["reservation"])
    if row is None or row["status"] != "active":
        return _no_active(value["reservation"], row), [("reservations", row["id"])] if row else []
    db.execute("UPDATE books SET on_hand = on_hand + ? WHERE id = ?", (row["quantity"], row["book"]))
    db.execute("UPDATE reservations SET status = 'cancelled' WHERE id = ?", (row["id"],))
    return _applied(db, row["id"]), [("reservations", row["id"]), ("books", row["book"])]


_OPERATIONS: dict[str, Callable[[sqlite3.Connection, Any, ToolCall], Effect]] = {
    "reserve": _reserve,
    "update": _update,
    "cancel": _cancel,
}


def _applied(db: sqlite3.Connection, reservation: int) -> dict[str, Any]:
    result = _reservation_result(_reservation_row(db, reservation))
    result["on_hand"] = db.execute("SELECT on_hand FROM books WHERE id = ?", (result["book"],)).fetchone()[0]
    return result


def _rejected(reason: str) -> dict[str, Any]:
    return {"rejected": True, "reason": reason}


def _no_active(number: int, row: sqlite3.Row | None) -> dict[str, Any]:
    return _rejected(f"reservation {number} is cancelled" if row else f"there is no reservation {number}")


def _reservation_row(db: sqlite3.Connection, number: int) -> sqlite3.Row | None:
    return db.execute(
        "SELECT id, book, customer, quantity, status FROM reservations WHERE id = ?", (number,)
    ).fetchone()


def _reservation_result(row: sqlite3.Row) -> dict[str, Any]:
    return {
        "reservation": row["id"],
        "book": row["book"],
        "customer": row["customer"],
        "quantity": row["quantity"],
        "status": row["status"],
    }


def _read_row(db: sqlite3.Connection, table: str, key: Any) -> dict[str, Any] | None:
    columns = {"books": "id, title, on_hand, copies", "reservations": "id, book, customer, quantity, status"}[table]
    row = db.execute(f"SELECT {columns} FROM {table} WHERE id = ?", (key,)).fetchone()
    return dict(row) if row else None


# -- args: what a model is told (JSON Schema), then what is checked before anything runs --------------

_BOOK = {"type": "string", "minLength": 1, "maxLength": 64, "description": "The book's id, such as A."}
_NUMBER = {"type": "integer", "minimum": 1, "description": "The reservation's number."}
_CUSTOMER = {"type": "string", "minLength": 1, "maxLength": 40, "description": "The customer's name."}
_QUANTITY = {"type": "integer", "minimum": 1, "maximum": MAX_QUANTITY, "description": "How many copies."}


def _schema(**properties: dict[str, Any]) -> dict[str, Any]:
    """An object schema with exactly these properties, all required: what the shop's `_check_*` functions accept."""
    return {"type": "object", "properties": properties, "required": list(properties), "additionalProperties": False}


def _check_reserve(args: Any) -> dict[str, Any]:
    """`{"book": id, "customer": name, "quantity": 1..MAX_QUANTITY}`."""
    _exact_keys(args, ("book", "customer", "quantity"))
    return {
        "book": parse_lookup_args({"id": args["book"]})["id"],
        "customer": _name(args["customer"]),
        "quantity": _whole(args["quantity"], "quantity", 1, MAX_QUANTITY),
    }


def _check_update(args: Any) -> dict[str, Any]:
    """`{"reservation": number, "quantity": 1..MAX_QUANTITY}`."""
    _exact_keys(args, ("reservation", "quantity"))
    return {
        "reservation": _whole(args["reservation"], "reservation", 1, 2**53),
        "quantity": _whole(args["quantity"], "quantity", 1, MAX_QUANTITY),
    }


def _check_reservation(args: Any) -> dict[str, Any]:
    """`{"reservation": number}`."""
    _exact_keys(args, ("reservation",))
    return {"reservation": _whole(args["reservation"], "reservation", 1, 2**53)}


def _exact_keys(args: Any, keys: tuple[str, ...]) -> None:
    expected = "expected exactly the keys " + ", ".join(f'"{k}"' for k in keys)
    if not isinstance(args, Mapping):
        raise ValueError(f"{expected}, got a {type(args).__name__}")
    if sorted(map(str, args)) != sorted(keys):
        raise ValueError(f"{expected}, got {sorted(map(str, args))}")


def _whole(value: Any, name: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ValueError(f'"{name}" must be a whole number from {low} to {high}, got {value!r}')
    return int(value)


def _name(value: Any) -> str:
    if not isinstance(value, str) or not 0 < len(value.strip()) <= 40:
        raise ValueError(f'"customer" must be a name of 1 to 40 characters, got {value!r}')
    return value.strip()


# -- helpers -------------------------------------------------------------------------


def _keys(keys: Iterable[str] | None, name: str) -> list[str]:
    """Idempotency keys given by a caller, each once, in order; a clear error for anything else."""
    if keys is None:
        return []
    if isinstance(keys, (str, bytes)) or not isinstance(keys, Iterable):
        raise ConfigError(f"{name} must be a list of idempotency keys (strings), got {keys!r}")
    listed = list(keys)
    odd = [key for key in listed if not isinstance(key, str)]
    if odd:
        raise ConfigError(f"{name} must be a list of idempotency keys (strings), got {odd[0]!r} among them")
    return list(dict.fromkeys(listed))


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="milliseconds")


def _check_key(key: Any) -> None:
    if key is not None and not callable(key):
        raise ConfigError("key must be a function key(call) -> str that makes a write's idempotency key")


def _begin(db: sqlite3.Connection) -> None:
    """Take the write lock now, waiting up to the busy timeout: two writers never interleave."""
    try:
        db.execute("BEGIN IMMEDIATE")
    except sqlite3.OperationalError as error:
        raise StoreError(
            f"the shop database is busy ({error}): another writer held its lock for longer than the busy "
            f"timeout; nothing was changed. Retry the same call, or raise Store(busy_timeout_ms=...)"
        ) from error


def _throw_if_stopped(signal: AbortSignal, tool: str, call: ToolCall, when: str) -> None:
    if signal.aborted:
        reason = signal.reason
        raise WriteRolledBack(
            f"rolled back: the run was stopped ({_describe(reason) if reason else 'aborted'}) {when}; "
            f"{tool} (key {call.id!r}) applied nothing"
        )


def _queue(
    db: sqlite3.Connection,
    outbox: Callable[[ToolCall, dict[str, Any]], Mapping[str, Any] | None],
    call: ToolCall,
    result: dict[str, Any],
) -> None:
    """The write's message for outside, if `outbox` makes one: written in the write's transaction."""
    message = outbox(call, json.loads(_as_sent(result)))  # a copy: the function cannot change the result
    if message is None:
        return
    try:
        if not isinstance(message, Mapping):
            raise TypeError(f"a {type(message).__name__}")
        text = _canonical(dict(message))
    except (TypeError, ValueError) as error:
        raise StoreError(
            f"the outbox function made {message!r} for {call.name} (key {call.id!r}): it must return a dict of "
            f"JSON values (the message to send after the commit), or None; nothing of the write was applied"
        ) from error
    db.execute("INSERT INTO outbox (key, message) VALUES (?, ?)", (call.id, text))


def _audit(db: sqlite3.Connection, call_id: str, tool: str, args: str, outcome: str, detail: str) -> None:
    at = _now()
    db.execute(
        "INSERT INTO audit (at, call_id, tool, args, outcome, detail) VALUES (?, ?, ?, ?, ?, ?)",
        (at, call_id, tool, args, outcome, detail),
    )


def _fill(
    db: sqlite3.Connection, books: Sequence[Mapping[str, Any]], reservations: Sequence[Mapping[str, Any]]
) -> None:
    try:
        for book in books:
            db.execute(
                "INSERT INTO books VALUES (?, ?, ?, ?, ?, ?)",
                (book["id"], book["title"], book["author"], book["year"], book["copies"], book["copies"]),
            )
        for reservation in reservations:
            db.execute(
                "INSERT INTO reservations (book, customer, quantity, status) VALUES (?, ?, ?, 'active')",
                (reservation["book"], reservation["customer"], reservation["quantity"]),
            )
            db.execute(
                "UPDATE books SET on_hand = on_hand - ? WHERE id = ?", (reservation["quantity"], reservation["book"])
            )
    except (KeyError, TypeError, sqlite3.IntegrityError) as error:
        raise ConfigError(
            "the shop's data does not fit: books need id, title, author, year and copies; reservations need "
            f"book, customer and quantity, within the copies of that book ({_describe(error)})"
        ) from error


def _canonical(value: Any) -> str:
    """JSON with sorted keys: the same args always give the same text, whatever their order."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def _release(keeper: sqlite3.Connection | None, folder: Path | None) -> None:
    if keeper is not None:
        keeper.close()
    if folder is not None:
        shutil.rmtree(folder, ignore_errors=True)


def _as_sent(result: dict[str, Any]) -> str:
    """A result as JSON in its own key order, so that a replay returns the very same text."""
    return json.dumps(result, ensure_ascii=False, separators=(",", ":"))


def _shown(value: Any) -> str:
    """What a service answered, as compact JSON (or its repr, if it is not JSON)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=repr)


def _describe(error: BaseException) -> str:
    text = str(error)
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


__all__ = [
    "MAX_QUANTITY",
    "OUTCOMES",
    "SAMPLE_BOOKS",
    "SAMPLE_RESERVATIONS",
    "Change",
    "RowChange",
    "Store",
    "StoreError",
    "Table",
    "WriteRolledBack",
]
