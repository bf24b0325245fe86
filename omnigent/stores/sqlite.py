"""The embedded SQLite store: WAL, one writer, readers in threads.

Every call runs the blocking ``sqlite3`` work in a worker thread, so it never blocks
the event loop. Writes share one connection, one batch at a time; reads use a small
pool of their own connections and run beside the writer (WAL). An in-memory store
(``path=None``) has a single connection for both, used by one thread at a time.

A thread hop costs 150–200 µs: hot paths (events) write in batches
(:meth:`SQLiteStore.append_events`), never one row per call.

Writes that wait for the writer at the same time are committed together, one thread
hop and one transaction for all of them (:mod:`._sqlite_commit`): a burst of small
writes costs one commit, not one each.

Deadlines (every call is bounded by the store's ``timeout``, 30 s by default):

* A **read** is cancellable: a cancelled caller (a ``move_on_after`` around it) stops
  waiting at once, and the statement is interrupted (:mod:`._sqlite_reads`).
* A **write** is shielded — a cancelled caller still waits for it, then sees the
  cancel at its next checkpoint, so nothing is half-done — but only until the
  timeout. Then the caller gets :class:`~omnigent.errors.StoreTimeout`: with
  ``unknown=False`` if the write never started (it is withdrawn) or was refused for
  the lock, ``unknown=True`` if it was still running (it may yet commit; the outcome
  is logged when it comes).
* A **lock** another connection holds is waited for half the timeout (the writer's
  busy timeout; readers retry in short slices until then), then the call fails with
  ``StoreTimeout`` and nothing written.

Nothing is left half-written: each method's writes are all committed or none. A
shutdown past its grace calls :meth:`SQLiteStore.abandon`: callers stop waiting (they
get ``RuntimeClosed``) while their statements finish in their threads, and each
connection is closed by the last thread that used it, never under it.

This module owns the connections, migrations and deadlines; the methods come from one
mixin per table family (``_sqlite_agents``, ``_sqlite_sessions``, ``_sqlite_log``,
``_sqlite_extras``, ``_sqlite_harness``, ``_sqlite_work``), each relying only on
``_write``/``_read``.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import sqlite3
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar, cast

import outcome
import trio

from .._private import PRIVATE_FILE, private_dir, private_file
from ..errors import RuntimeClosed, StoreBusy, StoreTimeout
from ._lock import lock_holder, lock_path, write_holder
from ._protocol import DEFAULT_TIMEOUT
from ._schema import MIGRATIONS
from ._sql_usage import SQLUsageMixin
from ._sqlite_agents import AgentsMixin
from ._sqlite_commit import GroupCommit, WriteJob, run_batch
from ._sqlite_extras import ExtrasMixin
from ._sqlite_harness import HarnessStateMixin
from ._sqlite_log import LogMixin
from ._sqlite_reads import BUSY_SLICE, ReaderPool, is_busy
from ._sqlite_sessions import SessionsMixin
from ._sqlite_work import WorkMixin

__all__ = ["SQLiteStore", "open_sqlite_store"]

T = TypeVar("T")
_READERS = 4

_ABANDONED = "the store stopped waiting for the database at shutdown"


def _connect(path: Path | None, busy_timeout: float) -> sqlite3.Connection:
    target = ":memory:" if path is None else str(path)
    conn = sqlite3.connect(
        target, isolation_level=None, check_same_thread=False, timeout=busy_timeout
    )
    conn.row_factory = sqlite3.Row
    conn.execute("PRAGMA foreign_keys = ON")
    if path is not None:
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")
    return conn


def _migrate(conn: sqlite3.Connection) -> None:
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    for number, script in enumerate(MIGRATIONS[version:], start=version + 1):
        conn.execute("BEGIN IMMEDIATE")
        try:
            for statement in script.split(";"):
                if statement.strip():
                    conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {number}")
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise


class SQLiteStore(
    AgentsMixin, SessionsMixin, LogMixin, ExtrasMixin, HarnessStateMixin, WorkMixin, SQLUsageMixin
):
    """SQLite-backed store. Open with :func:`open_sqlite_store`."""

    def __init__(self, path: Path | None, timeout: float = DEFAULT_TIMEOUT) -> None:
        self.path = path
        self.timeout = timeout
        self._lock_wait = timeout / 2
        self._writer = _connect(path, self._lock_wait)
        self._readers = [_connect(path, BUSY_SLICE) for _ in range(_READERS if path else 0)]
        _migrate(self._writer)
        # Connections a worker thread is using right now, and how many threads: close()
        # leaves those to the last thread out (see _use).
        self._guard = threading.Lock()
        self._in_use: dict[sqlite3.Connection, int] = {}
        # In memory, reads and writes share the one connection: one thread at a time.
        self._serial = threading.Lock() if path is None else None
        self._closed = False
        self._abandoned = False
        self._waits: set[trio.CancelScope] = set()
        self._reads = ReaderPool(self._readers or [self._writer], self._use, self._guard)
        self._commits = GroupCommit(self._run_batch)

    async def owner_info(self) -> str | None:
        """Who owns the database file (``pid N on HOST``), for error messages."""
        return await trio.to_thread.run_sync(read_lock_owner, self.path)

    @property
    def kind(self) -> str:
        return "sqlite" if self.path is not None else "memory"

    async def ping(self) -> None:
        """Check that the database answers: read its schema version from the file."""
        await self._read(lambda c: c.execute("PRAGMA user_version").fetchone())

    @property
    def location(self) -> str:
        """The database, as messages name it."""
        return str(self.path) if self.path is not None else ":memory:"

    def close(self) -> None:
        """Close every connection; one a thread still uses is closed when it is done."""
        with self._guard:
            self._closed = True
            for conn in [self._writer, *self._readers]:
                if not self._in_use.get(conn):
                    conn.close()

    def abandon(self) -> int:
        """Stop waiting for statements in flight; returns how many were waited on.

        For a shutdown past its grace (a database locked by another process, say):
        each waiting caller gets ``RuntimeClosed`` at once, and so does every later
        call; the statements themselves finish in their threads.
        """
        self._abandoned = True
        for scope in self._waits:
            scope.cancel()
        return len(self._waits)

    # -- thread plumbing -------------------------------------------------------------

    def _use(self, conn: sqlite3.Connection, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``fn`` on ``conn`` in this worker thread, marking the connection in use."""
        with self._guard:
            if self._closed:
                raise RuntimeClosed("the store is closed")
            self._in_use[conn] = self._in_use.get(conn, 0) + 1
        try:
            with self._serial or contextlib.nullcontext():
                return fn(conn)
        finally:
            with self._guard:
                self._in_use[conn] -= 1
                if not self._in_use[conn]:
                    del self._in_use[conn]
                    if self._closed:
                        conn.close()  # the store closed while we worked: we are the last

    def _run_batch(self, jobs: list[WriteJob]) -> list[outcome.Outcome[Any]]:
        """One batch of writes on the writer connection (in the worker thread)."""
        return self._use(self._writer, lambda c: run_batch(c, jobs))

    async def _write(
        self,
        fn: Callable[[sqlite3.Connection], T],
        on_committed: Callable[[], None] | None = None,
    ) -> T:
        """Run ``fn`` in a write transaction, shared with the writes queued meanwhile.

        ``on_committed``: called once it committed, before this returns (see
        :meth:`GroupCommit.submit`).

        Raises:
            StoreTimeout: not done within the store's timeout, or the write lock
                could not be had (see the module docstring). RuntimeClosed: the
                store was abandoned.

        Cancellation: shielded until the timeout (see the module docstring).
        """
        if self._abandoned:
            raise RuntimeClosed(_ABANDONED)
        job = self._commits.submit(fn, on_committed)
        with trio.CancelScope(shield=True) as wait:
            wait.deadline = trio.current_time() + self.timeout
            self._waits.add(wait)
            try:
                await job.done.wait()
            finally:
                self._waits.discard(wait)
        if job.result is None:
            started = self._commits.give_up(job)
            if self._abandoned:
                raise RuntimeClosed(_ABANDONED)
            raise StoreTimeout(self.location, self.timeout, unknown=started)
        try:
            return cast(T, job.result.unwrap())
        except sqlite3.OperationalError as exc:
            if is_busy(exc):  # the write lock was not had: nothing was written
                raise StoreTimeout(self.location, self.timeout) from exc
            raise

    async def _read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``fn`` on a reader connection.

        Raises:
            StoreTimeout: no answer within the store's timeout (or a lock held
                elsewhere for half of it). RuntimeClosed: the store was abandoned.

        Cancellation: returns at once; the statement is interrupted.
        """
        if self._abandoned:
            raise RuntimeClosed(_ABANDONED)
        with trio.move_on_after(self.timeout) as wait:
            self._waits.add(wait)
            try:
                return await self._reads.read(fn, self._lock_wait)
            except sqlite3.OperationalError as exc:
                if is_busy(exc):
                    raise StoreTimeout(self.location, self.timeout) from exc
                raise
            finally:
                self._waits.discard(wait)
        if self._abandoned:
            raise RuntimeClosed(_ABANDONED)
        raise StoreTimeout(self.location, self.timeout)


@asynccontextmanager
async def open_sqlite_store(
    path: Path | None, *, exclusive: bool = True, timeout: float = DEFAULT_TIMEOUT
) -> AsyncIterator[SQLiteStore]:
    """Open (creating and migrating as needed) the store at ``path``; ``None``: memory.

    Args:
        path: the database file, or ``None`` for a private in-memory database.
        exclusive: hold an advisory lock beside the file for as long as the store is
            open. One runtime at a time may run turns on a file (their event ids and
            recovery would collide); a records-only runtime opens it with ``False``.
        timeout: how long a call is waited for at most, in seconds (a lock held
            elsewhere: half of it); see the module docstring.

    Raises:
        StoreBusy: ``exclusive`` and another process holds the file.

    Resource handling: the connections (and the lock) are released when the block
    exits, however it exits.
    """
    if path is not None:
        # Private, whatever the umask: the database holds every user's data and the
        # specs' keys (SQLite gives its -wal and -shm files the database's mode).
        await trio.to_thread.run_sync(lambda: private_file(private_dir(path.parent) / path.name))
    async with _exclusive_lock(path if exclusive else None):
        store = await trio.to_thread.run_sync(SQLiteStore, path, timeout)
        try:
            yield store
        finally:
            store.close()


def read_lock_owner(path: Path | None) -> str | None:
    """Who holds the lock beside ``path`` (``pid N on HOST (omnigent serve at URL)``),
    if anyone wrote it."""
    if path is None:
        return None
    holder = lock_holder(path)
    return None if holder is None or holder.pid is None else holder.describe()


@asynccontextmanager
async def _exclusive_lock(path: Path | None) -> AsyncIterator[None]:
    """Hold an advisory lock on ``<path>.lock`` while the block runs.

    Raises:
        StoreBusy: another process holds it.
    """
    if path is None:
        yield
        return
    locked = lock_path(path)

    def acquire() -> int:
        fd = os.open(locked, os.O_RDWR | os.O_CREAT, PRIVATE_FILE)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise StoreBusy(str(path), read_lock_owner(path)) from None
        # Who holds it, for the messages of those refused and for the command line
        # (best effort; see omnigent.stores._lock).
        write_holder(fd)
        return fd

    fd = await trio.to_thread.run_sync(acquire)
    try:
        yield
    finally:
        os.close(fd)  # releases the lock
