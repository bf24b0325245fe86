"""What every table family of the SQLite store relies on: run work in a thread.

The store is assembled from one mixin per table family (``_sqlite_agents``,
``_sqlite_sessions``, ``_sqlite_log``, ``_sqlite_extras``); each needs only to run a
function on a connection, inside a write transaction or on a reader. This base declares
those two methods so the mixins type-check on their own; :class:`~.sqlite.SQLiteStore`
supplies the real thread plumbing.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import ClassVar, TypeVar

from ._sql import SQLITE, Dialect, SQLBase, SQLConn

__all__ = ["SQLiteBase"]

T = TypeVar("T")


class SQLiteBase(SQLBase):
    """The two calls a table mixin may make; :class:`~.sqlite.SQLiteStore` defines them.

    The shared mixins' hooks (:class:`~._sql.SQLBase`) run on them: a read on a reader,
    every write in the writer's transaction.
    """

    dialect: ClassVar[Dialect] = SQLITE

    async def _write(
        self,
        fn: Callable[[sqlite3.Connection], T],
        on_committed: Callable[[], None] | None = None,
    ) -> T:
        """Run ``fn`` on the writer connection inside one ``BEGIN IMMEDIATE`` transaction
        (``on_committed``: called on the event loop once it committed)."""
        raise NotImplementedError

    async def _read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``fn`` on a reader connection (beside the writer, under WAL)."""
        raise NotImplementedError

    async def _sql_read(self, fn: Callable[[SQLConn], T]) -> T:
        return await self._read(fn)

    async def _sql_write_one(self, fn: Callable[[SQLConn], T]) -> T:
        return await self._write(fn)

    async def _sql_write(self, fn: Callable[[SQLConn], T]) -> T:
        return await self._write(fn)
