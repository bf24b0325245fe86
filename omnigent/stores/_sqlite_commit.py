"""Group commit: the writes waiting for the SQLite writer run in one transaction.

SQLite has one writer, and every write is a thread hop (150–200 µs here) plus a
commit. When many tasks write at once — a stop ending a hundred background tasks,
each writing its inbox item and forgetting its process group; two hundred turns
starting together — they queue for the writer one by one. Instead, whoever finds the
writer free takes *every* write queued by then (up to :data:`MAX_BATCH`) and runs them
in one thread hop and one ``BEGIN IMMEDIATE`` … ``COMMIT``, each inside a
``SAVEPOINT`` of its own: a write that raises is rolled back alone and its caller gets
the error, while the others commit. Each caller still sees its own write as one
transaction (it is all there or not at all, and committed when the call returns).

:func:`run_batch` is the pure part (it runs in the worker thread);
:meth:`omnigent.stores.sqlite.SQLiteStore._write` queues and hands over.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from typing import Any

import attrs
import outcome

__all__ = ["MAX_BATCH", "WriteJob", "run_batch"]

MAX_BATCH = 256
"""Writes run in one transaction at most (a bound on how long one commit holds the rest)."""


@attrs.define(eq=False)
class WriteJob:
    """One queued write: the function, and once it ran, what it returned or raised."""

    fn: Callable[[sqlite3.Connection], Any]
    result: outcome.Outcome[Any] | None = None


def run_batch(conn: sqlite3.Connection, jobs: Sequence[WriteJob]) -> list[outcome.Outcome[Any]]:
    """Run every job's function in one transaction, each in a savepoint of its own.

    Returns each job's outcome in order. A function that raises is rolled back to its
    savepoint (its partial writes undone) and the others go on. If the transaction
    itself fails (``BEGIN`` or ``COMMIT``: a locked or full database), it is rolled
    back and every job gets that error.
    """
    results: list[outcome.Outcome[Any]] = []
    conn.execute("BEGIN IMMEDIATE")
    try:
        for job in jobs:
            conn.execute("SAVEPOINT omnigent_write")
            try:
                value = job.fn(conn)
            except Exception as exc:
                conn.execute("ROLLBACK TO omnigent_write")
                conn.execute("RELEASE omnigent_write")
                results.append(outcome.Error(exc))
            else:
                conn.execute("RELEASE omnigent_write")
                results.append(outcome.Value(value))
        conn.execute("COMMIT")
    except BaseException as exc:
        # Also when COMMIT itself failed (disk full, I/O error): a transaction left
        # open would make every later BEGIN fail.
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        if not isinstance(exc, Exception):
            raise
        return [outcome.Error(_copy(exc)) for _ in jobs]
    return results


def _copy(exc: Exception) -> Exception:
    """The same error for another caller (one exception object raised in several tasks
    would collect all their tracebacks)."""
    try:
        copy = type(exc)(*exc.args)
    except Exception:
        copy = sqlite3.OperationalError(str(exc))
    copy.__cause__ = exc
    return copy
