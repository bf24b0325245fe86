"""Group commit: the writes waiting for the SQLite writer run in one transaction.

SQLite has one writer, and every write is a thread hop (150–200 µs here) plus a
commit. When many tasks write at once — a stop ending a hundred background tasks,
each writing its inbox item and forgetting its process group; two hundred turns
starting together — they queue for the writer one by one. Instead, whoever finds the
writer free takes *every* write queued by then (up to :data:`MAX_BATCH`) and runs them
in one thread hop and one ``BEGIN IMMEDIATE`` … ``COMMIT``. Should one of them
raise, the batch is rolled back and each write runs again in a transaction of its
own, so only the failing caller gets an error. Each caller still sees its own write
as one transaction (it is all there or not at all, and committed when the call
returns).

:func:`run_batch` is the pure part (it runs in the worker thread);
:meth:`omnigent.stores.sqlite.SQLiteStore._write` queues and hands over.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import attrs
import outcome

__all__ = ["MAX_BATCH", "WriteJob", "run_batch"]

T = TypeVar("T")

MAX_BATCH = 256
"""Writes run in one transaction at most (a bound on how long one commit holds the rest)."""


@attrs.define(eq=False)
class WriteJob:
    """One queued write: the function, and once it ran, what it returned or raised."""

    fn: Callable[[sqlite3.Connection], Any]
    result: outcome.Outcome[Any] | None = None


def run_batch(conn: sqlite3.Connection, jobs: Sequence[WriteJob]) -> list[outcome.Outcome[Any]]:
    """Run every job's function in one transaction; each job's outcome, in order.

    The common case, nothing raises, costs one ``BEGIN IMMEDIATE`` and one ``COMMIT``
    for them all. If anything fails — a function raises, or the commit does — the
    transaction is rolled back and every job is run again alone, each in its own
    transaction, so a bad write costs only its own caller. (The functions only write
    what their arguments say: running one again after a rollback is safe. A
    ``SAVEPOINT`` per job would make the rerun unnecessary, but it journals every page
    each job touches and halved the throughput of event batches.)
    """
    if len(jobs) == 1:
        return [_run_alone(conn, jobs[0])]
    try:
        values = _transaction(conn, lambda: [job.fn(conn) for job in jobs])
    except Exception:
        return [_run_alone(conn, job) for job in jobs]
    return [outcome.Value(value) for value in values]


def _run_alone(conn: sqlite3.Connection, job: WriteJob) -> outcome.Outcome[Any]:
    try:
        return outcome.Value(_transaction(conn, lambda: job.fn(conn)))
    except Exception as exc:
        return outcome.Error(exc)


def _transaction(conn: sqlite3.Connection, body: Callable[[], T]) -> T:
    """``body()`` in one ``BEGIN IMMEDIATE`` … ``COMMIT``; rolled back if anything raises.

    Also when ``COMMIT`` itself failed (disk full, I/O error): a transaction left open
    would make every later ``BEGIN`` fail.
    """
    conn.execute("BEGIN IMMEDIATE")
    try:
        value = body()
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    return value
