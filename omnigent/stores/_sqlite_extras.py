"""The SQLite store's side tables: the inbox, elicitations and uploaded files.

Each is small and independent of the others: the inbox buffers messages for a busy
session until a turn drains them; elicitations record questions put to a user, so a
restart can expire the ones nobody is waiting on; files hold uploaded content by id.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

import attrs

from .._ids import now
from ._rows import FileRow, ProcessGroupRow, RunningTask
from ._sqlite_base import SQLiteBase

__all__ = ["ExtrasMixin"]


class ExtrasMixin(SQLiteBase):
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
            return self._undelivered(c, session_id)

        return await self._write(write)

    async def add_running_task(self, session_id: str, handle_id: str, tool: str) -> None:
        """Record a background task as running (until its inbox item is written)."""

        def write(c: sqlite3.Connection) -> None:
            c.execute(
                "INSERT OR REPLACE INTO running_tasks VALUES (?, ?, ?, ?)",
                (handle_id, session_id, tool, now()),
            )

        await self._write(write)

    async def running_tasks(self, session_ids: Sequence[str] | None = None) -> list[RunningTask]:
        """Every task recorded as running (of ``session_ids``), oldest first (for recovery)."""

        def read(c: sqlite3.Connection) -> list[RunningTask]:
            sql, args = "SELECT session_id, handle_id, tool FROM running_tasks", list[Any]()
            if session_ids is not None:
                sql += f" WHERE session_id IN ({', '.join('?' * len(session_ids))})"
                args += session_ids
            rows = c.execute(sql + " ORDER BY started_at", args).fetchall()
            return [RunningTask(r[0], r[1], r[2]) for r in rows]

        return await self._read(read)

    # -- process groups ---------------------------------------------------------------

    async def put_process_group(self, row: ProcessGroupRow) -> None:
        """Record a process group a tool started (cleared when it is gone)."""

        def write(c: sqlite3.Connection) -> None:
            c.execute(
                "INSERT OR REPLACE INTO process_groups VALUES (?, ?, ?, ?, ?)",
                (row.pgid, row.start_time, row.boot_id, row.session_id, now()),
            )

        await self._write(write)

    async def delete_process_group(self, pgid: int, start_time: int) -> None:
        await self._write(
            lambda c: c.execute(
                "DELETE FROM process_groups WHERE pgid = ? AND start_time = ?", (pgid, start_time)
            )
        )

    async def process_groups(
        self, session_ids: Sequence[str] | None = None
    ) -> list[ProcessGroupRow]:
        """Every recorded process group (of ``session_ids``), for recovery."""

        def read(c: sqlite3.Connection) -> list[ProcessGroupRow]:
            sql = "SELECT pgid, start_time, boot_id, session_id FROM process_groups"
            args: list[str] = []
            if session_ids is not None:
                sql += f" WHERE session_id IN ({', '.join('?' * len(session_ids))})"
                args += session_ids
            rows = c.execute(sql, args).fetchall()
            return [ProcessGroupRow(int(r[0]), int(r[1]), r[2], r[3]) for r in rows]

        return await self._read(read)

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

    async def inbox_count(self, session_id: str) -> int:
        return await self._read(lambda c: self._undelivered(c, session_id))

    @staticmethod
    def _undelivered(c: sqlite3.Connection, session_id: str) -> int:
        r = c.execute(
            "SELECT COUNT(*) FROM inbox WHERE session_id = ? AND delivered = 0", (session_id,)
        ).fetchone()
        return int(r[0])

    # -- elicitations ---------------------------------------------------------------

    async def insert_elicitation(self, elicitation_id: str, session_id: str, request: str) -> None:
        def write(c: sqlite3.Connection) -> None:
            c.execute(
                "INSERT INTO elicitations (id, session_id, status, request, created_at) "
                "VALUES (?, ?, 'pending', ?, ?)",
                (elicitation_id, session_id, request, now()),
            )

        await self._write(write)

    async def finish_elicitation(self, elicitation_id: str, status: str, action: str) -> None:
        def write(c: sqlite3.Connection) -> None:
            c.execute(
                "UPDATE elicitations SET status = ?, action = ?, resolved_at = ? WHERE id = ?",
                (status, action, now(), elicitation_id),
            )

        await self._write(write)

    async def get_elicitation(self, elicitation_id: str) -> dict[str, Any] | None:
        def read(c: sqlite3.Connection) -> dict[str, Any] | None:
            r = c.execute("SELECT * FROM elicitations WHERE id = ?", (elicitation_id,)).fetchone()
            return None if r is None else dict(r)

        return await self._read(read)

    async def expire_pending_elicitations(self, session_ids: Sequence[str] | None = None) -> int:
        """Mark pending elicitations expired (their waiters died with a process).

        Every one, or only those of ``session_ids``.
        """

        def write(c: sqlite3.Connection) -> int:
            sql = (
                "UPDATE elicitations SET status = 'expired', action = 'expired', "
                "resolved_at = ? WHERE status = 'pending'"
            )
            if session_ids is None:
                return c.execute(sql, (now(),)).rowcount
            marks = ", ".join("?" * len(session_ids))
            return c.execute(f"{sql} AND session_id IN ({marks})", (now(), *session_ids)).rowcount

        return await self._write(write)

    # -- files -----------------------------------------------------------------------

    async def put_file(self, row: FileRow, content: bytes) -> None:
        def write(c: sqlite3.Connection) -> None:
            c.execute(
                "INSERT INTO files VALUES (?, ?, ?, ?, ?, ?, ?)",
                (*attrs.astuple(row)[:5], content, row.created_at),
            )

        await self._write(write)

    async def get_file(self, file_id: str) -> FileRow | None:
        def read(c: sqlite3.Connection) -> FileRow | None:
            r = c.execute(
                "SELECT id, filename, content_type, bytes, owner, created_at FROM files "
                "WHERE id = ?",
                (file_id,),
            ).fetchone()
            return None if r is None else FileRow(*r)

        return await self._read(read)

    async def get_file_content(self, file_id: str) -> bytes | None:
        def read(c: sqlite3.Connection) -> bytes | None:
            r = c.execute("SELECT content FROM files WHERE id = ?", (file_id,)).fetchone()
            return None if r is None else bytes(r[0])

        return await self._read(read)
