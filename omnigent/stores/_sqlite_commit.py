"""Group commit: the writes waiting for the SQLite writer run in one transaction.

SQLite has one writer, and every write is a thread hop (150–200 µs here) plus a
commit. When many tasks write at once — a stop ending a hundred background tasks,
each writing its inbox item and forgetting its process group; two hundred turns
starting together — they queue for the writer one by one. Instead, whenever the
writer is free, *every* write queued by then (up to :data:`MAX_BATCH`) runs in one
thread hop and one ``BEGIN IMMEDIATE`` … ``COMMIT``. Should one of them raise, the
batch is rolled back and each write runs again in a transaction of its own, so only
the failing caller gets an error. Each caller still sees its own write as one
transaction (it is all there or not at all, and committed when the call returns).

:func:`run_batch` is the pure part (it runs in the worker thread). :class:`GroupCommit`
keeps the queue and hands each batch to a worker thread; the thread hands the
outcomes back itself, so no caller owns a batch: a caller that stops waiting (its
deadline passed) leaves the batch running for the others, and the next batch starts
when it is done.
"""

from __future__ import annotations

import contextlib
import logging
import sqlite3
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import attrs
import outcome
import trio

__all__ = ["MAX_BATCH", "GroupCommit", "WriteJob", "run_batch"]

log = logging.getLogger("omnigent.stores.sqlite")

T = TypeVar("T")

MAX_BATCH = 256
"""Writes run in one transaction at most (a bound on how long one commit holds the rest)."""


@attrs.define(eq=False)
class WriteJob:
    """One queued write: the function, and once it ran, what it returned or raised."""

    fn: Callable[[sqlite3.Connection], Any]
    # Called on the event loop the moment the write is known committed (see submit).
    on_committed: Callable[[], None] | None = None
    result: outcome.Outcome[Any] | None = None
    started: bool = False  # handed to a worker thread: its outcome is out of our hands
    given_up: bool = False  # its caller stopped waiting before it ended
    done: trio.Event = attrs.field(factory=trio.Event)


class GroupCommit:
    """The writes queued for one writer connection, committed a batch at a time.

    Args:
        run: runs a batch on the writer connection (in the worker thread it is called
            in) and returns each job's outcome, in order.
    """

    def __init__(self, run: Callable[[list[WriteJob]], list[outcome.Outcome[Any]]]) -> None:
        self._run = run
        self._queued: list[WriteJob] = []
        self._committing = False

    def submit(
        self,
        fn: Callable[[sqlite3.Connection], Any],
        on_committed: Callable[[], None] | None = None,
    ) -> WriteJob:
        """Queue a write; it starts at once if the writer is free. Await ``job.done``.

        ``on_committed`` is called once the write has committed (``fn`` returned and the
        transaction with it), on the event loop, in the callback that hands the batch's
        outcomes back — a scheduler round before the caller waiting on ``job.done``
        resumes. Not if the write failed, nor once its caller gave up on it. It must
        not block; what it raises is logged.
        """
        job = WriteJob(fn, on_committed)
        self._queued.append(job)
        self._start_next()
        return job

    def give_up(self, job: WriteJob) -> bool:
        """The caller stops waiting for ``job``; whether it had started.

        A job still queued is withdrawn (it never runs: nothing of it is written). One
        that started runs to its end in its thread; its outcome is logged then.
        """
        if job.started:
            job.given_up = True
            return True
        self._queued.remove(job)
        return False

    def _start_next(self) -> None:
        """Hand what is queued to a worker thread, unless a batch is being committed."""
        if self._committing or not self._queued:
            return
        batch = self._queued[:MAX_BATCH]
        del self._queued[:MAX_BATCH]
        for job in batch:
            job.started = True
        self._committing = True
        token = trio.lowlevel.current_trio_token()

        def deliver(result: outcome.Outcome[list[outcome.Outcome[Any]]]) -> None:
            # In the worker thread: back to the event loop (if it still runs).
            with contextlib.suppress(trio.RunFinishedError):
                token.run_sync_soon(self._finished, batch, result)

        trio.lowlevel.start_thread_soon(
            lambda: self._run(batch), deliver, name="omnigent sqlite writer"
        )

    def _finished(
        self, batch: list[WriteJob], result: outcome.Outcome[list[outcome.Outcome[Any]]]
    ) -> None:
        self._committing = False
        if isinstance(result, outcome.Error):  # the batch could not run (store closed)
            outcomes: list[outcome.Outcome[Any]] = [outcome.Error(result.error) for _ in batch]
        else:
            outcomes = result.unwrap()
        for job, job_outcome in zip(batch, outcomes, strict=True):
            job.result = job_outcome
            if job.given_up:
                _log_late(job_outcome)
            elif job.on_committed is not None and isinstance(job_outcome, outcome.Value):
                try:
                    job.on_committed()
                except Exception:  # in trio's callback: it must not escape
                    log.exception("a write's on_committed callback failed")
            job.done.set()
        self._start_next()


def _log_late(result: outcome.Outcome[Any]) -> None:
    if isinstance(result, outcome.Error):
        log.warning("a write given up at its deadline has failed since: %r", result.error)
    else:
        log.warning("a write given up at its deadline has been committed since")


def run_batch(conn: sqlite3.Connection, jobs: Sequence[WriteJob]) -> list[outcome.Outcome[Any]]:
    """Run every job's function in one transaction; each job's outcome, in order.

    The common case, nothing raises, costs one ``BEGIN IMMEDIATE`` and one ``COMMIT``
    for them all. If a function raises, or the commit does, the transaction is rolled
    back and every job is run again alone, each in its own transaction, so a bad write
    costs only its own caller. (The functions only write what their arguments say:
    running one again after a rollback is safe. A ``SAVEPOINT`` per job would make the
    rerun unnecessary, but it journals every page each job touches and halved the
    throughput of event batches.) If the write lock cannot be had at all (``BEGIN``
    waited out the busy timeout), nothing ran: every job fails with that error, and
    none is tried again here.
    """
    if len(jobs) == 1:
        return [_run_alone(conn, jobs[0])]
    try:
        conn.execute("BEGIN IMMEDIATE")
    except sqlite3.OperationalError as exc:
        return [outcome.Error(exc) for _ in jobs]
    try:
        values = _transaction(conn, lambda: [job.fn(conn) for job in jobs], begun=True)
    except Exception:
        return [_run_alone(conn, job) for job in jobs]
    return [outcome.Value(value) for value in values]


def _run_alone(conn: sqlite3.Connection, job: WriteJob) -> outcome.Outcome[Any]:
    try:
        return outcome.Value(_transaction(conn, lambda: job.fn(conn)))
    except Exception as exc:
        return outcome.Error(exc)


def _transaction(conn: sqlite3.Connection, body: Callable[[], T], *, begun: bool = False) -> T:
    """``body()`` in one ``BEGIN IMMEDIATE`` … ``COMMIT``; rolled back if anything raises.

    Also when ``COMMIT`` itself failed (disk full, I/O error): a transaction left open
    would make every later ``BEGIN`` fail. ``begun``: the caller ran ``BEGIN`` already.
    """
    if not begun:
        conn.execute("BEGIN IMMEDIATE")
    try:
        value = body()
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    return value
