"""Reads on the SQLite store's reader connections: in worker threads, and cancellable.

A read runs in a worker thread on a connection no other thread is using. When its
caller is cancelled — a ``move_on_after`` around it, the store's deadline, a shutdown
that abandons the store — the caller stops waiting at once, the thread's result is
abandoned, and the statement is stopped: interrupted
(:meth:`sqlite3.Connection.interrupt`) if it is running, or, if it is waiting for a
lock, at the end of the current busy slice (:data:`BUSY_SLICE`; the read retries the
busy statement itself until its lock deadline, instead of leaving the wait to
SQLite's busy handler, which an interrupt does not reach).

A connection goes back to the pool only when its thread is done with it, so no two
threads ever share one. The ``CapacityLimiter`` as large as the pool stays held until
then too (trio keeps a thread's limiter token until the thread returns, abandoned or
not), so reads beyond the pool wait — cancellably — for a connection to come back.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
import time
from collections.abc import Callable
from typing import Any, Generic, TypeVar, cast

import attrs
import trio

__all__ = ["BUSY_SLICE", "ReaderPool", "is_busy"]

T = TypeVar("T")

BUSY_SLICE = 0.05
"""The busy timeout of a reader connection: how long one attempt waits for a lock."""


def is_busy(exc: sqlite3.OperationalError) -> bool:
    """Whether ``exc`` says a lock was not had in time (``SQLITE_BUSY``/``SQLITE_LOCKED``)."""
    code = getattr(exc, "sqlite_errorcode", None)
    if code is None:
        return "locked" in str(exc) or "busy" in str(exc)
    return code & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)


class _Stopped(Exception):
    """The read was cancelled before its thread took a connection (nobody waits)."""


@attrs.define(eq=False)
class _Read(Generic[T]):
    fn: Callable[[sqlite3.Connection], T]
    give_up: float  # time.monotonic() after which a busy statement is not retried
    conn: sqlite3.Connection | None = None  # set while the thread runs ``fn`` on it
    stopped: bool = False


class ReaderPool:
    """Connections for reads, each used by one worker thread at a time.

    Args:
        connections: the reader connections (for an in-memory store, its one
            connection, which ``use`` then serialises with the writer).
        use: runs a function on a connection in the calling worker thread, marking
            the connection in use (the store closes a connection in use only when
            its thread is done).
        guard: the store's lock over which connections are in use.
    """

    def __init__(
        self,
        connections: list[sqlite3.Connection],
        use: Callable[[sqlite3.Connection, Callable[[sqlite3.Connection], Any]], Any],
        guard: threading.Lock,
    ) -> None:
        self._idle = list(connections)
        self._use = use
        self._guard = guard
        self._limiter = trio.CapacityLimiter(len(connections))

    async def read(self, fn: Callable[[sqlite3.Connection], T], lock_wait: float) -> T:
        """``fn`` on a free connection, in a worker thread.

        Args:
            lock_wait: how long a statement waiting for a lock is retried before its
                ``SQLITE_BUSY`` error is raised.

        Cancellation: returns at once; the thread's result is abandoned and its
        statement stopped (see the module docstring).
        """
        read = _Read(fn, time.monotonic() + lock_wait)
        try:
            return await trio.to_thread.run_sync(
                self._run, read, limiter=self._limiter, abandon_on_cancel=True
            )
        except trio.Cancelled:
            self._stop(read)
            raise

    def _stop(self, read: _Read[T]) -> None:
        with self._guard:
            read.stopped = True
            if read.conn is not None:
                # Under the guard: the thread cannot give the connection back (and
                # another read start on it) before the interrupt lands on this one.
                with contextlib.suppress(sqlite3.ProgrammingError):  # the store closed
                    read.conn.interrupt()

    # -- in the worker thread --------------------------------------------------------

    def _run(self, read: _Read[T]) -> T:
        with self._guard:
            if read.stopped:
                raise _Stopped
            conn = self._idle.pop()  # the limiter guarantees one is free
        try:
            return cast(T, self._use(conn, lambda c: self._attempts(read, c)))
        finally:
            with self._guard:
                self._idle.append(conn)

    def _attempts(self, read: _Read[T], conn: sqlite3.Connection) -> T:
        with self._guard:
            if read.stopped:
                raise _Stopped
            read.conn = conn
        try:
            while True:
                try:
                    return read.fn(conn)
                except sqlite3.OperationalError as exc:
                    if not is_busy(exc) or read.stopped or time.monotonic() >= read.give_up:
                        raise
        finally:
            with self._guard:
                read.conn = None
