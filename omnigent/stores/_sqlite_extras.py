"""The SQLite store's side tables: the inbox, elicitations and uploaded files.

Each is small and independent of the others: the inbox buffers messages for a busy
session until a turn drains them; elicitations record questions put to a user, so a
restart can expire the ones nobody is waiting on; files hold uploaded content by id.
"""

from __future__ import annotations

import sqlite3

import attrs

from .._ids import now
from ._rows import FileRow, ProcessGroupRow
from ._sql_extras import SQLExtrasMixin
from ._sql_work import undelivered
from ._sqlite_base import SQLiteBase

__all__ = ["ExtrasMixin"]


class ExtrasMixin(SQLExtrasMixin, SQLiteBase):
    """File, inbox and elicitation methods of :class:`~.sqlite.SQLiteStore`."""

    # -- inbox -----------------------------------------------------------------------

    async def add_inbox_item(
        self, session_id: str, item_id: str, data: str, *, task_id: str | None = None
    ) -> int:
        """Persist one inbox item; returns the session's undelivered count.

        ``task_id`` names the running task (:meth:`add_running_task`) this item ends:
        its record goes in the same transaction, so a task is always either running
        or delivered, never neither.
        """

        def write(c: sqlite3.Connection) -> int:
            c.execute(
                "INSERT INTO inbox (id, session_id, data, created_at) VALUES (?, ?, ?, ?)",
                (item_id, session_id, data, now()),
            )
            if task_id is not None:
                c.execute("DELETE FROM running_tasks WHERE handle_id = ?", (task_id,))
            return undelivered(c, self.dialect, session_id)

        return await self._write(write)

    async def add_running_task(self, session_id: str, handle_id: str, tool: str) -> None:
        """Record a background task as running (until its inbox item is written)."""

        def write(c: sqlite3.Connection) -> None:
            c.execute(
                "INSERT OR REPLACE INTO running_tasks VALUES (?, ?, ?, ?)",
                (handle_id, session_id, tool, now()),
            )

        await self._write(write)

    # -- process groups ---------------------------------------------------------------

    async def put_process_group(self, row: ProcessGroupRow) -> None:
        """Record a process group a tool started (cleared when it is gone)."""

        def write(c: sqlite3.Connection) -> None:
            c.execute(
                "INSERT OR REPLACE INTO process_groups VALUES (?, ?, ?, ?, ?)",
                (row.pgid, row.start_time, row.boot_id, row.session_id, now()),
            )

        await self._write(write)

    async def drain_inbox(self, session_id: str) -> list[tuple[str, str]]:
        """Take every undelivered item ``(id, data)``, oldest first, marking it delivered."""

        def write(c: sqlite3.Connection) -> list[tuple[str, str]]:
            rows = c.execute(
                "SELECT id, data FROM inbox WHERE session_id = ? AND delivered = 0 ORDER BY seq",
                (session_id,),
            ).fetchall()
            c.execute(
                "UPDATE inbox SET delivered = 1 WHERE session_id = ? AND delivered = 0",
                (session_id,),
            )
            return [(r[0], r[1]) for r in rows]

        return await self._write(write)

    # -- elicitations ---------------------------------------------------------------

    async def insert_elicitation(self, elicitation_id: str, session_id: str, request: str) -> None:
        def write(c: sqlite3.Connection) -> None:
            c.execute(
                "INSERT INTO elicitations (id, session_id, status, request, created_at) "
                "VALUES (?, ?, 'pending', ?, ?)",
                (elicitation_id, session_id, request, now()),
            )

        await self._write(write)

    # -- files -----------------------------------------------------------------------

    async def put_file(self, row: FileRow, content: bytes) -> None:
        def write(c: sqlite3.Connection) -> None:
            c.execute(
                "INSERT INTO files VALUES (?, ?, ?, ?, ?, ?, ?)",
                (*attrs.astuple(row)[:5], content, row.created_at),
            )

        await self._write(write)
