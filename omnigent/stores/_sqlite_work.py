"""The SQLite store's sub-agent work entries, and the inbox reads that vet items first.

The statements both stores share, and the exactly-once contract of finishing an
entry, are in :class:`~._sql_work.SQLWorkMixin`; here is what SQLite spells its own.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import ClassVar

from ._rows import WorkRow
from ._sql_work import WORK_COLUMNS, SQLWorkMixin, undelivered, work_values
from ._sqlite_base import SQLiteBase

__all__ = ["WorkMixin"]


class WorkMixin(SQLWorkMixin, SQLiteBase):
    """Sub-agent work and inbox-vetting methods of :class:`~.sqlite.SQLiteStore`."""

    # SQLite's table has no ``seq`` column: its rowid keeps the insertion order.
    _work_seq: ClassVar[str] = "rowid"

    async def insert_work(self, row: WorkRow) -> None:
        def write(c: sqlite3.Connection) -> None:
            c.execute(
                f"INSERT INTO subagent_work ({WORK_COLUMNS}) VALUES ({self.dialect.marks(10)})",
                work_values(row),
            )

        await self._write(write)

    async def ack_inbox(self, session_id: str, item_ids: Sequence[str]) -> int:
        ids = list(item_ids)

        def write(c: sqlite3.Connection) -> int:
            c.executemany(
                "UPDATE inbox SET delivered = 1 WHERE session_id = ? AND id = ?",
                [(session_id, i) for i in ids],
            )
            return undelivered(c, self.dialect, session_id)

        return await self._write(write)
