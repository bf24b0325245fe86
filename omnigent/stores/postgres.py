"""The PostgreSQL store: several omnigent servers on one database.

Every call runs psycopg 3's *sync* API in a worker thread (``trio.to_thread``) on a
connection from a :class:`psycopg_pool.ConnectionPool` — psycopg's async API is
asyncio-only, and a thread hop is what the SQLite store pays too. A
``CapacityLimiter`` as large as the pool keeps threads from queueing inside the pool.
Connections are in autocommit mode: most methods are one statement, which is one
transaction and one network round trip (``append_events`` writes a whole batch of
events, the sessions' heads and the notification in one statement).

A lost connection (a restarted server, a network blip) is retried with backoff for up
to :data:`RETRY_WINDOW` seconds before :class:`~omnigent.errors.StoreUnavailable` is
raised. Writes are made safe to repeat (upserts, per-call tokens), so a retry after a
commit whose answer was lost changes nothing twice; a batch of events found already
written is recognised as such.

A store opened with an ``instance`` key is a cluster member: its event writes are
*fenced* — a session's events are written only while that instance holds the live
lease on the session's tree (see :mod:`._pg_cluster`), checked in the same statement.

Cancellation: a thread call cannot be interrupted; a cancelled caller waits for the
statement it started, then sees ``trio.Cancelled``. Each method is one transaction.

This module owns the pool, the migrations and the thread plumbing; the methods come
from one mixin per table family, as in the SQLite store.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import TypeVar

import psycopg
import trio
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg_pool import ConnectionPool, PoolTimeout

from ..errors import BadRequest, RuntimeClosed, StoreUnavailable
from ._pg_agents import AgentsMixin
from ._pg_base import Conn
from ._pg_cluster import ClusterMixin
from ._pg_extras import ExtrasMixin
from ._pg_log import LogMixin
from ._pg_schema import MIGRATION_LOCK, MIGRATIONS
from ._pg_sessions import SessionsMixin
from ._pg_work import WorkMixin

__all__ = ["RETRY_WINDOW", "PostgresStore", "is_connection_error", "open_postgres_store"]

log = logging.getLogger(__name__)

T = TypeVar("T")

#: How long a call retries a lost connection before giving up.
RETRY_WINDOW = 20.0
_POOL_SIZE = 8
_CONNECT_TIMEOUT = 5
_FIRST_DELAY = 0.05
_MAX_DELAY = 1.0


def is_connection_error(exc: BaseException) -> bool:
    """Whether ``exc`` says the database could not be reached (worth a retry).

    Client-side failures (no SQLSTATE), class 08 (connection exception), and the
    server shutting down or starting up (57P01–57P03); not a failed statement.
    """
    if isinstance(exc, PoolTimeout):
        return True
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


class PostgresStore(AgentsMixin, SessionsMixin, LogMixin, ExtrasMixin, WorkMixin, ClusterMixin):
    """PostgreSQL-backed store. Open with :func:`open_postgres_store`."""

    def __init__(
        self, url: str, pool: ConnectionPool[Conn], instance: str | None, pool_size: int
    ) -> None:
        self.url = url
        self.instance = instance
        self._pool = pool
        self._limiter = trio.CapacityLimiter(pool_size)
        self._abandoned = False
        self._waits: set[trio.CancelScope] = set()

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
        gets ``RuntimeClosed`` at once, and so does every later call; the statements
        finish (or time out) in their threads, and the pool closes their connections
        when they come back.
        """
        self._abandoned = True
        for scope in self._waits:
            scope.cancel()
        return len(self._waits)

    async def ping(self) -> None:
        """Check that the database answers (retrying a lost connection, as every call)."""
        await self._run(lambda c: c.execute("SELECT 1").fetchone())

    # -- thread plumbing -------------------------------------------------------------

    async def _run(self, fn: Callable[[Conn], T]) -> T:
        def work() -> T:
            with self._pool.connection() as conn:
                return fn(conn)

        return await self._retrying(work)

    async def _transaction(self, fn: Callable[[Conn], T]) -> T:
        def work() -> T:
            with self._pool.connection() as conn, conn.transaction():
                return fn(conn)

        return await self._retrying(work)

    async def _retrying(self, work: Callable[[], T]) -> T:
        """Run ``work`` in a thread, retrying a lost connection with backoff.

        Each attempt is waited for even by a cancelled caller (it gets the result,
        then sees the cancel at its next checkpoint) unless the store is abandoned.
        """
        delay = _FIRST_DELAY
        deadline = trio.current_time() + RETRY_WINDOW
        while True:
            try:
                return await self._in_thread(work)
            except psycopg.Error as exc:
                if not is_connection_error(exc):
                    raise
                if trio.current_time() + delay > deadline:
                    raise StoreUnavailable(self.location) from exc
                log.warning("database connection lost (%s); retrying in %.2f s", exc, delay)
                # Idle connections died with the one that failed: drop them now.
                await self._in_thread(self._pool.check)
                await trio.sleep(delay)
                delay = min(delay * 2, _MAX_DELAY)

    async def _in_thread(self, work: Callable[[], T]) -> T:
        if self._abandoned:
            raise RuntimeClosed("the store stopped waiting for the database at shutdown")
        with trio.CancelScope(shield=True) as wait:
            self._waits.add(wait)
            try:
                return await trio.to_thread.run_sync(
                    work, limiter=self._limiter, abandon_on_cancel=True
                )
            finally:
                self._waits.discard(wait)
        raise RuntimeClosed("the store stopped waiting for the database at shutdown")


@asynccontextmanager
async def open_postgres_store(
    url: str, *, instance: str | None = None, pool_size: int = _POOL_SIZE
) -> AsyncIterator[PostgresStore]:
    """Open (migrating as needed) the store at ``url`` for as long as the block runs.

    Args:
        url: a libpq URL (``postgresql://user:pass@host:5432/db``) or conninfo string.
        instance: this process's cluster instance key; its event writes are then
            fenced by its leases (``None``: a plain store, as SQLite's).
        pool_size: the most connections (and threads) in use at once.

    Raises:
        BadRequest: the URL cannot be parsed. StoreUnavailable: the database cannot
        be reached.

    Resource handling: the pool (and every connection) is closed when the block
    exits, however it exits.
    """
    try:
        conninfo = make_conninfo(url, connect_timeout=_CONNECT_TIMEOUT)
    except psycopg.ProgrammingError as exc:
        raise BadRequest(f"invalid PostgreSQL URL: {exc}") from None
    pool: ConnectionPool[Conn] = ConnectionPool(
        conninfo,
        min_size=min(2, pool_size),
        max_size=pool_size,
        open=False,
        kwargs={"autocommit": True},
        timeout=_CONNECT_TIMEOUT,
        reconnect_timeout=3600.0,
        name="omnigent",
    )
    location = safe_location(url)

    def first_connection() -> None:
        # One plain connection first: a wrong database or password fails here at
        # once with libpq's reason (a pool would keep retrying until its timeout).
        with psycopg.connect(conninfo, autocommit=True) as conn:
            _migrate(conn)

    try:
        await trio.to_thread.run_sync(first_connection)
    except psycopg.OperationalError as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else None
        raise StoreUnavailable(location, reason) from exc
    try:
        await trio.to_thread.run_sync(lambda: pool.open(wait=True, timeout=_CONNECT_TIMEOUT))
    except BaseException as exc:
        with trio.CancelScope(shield=True):
            await trio.to_thread.run_sync(pool.close)
        if isinstance(exc, psycopg.Error) and is_connection_error(exc):
            raise StoreUnavailable(location) from exc
        raise
    store = PostgresStore(url, pool, instance, pool_size)
    try:
        yield store
    finally:
        with trio.CancelScope(shield=True):
            await trio.to_thread.run_sync(pool.close)
