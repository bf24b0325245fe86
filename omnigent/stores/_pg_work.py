"""The PostgreSQL store's sub-agent work entries, and the inbox reads that vet items first.

The same table and meaning as the SQLite store's; the statements both share, and the
exactly-once contract of finishing an entry, are in :class:`~._sql_work.SQLWorkMixin`.
Here is what PostgreSQL spells its own: a retried insert (after a lost answer) changes
nothing, and inbox items are marked read in one statement.
"""

from __future__ import annotations

from collections.abc import Sequence

from ._pg_base import Conn, PGBase
from ._rows import WorkRow
from ._sql_work import WORK_COLUMNS, SQLWorkMixin, undelivered, work_values

__all__ = ["WorkMixin"]


class WorkMixin(SQLWorkMixin, PGBase):
    """Sub-agent work and inbox-vetting methods of :class:`~.postgres.PostgresStore`."""

    async def insert_work(self, row: WorkRow) -> None:
        await self._run(
            lambda c: c.execute(
                f"INSERT INTO subagent_work ({WORK_COLUMNS}) VALUES ({self.dialect.marks(10)}) "
                "ON CONFLICT (work_id) DO NOTHING",
                work_values(row),
            )
        )

    async def ack_inbox(self, session_id: str, item_ids: Sequence[str]) -> int:
        def write(c: Conn) -> int:
            c.execute(
                "UPDATE inbox SET delivered = TRUE WHERE session_id = %s AND id = ANY(%s)",
                (session_id, list(item_ids)),
            )
            return undelivered(c, self.dialect, session_id)

        return await self._transaction(write)
