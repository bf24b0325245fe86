"""The PostgreSQL store: several omnigent servers on one database.

Every call runs psycopg 3's *sync* API in a worker thread (``trio.to_thread``) on a
connection from a :class:`psycopg_pool.ConnectionPool` — psycopg's async API is
asyncio-only, and a thread hop is what the SQLite store pays too. A
``CapacityLimiter`` as large as the pool keeps threads from queueing inside the pool.
Connections are in autocommit mode: most methods are one statement, which is one
transaction and one network round trip (``append_events`` writes a whole batch of
events, the sessions' heads and the notification in one statement).

The event writer's batches have connections of their own: the pool holds
``pool_size`` + :data:`EVENT_CONNECTIONS`, and a second limiter of
:data:`EVENT_CONNECTIONS` admits only ``append_events``. Every publish waits on the
batch in flight, so it must not queue behind the other calls of two hundred turns
starting at once (issue 32: that wait was two thirds of a batch's round trip).

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
  is asked to cancel its statement (``cancel_safe``, from a worker thread, bounded).
* A **write** is shielded — a cancelled caller still waits for it, then sees the
  cancel at its next checkpoint — but only until the timeout; then it is cancelled on
  the server too and the caller gets :class:`~omnigent.errors.StoreTimeout`
  (``unknown=True``: it may have committed first). A write safe to abandon (the lease
  heartbeat: a late one only extends leases) is cancellable as a read is.
* The server holds each connection to the same bounds: ``statement_timeout`` is the
  timeout, ``lock_timeout`` half of it. A statement ended by either has written
  nothing, and raises ``StoreTimeout`` (``unknown=False``).

Each method is one transaction.

This module owns the pool, the migrations and the thread plumbing; the methods come
from one mixin per table family, as in the SQLite store.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from functools import partial
from typing import TypeVar

import attrs
import psycopg
import trio
from psycopg.conninfo import conninfo_to_dict
from psycopg_pool import ConnectionPool, PoolTimeout

from ..errors import BadRequest, RuntimeClosed, StoreTimeout, StoreUnavailable
from ._pg_agents import AgentsMixin
from ._pg_base import Conn
from ._pg_cluster import ClusterMixin
from ._pg_conninfo import CONNECT_TIMEOUT, connection_info
from ._pg_extras import ExtrasMixin
from ._pg_log import LogMixin
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
#: one batch in flight; the second lets its retry start while an attempt it gave up
#: still holds the first (a thread keeps its limiter token until it ends).
EVENT_CONNECTIONS = 2
_FIRST_DELAY = 0.05
_MAX_DELAY = 1.0
# How long a cancelled call waits for the server to take its cancel request.
_CANCEL_WAIT = 1.0
_ABANDONED = "the store stopped waiting for the database at shutdown"


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
        pool: ConnectionPool[Conn],
        instance: str | None,
        pool_size: int,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> None:
        self.url = url
        self.instance = instance
        self.timeout = timeout
        self._pool = pool
        # Two limiters over one pool of pool_size + EVENT_CONNECTIONS (the module
        # docstring): a batch of events never waits behind the other calls.
        self._limiter = trio.CapacityLimiter(pool_size)
        self._event_limiter = trio.CapacityLimiter(EVENT_CONNECTIONS)
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
        await self._read(lambda c: c.execute("SELECT 1").fetchone())

    # -- thread plumbing -------------------------------------------------------------

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
        """Run ``fn`` in a thread, retrying a lost connection with backoff."""
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
                await trio.to_thread.run_sync(
                    self._pool.check, limiter=limiter, abandon_on_cancel=True
                )
                await trio.sleep(delay)
                delay = min(delay * 2, _MAX_DELAY)

    async def _attempt(
        self,
        fn: Callable[[Conn], T],
        limiter: trio.CapacityLimiter,
        transaction: bool,
        sent: _Sent,
    ) -> T:
        """One try on a pooled connection, in a worker thread.

        Cancellation: the wait ends at once (the thread's result is abandoned), and the
        statement running, if any, is cancelled on the server.
        """
        held = _Held()

        def work() -> T:
            with self._pool.connection() as conn:
                with held.lock:
                    if held.stopped:
                        raise _Stopped
                    held.conn = conn
                sent.sent = True
                try:
                    if transaction:
                        with conn.transaction():
                            return fn(conn)
                    return fn(conn)
                finally:
                    with held.lock:
                        held.conn = None

        try:
            return await trio.to_thread.run_sync(work, limiter=limiter, abandon_on_cancel=True)
        except trio.Cancelled:
            await _cancel_on_server(held)
            raise


class _Stopped(Exception):
    """The call was given up before its thread had a connection (nobody waits)."""


@attrs.define(eq=False)
class _Sent:
    """Whether an attempt of the call got a connection (its statement may have run)."""

    sent: bool = False


@attrs.define(eq=False)
class _Held:
    """The connection one attempt's thread is running its statement on, if any."""

    lock: threading.Lock = attrs.field(factory=threading.Lock)
    conn: Conn | None = None
    stopped: bool = False


async def _cancel_on_server(held: _Held) -> None:
    """Ask the server to cancel what ``held``'s connection is running (bounded).

    The cancel is sent under ``held.lock``: the attempt's thread cannot give the
    connection back to the pool (and another call start on it) before it lands.
    """
    with held.lock:
        held.stopped = True
        running = held.conn is not None
    if not running:
        return

    def cancel() -> None:
        with held.lock:
            if held.conn is not None:
                try:
                    held.conn.cancel_safe(timeout=_CANCEL_WAIT)
                except psycopg.Error as exc:
                    log.warning("could not cancel a statement given up: %s", exc)

    with trio.CancelScope(shield=True) as scope:
        scope.deadline = trio.current_time() + _CANCEL_WAIT
        await trio.to_thread.run_sync(cancel, abandon_on_cancel=True)


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
        pool_size: the most connections (and threads) in use at once by calls other
            than ``append_events``, which has :data:`EVENT_CONNECTIONS` more.
        timeout: how long a call is waited for at most, in seconds; the server's
            ``statement_timeout`` on every pooled connection (``lock_timeout``: half).

    Raises:
        BadRequest: the URL cannot be parsed. StoreUnavailable: the database cannot
        be reached.

    Resource handling: the pool (and every connection) is closed when the block
    exits, however it exits.
    """
    try:
        conninfo = connection_info(url)
    except psycopg.ProgrammingError as exc:
        raise BadRequest(f"invalid PostgreSQL URL: {exc}") from None
    pool: ConnectionPool[Conn] = ConnectionPool(
        conninfo,
        min_size=min(2, pool_size),
        max_size=pool_size + EVENT_CONNECTIONS,
        open=False,
        kwargs={"autocommit": True},
        configure=partial(_configure, timeout=timeout),
        timeout=CONNECT_TIMEOUT,
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
        await trio.to_thread.run_sync(lambda: pool.open(wait=True, timeout=CONNECT_TIMEOUT))
    except BaseException as exc:
        with trio.CancelScope(shield=True):
            await trio.to_thread.run_sync(pool.close)
        if isinstance(exc, psycopg.Error) and is_connection_error(exc):
            raise StoreUnavailable(location) from exc
        raise
    store = PostgresStore(url, pool, instance, pool_size, timeout)
    try:
        yield store
    finally:
        with trio.CancelScope(shield=True):
            await trio.to_thread.run_sync(pool.close)
