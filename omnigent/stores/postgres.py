"""The PostgreSQL store: several omnigent servers on one database.

Every call runs psycopg 3's *sync* API on the Trio thread, its database waits made
Trio's by a greenlet (:mod:`._pg_bridge`): no worker thread and no thread hop per
call — psycopg's async API is asyncio-only, and under 200 concurrent turns a call in
a worker thread cost this process four times the CPU (issue 32). Connections come
from a pool the Trio thread keeps (:mod:`._pg_pool`); a ``CapacityLimiter`` says how
many calls hold one at once. Connections are in autocommit mode: most methods are one
statement, which is one transaction and one network round trip (``append_events``
writes a whole batch of events, the sessions' heads and the notification in one
statement).

The event writer's batches have connections of their own: a second limiter of
:data:`EVENT_CONNECTIONS` admits only ``append_events``, beyond ``pool_size``. Every
publish waits on the batch in flight, so it must not queue behind the other calls of
two hundred turns starting at once (issue 32: that wait was two thirds of a batch's
round trip).

A lost connection (a restarted server, a network blip) is retried with backoff for up
to :data:`RETRY_WINDOW` seconds before :class:`~omnigent.errors.StoreUnavailable` is
raised. Writes are made safe to repeat (upserts, per-call tokens), so a retry after a
commit whose answer was lost changes nothing twice; a batch of events found already
written is recognised as such.

A store opened with an ``instance`` key is a cluster member: its event writes are
*fenced* — a session's events are written only while that instance holds the live
lease on the session's tree (see :mod:`._pg_cluster`), checked in the same statement.

Deadlines (every call is bounded by the store's ``timeout``, 30 s by default):

* A **read** is cancellable: a cancelled caller stops waiting at once, and the server
  is asked to cancel its statement (``cancel_safe``, from a worker thread, bounded);
  the connection, left mid-exchange, is closed rather than lent again.
* A **write** is shielded — a cancelled caller still waits for it, then sees the
  cancel at its next checkpoint — but only until the timeout; then it is cancelled on
  the server too and the caller gets :class:`~omnigent.errors.StoreTimeout`
  (``unknown=True``: it may have committed first). A write safe to abandon (the lease
  heartbeat: a late one only extends leases) is cancellable as a read is.
* The server holds each connection to the same bounds: ``statement_timeout`` is the
  timeout, ``lock_timeout`` half of it. A statement ended by either has written
  nothing, and raises ``StoreTimeout`` (``unknown=False``).

Each method is one transaction.

This module owns the calls' plumbing and the migrations; the methods come from one
mixin per table family, as in the SQLite store.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from functools import partial
from typing import TypeVar

import attrs
import psycopg
import trio
from psycopg.conninfo import conninfo_to_dict

from .._grouped import Grouped
from ..errors import BadRequest, RuntimeClosed, StoreTimeout, StoreUnavailable
from ._pg_agents import AgentsMixin
from ._pg_base import Conn
from ._pg_bridge import BridgedConnection, run_bridged
from ._pg_cluster import ClusterMixin
from ._pg_conninfo import connection_info
from ._pg_extras import ExtrasMixin
from ._pg_log import LogMixin
from ._pg_pool import ConnectionPool
from ._pg_schema import MIGRATION_LOCK, MIGRATIONS
from ._pg_sessions import SessionsMixin
from ._pg_work import WorkMixin
from ._protocol import DEFAULT_TIMEOUT
from ._sql_usage import SQLUsageMixin

__all__ = [
    "EVENT_CONNECTIONS",
    "RETRY_WINDOW",
    "PostgresStore",
    "is_connection_error",
    "open_postgres_store",
]

log = logging.getLogger(__name__)

T = TypeVar("T")

#: How long a call retries a lost connection before giving up.
RETRY_WINDOW = 20.0
_POOL_SIZE = 8
#: Connections kept for the event writer's batches, beyond ``pool_size``. The bus has
#: one batch in flight; the second lets its retry start while the connection of an
#: attempt it gave up is still being discarded.
EVENT_CONNECTIONS = 2
_FIRST_DELAY = 0.05
_MAX_DELAY = 1.0
_ABANDONED = "the store stopped waiting for the database at shutdown"


def is_connection_error(exc: BaseException) -> bool:
    """Whether ``exc`` says the database could not be reached (worth a retry).

    Client-side failures (no SQLSTATE), class 08 (connection exception), and the
    server shutting down or starting up (57P01–57P03); not a failed statement.
    """
    if not isinstance(exc, psycopg.OperationalError):
        return False
    state = exc.sqlstate
    return state is None or state.startswith("08") or state in ("57P01", "57P02", "57P03")


def safe_location(url: str) -> str:
    """``url`` as messages may show it: without its password."""
    try:
        params = conninfo_to_dict(url)
    except psycopg.ProgrammingError:
        return "postgresql://(unparsable URL)"
    host = params.get("host", "localhost")
    port = params.get("port")
    where = f"{host}:{port}" if port else str(host)
    user = params.get("user")
    who = f"{user}@" if user else ""
    return f"postgresql://{who}{where}/{params.get('dbname', '')}"


def _configure(conn: Conn, *, timeout: float) -> None:
    """Bound each statement of a new pooled connection on the server too."""
    conn.execute(
        "SELECT set_config('statement_timeout', %s, false), set_config('lock_timeout', %s, false)",
        (f"{int(timeout * 1000)}ms", f"{int(timeout * 500)}ms"),
    )


def _migrate(conn: Conn) -> None:
    """Apply the missing migrations in one transaction, under the migration lock."""
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
        conn.execute(
            "CREATE TABLE IF NOT EXISTS omnigent_migrations ("
            "version INTEGER PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())"
        )
        done = {int(r[0]) for r in conn.execute("SELECT version FROM omnigent_migrations")}
        for number, script in enumerate(MIGRATIONS, start=1):
            if number in done:
                continue
            conn.execute(script)
            conn.execute("INSERT INTO omnigent_migrations (version) VALUES (%s)", (number,))
            log.info("applied migration %d", number)


class PostgresStore(
    AgentsMixin, SessionsMixin, LogMixin, ExtrasMixin, WorkMixin, ClusterMixin, SQLUsageMixin
):
    """PostgreSQL-backed store. Open with :func:`open_postgres_store`."""

    def __init__(
        self,
        url: str,
        pool: ConnectionPool,
        instance: str | None,
        pool_size: int,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> None:
        self.url = url
        self.instance = instance
        self.timeout = timeout
        self._pool = pool
        # Two limiters over one pool (the module docstring): a batch of events never
        # waits behind the other calls.
        self._limiter = trio.CapacityLimiter(pool_size)
        self._event_limiter = trio.CapacityLimiter(EVENT_CONNECTIONS)
        self._abandoned = False
        self._waits: set[trio.CancelScope] = set()
        # Reads a turn's start makes, asked at the same moment, go together.
        self._session_reads = Grouped(self._read_session_rows, shielded=False)
        self._history_reads = Grouped(self._read_histories, shielded=False)

    @property
    def location(self) -> str:
        """The database, as messages name it (no password)."""
        return safe_location(self.url)

    async def owner_info(self) -> str | None:
        """PostgreSQL databases are shared, not owned: there is no one owner to name."""
        return None

    kind = "postgresql"

    def abandon(self) -> int:
        """Stop waiting for statements in flight; returns how many were waited on.

        For a shutdown past its grace (an unreachable database): each waiting caller
        gets ``RuntimeClosed`` at once, and so does every later call; their
        connections are cancelled on the server and closed in the background.
        """
        self._abandoned = True
        for scope in self._waits:
            scope.cancel()
        return len(self._waits)

    async def ping(self) -> None:
        """Check that the database answers (retrying a lost connection, as every call)."""
        await self._read(lambda c: c.execute("SELECT 1").fetchone())

    # -- call plumbing ---------------------------------------------------------------

    async def _read(self, fn: Callable[[Conn], T]) -> T:
        return await self._call(fn, self._limiter, transaction=False, shielded=False)

    async def _run(self, fn: Callable[[Conn], T], *, cancellable: bool = False) -> T:
        return await self._call(fn, self._limiter, transaction=False, shielded=not cancellable)

    async def _transaction(self, fn: Callable[[Conn], T]) -> T:
        return await self._call(fn, self._limiter, transaction=True, shielded=True)

    async def _run_events(self, fn: Callable[[Conn], T]) -> T:
        return await self._call(fn, self._event_limiter, transaction=False, shielded=True)

    async def _call(
        self,
        fn: Callable[[Conn], T],
        limiter: trio.CapacityLimiter,
        *,
        transaction: bool,
        shielded: bool,
    ) -> T:
        """``fn`` on a pooled connection, bounded by the store's timeout.

        Raises:
            StoreTimeout: no answer within the timeout, or the server ended the
                statement at its own bounds. StoreUnavailable: the database could
                not be reached for :data:`RETRY_WINDOW`. RuntimeClosed: abandoned.

        Cancellation: ``shielded`` (a write) waits through a cancel until the
        timeout; otherwise returns at once. Either way a statement given up is
        cancelled on the server.
        """
        if self._abandoned:
            raise RuntimeClosed(_ABANDONED)
        sent = _Sent()
        with trio.CancelScope(shield=shielded) as wait:
            wait.deadline = trio.current_time() + self.timeout
            self._waits.add(wait)
            try:
                return await self._retrying(fn, limiter, transaction, sent)
            finally:
                self._waits.discard(wait)
        if self._abandoned:
            raise RuntimeClosed(_ABANDONED)
        raise StoreTimeout(self.location, self.timeout, unknown=shielded and sent.sent)

    async def _retrying(
        self,
        fn: Callable[[Conn], T],
        limiter: trio.CapacityLimiter,
        transaction: bool,
        sent: _Sent,
    ) -> T:
        """Run ``fn``, retrying a lost connection with backoff."""
        delay = _FIRST_DELAY
        deadline = trio.current_time() + RETRY_WINDOW
        while True:
            try:
                return await self._attempt(fn, limiter, transaction, sent)
            except (psycopg.errors.QueryCanceled, psycopg.errors.LockNotAvailable) as exc:
                # The server's statement_timeout or lock_timeout: nothing was written.
                raise StoreTimeout(self.location, self.timeout) from exc
            except psycopg.Error as exc:
                if not is_connection_error(exc):
                    raise
                if trio.current_time() + delay > deadline:
                    raise StoreUnavailable(self.location) from exc
                log.warning("database connection lost (%s); retrying in %.2f s", exc, delay)
                # Idle connections died with the one that failed: drop them now.
                self._pool.drop_idle()
                await trio.sleep(delay)
                delay = min(delay * 2, _MAX_DELAY)

    async def _attempt(
        self,
        fn: Callable[[Conn], T],
        limiter: trio.CapacityLimiter,
        transaction: bool,
        sent: _Sent,
    ) -> T:
        """One try on a pooled connection, on this thread (:mod:`._pg_bridge`).

        Cancellation: the wait ends at once, and the connection — mid-exchange — is
        discarded: its statement, if running, is cancelled on the server (in the
        background) and it is closed.
        """
        async with limiter:
            conn = await self._pool.take()
            sent.sent = True
            try:
                if transaction:
                    result = await run_bridged(partial(_in_transaction, fn), conn)
                else:
                    result = await run_bridged(fn, conn)
            except Exception:
                self._pool.give_back(conn)  # the exchange ended: kept if sound
                raise
            except BaseException:
                self._pool.discard(conn)  # mid-exchange: cancelled on the server, closed
                raise
            self._pool.give_back(conn)
            return result


def _in_transaction(fn: Callable[[Conn], T], conn: Conn) -> T:
    with conn.transaction():
        return fn(conn)


@attrs.define(eq=False)
class _Sent:
    """Whether an attempt of the call got a connection (its statement may have run)."""

    sent: bool = False


@asynccontextmanager
async def open_postgres_store(
    url: str,
    *,
    instance: str | None = None,
    pool_size: int = _POOL_SIZE,
    timeout: float = DEFAULT_TIMEOUT,
) -> AsyncIterator[PostgresStore]:
    """Open (migrating as needed) the store at ``url`` for as long as the block runs.

    Args:
        url: a libpq URL (``postgresql://user:pass@host:5432/db``) or conninfo string.
        instance: this process's cluster instance key; its event writes are then
            fenced by its leases (``None``: a plain store, as SQLite's).
        pool_size: the most connections in use at once by calls other than
            ``append_events``, which has :data:`EVENT_CONNECTIONS` more.
        timeout: how long a call is waited for at most, in seconds; the server's
            ``statement_timeout`` on every pooled connection (``lock_timeout``: half).

    Raises:
        BadRequest: the URL cannot be parsed. StoreUnavailable: the database cannot
        be reached.

    Resource handling: the pool (and every connection) is closed when the block
    exits, however it exits, once the connections of calls given up are (each within
    a second).
    """
    try:
        conninfo = connection_info(url)
    except psycopg.ProgrammingError as exc:
        raise BadRequest(f"invalid PostgreSQL URL: {exc}") from None
    configure = partial(_configure, timeout=timeout)
    location = safe_location(url)

    def first_connection() -> BridgedConnection:
        # The pool's first connection is made here, plainly: a wrong database or
        # password fails at once with libpq's reason. It migrates before it is
        # bounded by the store's timeouts (a migration may wait for another's lock).
        conn = BridgedConnection.connect(conninfo, autocommit=True)
        try:
            _migrate(conn)
            configure(conn)
        except BaseException:
            conn.close()
            raise
        return conn

    try:
        first = await trio.to_thread.run_sync(first_connection)
    except psycopg.OperationalError as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else None
        raise StoreUnavailable(location, reason) from exc
    async with trio.open_nursery() as cleanup:
        pool = ConnectionPool(conninfo, configure, cleanup)
        pool.give_back(first)
        try:
            yield PostgresStore(url, pool, instance, pool_size, timeout)
        finally:
            pool.close()
