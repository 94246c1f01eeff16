"""A card service that takes the shop's deposits: fake, in-process, and outside the shop's database (notebook 09d).

    card = CardService(takes_ms=1000)                        # answers after a second
    card.charge("run-1/w1", {"customer": "eve", "amount": 5})
    card.charge("run-1/w1", {"customer": "eve", "amount": 5})   # the same key: the same charge, taken once
    card.ledger()                                            # every charge, by key; card.requests: 2
    card.refund("run-1/w1")                                  # compensation, once however often it is asked

It stands for a real provider in the two ways that matter here. It is outside
the shop's SQLite file, so nothing the shop's transaction does reaches it: a
rollback does not undo a charge. And like a real provider's API it takes an
idempotency key with each charge and keeps one charge per key, so a request
sent twice (a retry, an outbox message sent again after a crash) charges once.

A charge is taken when the request arrives; the answer comes `takes_ms`
later. A caller that stops waiting, because its run was stopped, has not
taken the charge back: the service has the request. `fault` is one of FAULTS:
"answers"; "declines" (raises ConnectionError, charges nothing); "ignores the
stop" (waits its full time whatever the signal says, as a client with no way
to cancel does).

The three ways a shop can take the deposit, all of them in notebook 09d:
inside the write's transaction (`before_commit`: unsafe, a rollback leaves the
charge standing); through the outbox (`Store(outbox=deposit_for)`, then
`store.send_outbox(card.charge)` after the commit); or inside, with
compensation afterwards (`refund_unapplied(store, card)` refunds each charge
that no applied write accounts for).

Deterministic: no randomness, no network, no clock in what it records.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from typing import Any

from agentlab.abort import AbortSignal
from agentlab.errors import ConfigError
from agentlab.tools import ToolCall
from agentlab.writes.store import Store, Table

FAULTS = ("answers", "declines", "ignores the stop")
DEPOSIT = 5  # what the shop asks as a deposit for a reservation


class CardService:
    """A fake card provider with a ledger keyed by idempotency key. Thread-safe: writes call it from workers."""

    def __init__(self, *, takes_ms: float = 0, fault: str = "answers") -> None:
        if isinstance(takes_ms, bool) or not isinstance(takes_ms, (int, float)) or takes_ms < 0:
            raise ConfigError(f"takes_ms must be a number of milliseconds >= 0, got {takes_ms!r}")
        if fault not in FAULTS:
            raise ConfigError(f"fault must be one of {', '.join(map(repr, FAULTS))}, got {fault!r}")
        self.takes_s = takes_ms / 1000
        self.fault = fault
        self.requests: list[str] = []  # the key of every charge request that reached the service, in order
        self._ledger: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"CardService(takes_ms={self.takes_s * 1000:g}, fault={self.fault!r})"

    def charge(self, key: str, deposit: Mapping[str, Any], signal: AbortSignal | None = None) -> dict[str, Any]:
        """Charge `deposit` ({"customer": ..., "amount": ...}) under the idempotency key `key`; its ledger entry.

        A key already charged is not charged again: its first charge comes back. With `signal`, a stop cuts
        the wait for the answer short (TimeoutError), but the charge was taken when the request arrived.
        """
        if not isinstance(key, str) or not key:
            raise ConfigError(f"a charge needs an idempotency key, a non-empty string; got {key!r}")
        if not isinstance(deposit, Mapping) or not {"customer", "amount"} <= set(deposit):
            raise ConfigError(f'a deposit is {{"customer": ..., "amount": ...}}, got {deposit!r}')
        with self._lock:
            self.requests.append(key)
            if self.fault == "declines":
                raise ConnectionError(f"the card service declined the deposit (key {key!r}); nothing was charged")
            entry = self._ledger.setdefault(
                key, {"key": key, "customer": deposit["customer"], "amount": deposit["amount"], "state": "charged"}
            )
            answer = dict(entry)
        if self.fault == "ignores the stop" or signal is None:
            time.sleep(self.takes_s)  # deaf: it runs its course, whatever the run's signal says
        elif signal.wait_sync(self.takes_s):  # True: the run was stopped before the answer came
            raise TimeoutError(
                f"stopped waiting for the card service: the run was stopped. It had the request (key {key!r}): "
                f"ask it again with the same key to learn what it did"
            )
        return answer

    def refund(self, key: str) -> dict[str, Any]:
        """Give back the charge taken under `key` (compensation); a key refunded already is not refunded twice."""
        with self._lock:
            entry = self._ledger.get(key)
            if entry is None:
                return {"key": key, "state": "no charge"}
            entry["state"] = "refunded"
            return dict(entry)

    def charged(self) -> list[str]:
        """The keys the service holds a charge under (refunds left out): what `Store.problems(charged=...)` checks."""
        with self._lock:
            return [key for key, entry in self._ledger.items() if entry["state"] == "charged"]

    def ledger(self) -> Table:
        """Every charge, in the order taken: key, customer, amount, state (charged or refunded)."""
        with self._lock:
            return Table(dict(entry) for entry in self._ledger.values())


def deposit_for(call: ToolCall, result: Mapping[str, Any]) -> dict[str, Any] | None:
    """The outbox's message for a write: `Store(outbox=deposit_for)`. A reservation made asks for a deposit."""
    if call.name != "reserve":
        return None
    return {"customer": result["customer"], "amount": DEPOSIT}


def refund_unapplied(store: Store, card: CardService) -> list[str]:
    """Compensation: refund each charge the card service holds that no applied write of `store` accounts for.

    Returns the keys refunded. The store looks only once any write in flight has settled
    (`Store.unapplied`), so a charge whose write is about to commit is never refunded. Every charge the card
    service holds is taken to be this shop's: a service shared with other shops needs its keys filtered
    first (`store.unapplied(keys)` with this shop's keys only).
    """
    if not isinstance(store, Store) or not isinstance(card, CardService):
        raise ConfigError(
            f"refund_unapplied(store, card) takes the shop and its card service, got {type(store).__name__} "
            f"and {type(card).__name__}"
        )
    refunded = store.unapplied(card.charged())
    for key in refunded:
        card.refund(key)
    return refunded


__all__ = ["DEPOSIT", "FAULTS", "CardService", "deposit_for", "refund_unapplied"]
