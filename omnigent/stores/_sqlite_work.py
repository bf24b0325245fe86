"""The SQLite store's sub-agent work entries, and the inbox reads that vet items first.

A work entry is one dispatch of work to a child session. It is finished exactly once:
:meth:`WorkMixin.finish_work` updates it only while it is open and writes the parent's
inbox item in the same transaction, so neither a late completion nor a retry after a
restart can deliver twice, and a crash can never leave a finished entry without its
item (or an item without its finished entry).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from .._ids import now
from ._rows import WORK_OPEN, WorkRow
from ._sqlite_base import SQLiteBase

__all__ = ["WorkMixin"]

_WORK_COLUMNS = (
    "work_id, parent_session_id, child_session_id, agent, title, message_id, status, "
    "output, created_at, finished_at"
)
_OPEN = "status IN ('launching', 'running')"
assert WORK_OPEN == ("launching", "running")  # _OPEN spells them out for SQL


def _work_row(r: sqlite3.Row) -> WorkRow:
    return WorkRow(*(r[i] for i in range(10)))


class WorkMixin(SQLiteBase):
    """Sub-agent work and inbox-vetting methods of :class:`~.sqlite.SQLiteStore`."""

    async def insert_work(self, row: WorkRow) -> None:
        def write(c: sqlite3.Connection) -> None:
            c.execute(
                f"INSERT INTO subagent_work ({_WORK_COLUMNS}) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    row.work_id,
                    row.parent_session_id,
                    row.child_session_id,
                    row.agent,
                    row.title,
                    row.message_id,
                    row.status,
                    row.output,
                    row.created_at,
                    row.finished_at,
                ),
            )

        await self._write(write)

    async def start_work(self, work_id: str) -> bool:
        def write(c: sqlite3.Connection) -> bool:
            cur = c.execute(
                "UPDATE subagent_work SET status = 'running' "
                "WHERE work_id = ? AND status = 'launching'",
                (work_id,),
            )
            return cur.rowcount > 0

        return await self._write(write)

    async def finish_work(
        self, work_id: str, status: str, output: str, inbox_id: str, inbox_data: str
    ) -> int | None:
        def write(c: sqlite3.Connection) -> int | None:
            row = c.execute(
                f"UPDATE subagent_work SET status = ?, output = ?, finished_at = ? "
                f"WHERE work_id = ? AND {_OPEN} RETURNING parent_session_id",
                (status, output, now(), work_id),
            ).fetchone()
            if row is None:
                return None
            parent = row[0]
            if c.execute("SELECT 1 FROM sessions WHERE id = ?", (parent,)).fetchone() is None:
                return None  # the parent was deleted: nobody to deliver to
            c.execute(
                "INSERT INTO inbox (id, session_id, data, created_at) VALUES (?, ?, ?, ?)",
                (inbox_id, parent, inbox_data, now()),
            )
            r = c.execute(
                "SELECT COUNT(*) FROM inbox WHERE session_id = ? AND delivered = 0", (parent,)
            ).fetchone()
            return int(r[0])

        return await self._write(write)

    async def drop_work(self, work_id: str) -> None:
        def write(c: sqlite3.Connection) -> None:
            c.execute("DELETE FROM subagent_work WHERE work_id = ?", (work_id,))

        await self._write(write)

    async def list_work(
        self,
        *,
        parent_session_id: str | None = None,
        child_session_id: str | None = None,
        open_only: bool = True,
    ) -> list[WorkRow]:
        where, args = ["1 = 1"], []
        if parent_session_id is not None:
            where.append("parent_session_id = ?")
            args.append(parent_session_id)
        if child_session_id is not None:
            where.append("child_session_id = ?")
            args.append(child_session_id)
        if open_only:
            where.append(_OPEN)
        sql = (
            f"SELECT {_WORK_COLUMNS} FROM subagent_work WHERE {' AND '.join(where)} "
            "ORDER BY created_at, rowid"
        )

        def read(c: sqlite3.Connection) -> list[WorkRow]:
            return [_work_row(r) for r in c.execute(sql, args)]

        return await self._read(read)

    # -- the inbox, vetted before it is marked read -----------------------------------

    async def peek_inbox(self, session_id: str, limit: int = 1000) -> list[tuple[str, str]]:
        def read(c: sqlite3.Connection) -> list[tuple[str, str]]:
            rows = c.execute(
                "SELECT id, data FROM inbox WHERE session_id = ? AND delivered = 0 "
                "ORDER BY seq LIMIT ?",
                (session_id, limit),
            ).fetchall()
            return [(r[0], r[1]) for r in rows]

        return await self._read(read)

    async def ack_inbox(self, session_id: str, item_ids: Sequence[str]) -> int:
        ids = list(item_ids)

        def write(c: sqlite3.Connection) -> int:
            c.executemany(
                "UPDATE inbox SET delivered = 1 WHERE session_id = ? AND id = ?",
                [(session_id, i) for i in ids],
            )
            r = c.execute(
                "SELECT COUNT(*) FROM inbox WHERE session_id = ? AND delivered = 0",
                (session_id,),
            ).fetchone()
            return int(r[0])

        return await self._write(write)

    async def sessions_with_inbox(self) -> list[str]:
        def read(c: sqlite3.Connection) -> list[str]:
            rows = c.execute("SELECT DISTINCT session_id FROM inbox WHERE delivered = 0")
            return [r[0] for r in rows]

        return await self._read(read)
