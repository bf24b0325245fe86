"""The PostgreSQL store's connections, kept by the Trio thread and lent one call at a time.

Connections are :class:`~._pg_bridge.BridgedConnection` s: a call runs on the Trio
thread, so lending and returning one is a list operation, not a thread hand-off (the
store's limiters say how many calls may hold one at once; the pool opens a new
connection when none is idle, and never holds more than those calls had at once).
Only making a connection runs in a worker thread: libpq's connect resolves names and
has waits of its own.

A connection comes back idle (no transaction open, not broken) to be lent again;
otherwise it is closed. One whose call was given up mid-exchange is *discarded*: the
statement it may still be running is cancelled on the server, then it is closed, in a
worker thread, bounded by :data:`CANCEL_WAIT` — a task of the nursery the pool is
given, so the call given up returns at once. After a lost connection the store drops
the idle ones too (they died with it) and the next call connects afresh.

Resource handling: :meth:`ConnectionPool.close` closes the idle connections and every
lent one as it comes back; the owner's nursery waits for the discards (each bounded),
and a discarded connection is closed by its worker thread even when the wait for it
is given up.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

import attrs
import psycopg
import trio
from psycopg.pq import TransactionStatus

from ._pg_bridge import BridgedConnection

__all__ = ["CANCEL_WAIT", "ConnectionPool"]

log = logging.getLogger(__name__)

#: How long a discarded connection's statement may take to be cancelled on the server.
CANCEL_WAIT = 1.0


class ConnectionPool:
    """Idle connections to one database, lent and returned on the Trio thread."""

    def __init__(
        self,
        conninfo: str,
        configure: Callable[[BridgedConnection], None],
        cleanup: trio.Nursery,
    ) -> None:
        self._conninfo = conninfo
        self._configure = configure
        self._cleanup = cleanup
        self._idle: list[BridgedConnection] = []
        self._closed = False

    def connect(self) -> BridgedConnection:
        """A new configured autocommit connection (blocking: for a worker thread)."""
        conn = BridgedConnection.connect(self._conninfo, autocommit=True)
        try:
            self._configure(conn)
        except BaseException:
            conn.close()
            raise
        return conn

    async def take(self) -> BridgedConnection:
        """An idle connection, or a new one (made in a worker thread).

        Cancellation: a connection still being made when the wait is given up is
        closed by its thread.
        """
        if self._idle:
            return self._idle.pop()
        made = _Made()

        def connect() -> BridgedConnection:
            conn = self.connect()
            with made.lock:
                if made.abandoned:
                    conn.close()
                return conn

        try:
            return await trio.to_thread.run_sync(connect, abandon_on_cancel=True)
        except trio.Cancelled:
            with made.lock:
                made.abandoned = True
            raise

    def give_back(self, conn: BridgedConnection) -> None:
        """Keep a connection whose call ended (or one just made) if it is idle and
        sound; else close it."""
        if self._closed or conn.closed or conn.pgconn.transaction_status != TransactionStatus.IDLE:
            conn.close()
            return
        self._idle.append(conn)

    def discard(self, conn: BridgedConnection) -> None:
        """Cancel what ``conn`` may be running on the server, then close it — in the
        background (the pool's nursery), so that the call given up returns at once.

        For a connection whose call was given up mid-exchange: its state is unknown.
        The cancel request runs in a worker thread; after :data:`CANCEL_WAIT` the wait
        for it is given up, and the thread closes the connection when it ends.
        """
        self._cleanup.start_soon(self._cancel_and_close, conn)

    async def _cancel_and_close(self, conn: BridgedConnection) -> None:
        def cancel_and_close() -> None:
            try:
                if conn.pgconn.transaction_status == TransactionStatus.ACTIVE:
                    conn.cancel_safe(timeout=CANCEL_WAIT)
            except psycopg.Error as exc:
                log.warning("could not cancel a statement given up: %s", exc)
            finally:
                conn.close()

        with trio.CancelScope(shield=True) as scope:
            scope.deadline = trio.current_time() + CANCEL_WAIT
            await trio.to_thread.run_sync(cancel_and_close, abandon_on_cancel=True)

    def drop_idle(self) -> None:
        """Close every idle connection (after a lost one: they are likely lost too)."""
        idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()

    def close(self) -> None:
        """Close the idle connections now, and each lent one as it comes back."""
        self._closed = True
        self.drop_idle()


@attrs.define(eq=False)
class _Made:
    """Whether the caller gave up the wait for a connection being made."""

    lock: threading.Lock = attrs.field(factory=threading.Lock)
    abandoned: bool = False
