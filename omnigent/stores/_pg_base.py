"""What every table family of the PostgreSQL store relies on: run work on a connection.

The store is assembled from one mixin per table family (``_pg_agents``,
``_pg_sessions``, ``_pg_log``, ``_pg_extras``, ``_pg_cluster``), as the SQLite store
is; each needs only to run a function on a pooled connection — inside a transaction,
or as single autocommitted statements. This base declares those calls so the mixins
type-check on their own; :class:`~.postgres.PostgresStore` supplies the real pool and
call plumbing.

Single statements are preferred everywhere: on an autocommit connection one
statement is one transaction *and* one network round trip, where ``BEGIN`` … ``COMMIT``
costs two more.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar, TypeVar

import psycopg
from psycopg.rows import TupleRow

from ._sql import POSTGRES, Dialect, SQLBase, SQLConn

__all__ = ["Conn", "PGBase"]

T = TypeVar("T")

#: A pooled connection; rows are plain tuples (``Any`` at the database boundary).
Conn = psycopg.Connection[TupleRow]


class PGBase(SQLBase):
    """The calls a table mixin may make; :class:`~.postgres.PostgresStore` defines them.

    The shared mixins' hooks (:class:`~._sql.SQLBase`) run on them: reads and
    one-statement writes autocommitted, several statements in one transaction. Reads
    are cancellable; writes are waited for until the store's timeout.
    """

    dialect: ClassVar[Dialect] = POSTGRES

    #: This process's instance key when it is a cluster member (writes are fenced by
    #: its leases), ``None`` for a plain store (tests, records-only runtimes).
    instance: str | None = None

    async def _read(self, fn: Callable[[Conn], T]) -> T:
        """Run ``fn`` (reads only) on a pooled autocommit connection; cancellable."""
        raise NotImplementedError

    async def _run(self, fn: Callable[[Conn], T], *, cancellable: bool = False) -> T:
        """Run ``fn`` on a pooled autocommit connection (each statement commits).

        For single-statement writes: waited for through a cancel, until the store's
        timeout — unless ``cancellable`` (a write that may be abandoned).
        """
        raise NotImplementedError

    async def _transaction(self, fn: Callable[[Conn], T]) -> T:
        """Run ``fn`` on a pooled connection inside one transaction."""
        raise NotImplementedError

    async def _run_events(self, fn: Callable[[Conn], T]) -> T:
        """As :meth:`_run`, for the event writer's batches: on connections kept for
        them, so that a batch never queues behind other calls for a connection."""
        raise NotImplementedError

    async def _sql_read(self, fn: Callable[[SQLConn], T]) -> T:
        return await self._read(fn)

    async def _sql_write_one(self, fn: Callable[[SQLConn], T]) -> T:
        return await self._run(fn)

    async def _sql_write(self, fn: Callable[[SQLConn], T]) -> T:
        return await self._transaction(fn)
