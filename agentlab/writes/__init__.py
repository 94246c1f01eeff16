"""Writes for real (notebooks 09a-09d): a store whose writes can be trusted, and a person who approves them.

    store.py     a small bookshop in a real SQLite file: its write tools are idempotent,
                 whole or nothing in that database, audited, and honour the run's stop; an effect
                 outside the database goes through its outbox, sent after the commit
    card.py      a fake card service outside the shop's database, keyed by idempotency key (09d)
    approval.py  the approval desk: an Approve/Deny widget showing each write's before and after
    change_view.py  that before and after, as HTML (the store's `Change` and the desk both draw with it)

The loop's own rules for writes (an approval policy, `max_writes`, the grace
when a run stops mid-write) are in the core: agentlab/loop_writes.py. This
folder is optional; the core never imports it.
"""
