"""The embedded SQLite store: WAL, one writer, readers in threads.

Every call runs the blocking ``sqlite3`` work in a worker thread
(``trio.to_thread.run_sync``). Writes share one connection behind a
``CapacityLimiter(1)``, so they are serialised without ever blocking the event loop;
reads use a small pool of their own connections and run beside the writer (WAL).
An in-memory store (``path=None``) has a single connection for both.

A thread hop costs 150–200 µs: hot paths (events) write in batches
(:meth:`SQLiteStore.append_events`), never one row per call.

Writes that wait for the writer at the same time are committed together, one thread
hop and one transaction for all of them, each in its own savepoint
(:mod:`._sqlite_commit`): a burst of small writes costs one commit, not one each.

Cancellation: a thread call cannot be interrupted; a cancelled caller waits for the
statement it started (or queued) to finish (bounded by SQLite's busy timeout) and gets
its result, then sees ``trio.Cancelled`` at its next checkpoint. Nothing is left
half-written: each method's writes are all committed or none. A shutdown past its
grace calls :meth:`SQLiteStore.abandon`: callers stop waiting (they get
``RuntimeClosed``) while their statements finish in their threads, and each
connection is closed by the last thread that used it, never under it.

This module owns the connections, migrations and thread plumbing; the methods come
from one mixin per table family (``_sqlite_agents``, ``_sqlite_sessions``,
``_sqlite_log``, ``_sqlite_extras``, ``_sqlite_harness``, ``_sqlite_work``), each relying
only on ``_write``/``_read``.
"""

from __future__ import annotations

import fcntl
import os
import socket
import sqlite3
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import TypeVar, cast

import trio

from ..errors import RuntimeClosed, StoreBusy
from ._schema import MIGRATIONS
from ._sqlite_agents import AgentsMixin
from ._sqlite_commit import MAX_BATCH, WriteJob, run_batch
from ._sqlite_extras import ExtrasMixin
from ._sqlite_harness import HarnessStateMixin
from ._sqlite_log import LogMixin
from ._sqlite_sessions import SessionsMixin
from ._sqlite_work import WorkMixin

__all__ = ["SQLiteStore", "open_sqlite_store"]

T = TypeVar("T")
_READERS = 4


def _connect(path: Path | None) -> sqlite3.Connection:
    target = ":memory:" if path is None else str(path)
    conn = sqlite3.connect(target, isolation_level=None, check_same_thread=False, timeout=30)
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


class SQLiteStore(AgentsMixin, SessionsMixin, LogMixin, ExtrasMixin, HarnessStateMixin, WorkMixin):
    """SQLite-backed store. Open with :func:`open_sqlite_store`."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._writer = _connect(path)
        self._write_limiter = trio.CapacityLimiter(1)
        self._readers: list[sqlite3.Connection] = []
        self._read_limiter = self._write_limiter
        if path is not None:
            self._readers = [_connect(path) for _ in range(_READERS)]
            self._read_limiter = trio.CapacityLimiter(_READERS)
        _migrate(self._writer)
        # Connections a worker thread is using right now, and how many threads: close()
        # leaves those to the last thread out (see _use).
        self._guard = threading.Lock()
        self._in_use: dict[sqlite3.Connection, int] = {}
        self._closed = False
        self._abandoned = False
        self._waits: set[trio.CancelScope] = set()
        # Group commit (see _write): writes waiting for the writer, whether a batch is
        # being committed, and where the waiters park meanwhile.
        self._queued: list[WriteJob] = []
        self._committing = False
        self._committed = trio.lowlevel.ParkingLot()

    async def owner_info(self) -> str | None:
        """Who owns the database file (``pid N on HOST``), for error messages."""
        return await trio.to_thread.run_sync(read_lock_owner, self.path)

    @property
    def kind(self) -> str:
        return "sqlite" if self.path is not None else "memory"

    async def ping(self) -> None:
        """Check that the database answers."""
        await self._read(lambda c: c.execute("SELECT 1").fetchone())

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
            return fn(conn)
        finally:
            with self._guard:
                self._in_use[conn] -= 1
                if not self._in_use[conn]:
                    del self._in_use[conn]
                    if self._closed:
                        conn.close()  # the store closed while we worked: we are the last

    async def _in_thread(
        self,
        conn: sqlite3.Connection,
        fn: Callable[[sqlite3.Connection], T],
        limiter: trio.CapacityLimiter | None = None,
    ) -> T:
        """``fn(conn)`` in a worker thread: waited for, unless the store is abandoned.

        Shielded, so a cancelled caller still gets the result of a statement that ran
        (and sees the cancel at its next checkpoint); only :meth:`abandon` stops the
        wait.
        """
        if self._abandoned:
            raise RuntimeClosed("the store stopped waiting for the database at shutdown")
        with trio.CancelScope(shield=True) as wait:
            self._waits.add(wait)
            try:
                return await trio.to_thread.run_sync(
                    self._use, conn, fn, limiter=limiter, abandon_on_cancel=True
                )
            finally:
                self._waits.discard(wait)
        raise RuntimeClosed("the store stopped waiting for the database at shutdown")

    async def _write(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``fn`` in a write transaction, shared with the writes queued meanwhile.

        See :mod:`._sqlite_commit`: the caller that finds the writer free runs every
        queued write in one thread hop and one transaction (one rerun alone if any fails);
        the others wait for it — shielded, as :meth:`_in_thread` — and get their own
        result or error.
        """
        if self._abandoned:
            raise RuntimeClosed("the store stopped waiting for the database at shutdown")
        job = WriteJob(fn)
        self._queued.append(job)
        with trio.CancelScope(shield=True) as wait:
            self._waits.add(wait)
            try:
                while job.result is None:
                    if self._committing:
                        await self._committed.park()
                        continue
                    batch = self._queued[:MAX_BATCH]
                    del self._queued[:MAX_BATCH]
                    self._committing = True
                    try:
                        results = await trio.to_thread.run_sync(
                            self._use,
                            self._writer,
                            partial(run_batch, jobs=batch),
                            limiter=self._write_limiter,
                            abandon_on_cancel=True,
                        )
                    finally:
                        self._committing = False
                        self._committed.unpark_all()
                    for queued, result in zip(batch, results, strict=True):
                        queued.result = result
            finally:
                self._waits.discard(wait)
        if job.result is None:  # abandoned while waiting
            raise RuntimeClosed("the store stopped waiting for the database at shutdown")
        return cast(T, job.result.unwrap())

    async def _read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        if not self._readers:
            return await self._in_thread(self._writer, fn, self._read_limiter)
        async with self._read_limiter:
            conn = self._readers.pop()
            try:
                return await self._in_thread(conn, fn)
            finally:
                self._readers.append(conn)


@asynccontextmanager
async def open_sqlite_store(
    path: Path | None, *, exclusive: bool = True
) -> AsyncIterator[SQLiteStore]:
    """Open (creating and migrating as needed) the store at ``path``; ``None``: memory.

    Args:
        path: the database file, or ``None`` for a private in-memory database.
        exclusive: hold an advisory lock beside the file for as long as the store is
            open. One runtime at a time may run turns on a file (their event ids and
            recovery would collide); a records-only runtime opens it with ``False``.

    Raises:
        StoreBusy: ``exclusive`` and another process holds the file.

    Resource handling: the connections (and the lock) are released when the block
    exits, however it exits.
    """
    if path is not None:
        await trio.to_thread.run_sync(lambda: path.parent.mkdir(parents=True, exist_ok=True))
    async with _exclusive_lock(path if exclusive else None):
        store = await trio.to_thread.run_sync(SQLiteStore, path)
        try:
            yield store
        finally:
            store.close()


def read_lock_owner(path: Path | None) -> str | None:
    """Who holds the lock beside ``path`` (``pid N on HOST``), if anyone wrote it."""
    if path is None:
        return None
    try:
        text = path.with_name(path.name + ".lock").read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None
    return text or None


@asynccontextmanager
async def _exclusive_lock(path: Path | None) -> AsyncIterator[None]:
    """Hold an advisory lock on ``<path>.lock`` while the block runs.

    Raises:
        StoreBusy: another process holds it.
    """
    if path is None:
        yield
        return
    lock_path = path.with_name(path.name + ".lock")

    def acquire() -> int:
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise StoreBusy(str(path), read_lock_owner(path)) from None
        # Who holds it, for the messages of those refused (best effort).
        os.ftruncate(fd, 0)
        os.write(fd, f"pid {os.getpid()} on {socket.gethostname()}".encode())
        return fd

    fd = await trio.to_thread.run_sync(acquire)
    try:
        yield
    finally:
        os.close(fd)  # releases the lock
