"""The side-table statements both stores share: tasks, process groups, elicitations,
files and harness state.

Each store's ``ExtrasMixin`` (``_sqlite_extras``, ``_pg_extras``) builds on
:class:`SQLExtrasMixin` and keeps the writes whose conflict handling differs (SQLite
replaces or refuses a repeated row; PostgreSQL tolerates a retry after a lost answer)
and the draining of the inbox. :class:`SQLHarnessStateMixin` is the whole of harness
state for both.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .._ids import now
from ._rows import FileRow, ProcessGroupRow, RunningTask
from ._sql import SQLBase, SQLConn
from ._sql_work import undelivered

__all__ = ["SQLExtrasMixin", "SQLHarnessStateMixin"]

_ELICITATION_COLUMNS = (
    "id",
    "session_id",
    "status",
    "request",
    "action",
    "created_at",
    "resolved_at",
)


class SQLExtrasMixin(SQLBase):
    """Task, process group, inbox count, elicitation and file methods both stores share."""

    async def running_tasks(self, session_ids: Sequence[str] | None = None) -> list[RunningTask]:
        """Every task recorded as running (of ``session_ids``), oldest first (for recovery)."""
        query, params = "SELECT session_id, handle_id, tool FROM running_tasks", list[Any]()
        if session_ids is not None:
            match, params = self.dialect.in_list("session_id", session_ids)
            query += f" WHERE {match}"
        query += " ORDER BY started_at"

        def read(c: SQLConn) -> list[RunningTask]:
            return [RunningTask(r[0], r[1], r[2]) for r in c.execute(query, params).fetchall()]

        return await self._sql_read(read)

    async def delete_process_group(self, pgid: int, start_time: int) -> None:
        query = self.dialect.q("DELETE FROM process_groups WHERE pgid = ? AND start_time = ?")
        await self._sql_write_one(lambda c: c.execute(query, (pgid, start_time)))

    async def process_groups(
        self, session_ids: Sequence[str] | None = None
    ) -> list[ProcessGroupRow]:
        """Every recorded process group (of ``session_ids``), for recovery."""
        query = "SELECT pgid, start_time, boot_id, session_id FROM process_groups"
        params: list[Any] = []
        if session_ids is not None:
            match, params = self.dialect.in_list("session_id", session_ids)
            query += f" WHERE {match}"

        def read(c: SQLConn) -> list[ProcessGroupRow]:
            rows = c.execute(query, params).fetchall()
            return [ProcessGroupRow(int(r[0]), int(r[1]), r[2], r[3]) for r in rows]

        return await self._sql_read(read)

    async def inbox_count(self, session_id: str) -> int:
        return await self._sql_read(lambda c: undelivered(c, self.dialect, session_id))

    # -- elicitations ---------------------------------------------------------------

    async def finish_elicitation(self, elicitation_id: str, status: str, action: str) -> None:
        query = self.dialect.q(
            "UPDATE elicitations SET status = ?, action = ?, resolved_at = ? WHERE id = ?"
        )
        await self._sql_write_one(
            lambda c: c.execute(query, (status, action, now(), elicitation_id))
        )

    async def get_elicitation(self, elicitation_id: str) -> dict[str, Any] | None:
        query = self.dialect.q(
            f"SELECT {', '.join(_ELICITATION_COLUMNS)} FROM elicitations WHERE id = ?"
        )

        def read(c: SQLConn) -> dict[str, Any] | None:
            r = c.execute(query, (elicitation_id,)).fetchone()
            return None if r is None else dict(zip(_ELICITATION_COLUMNS, r, strict=True))

        return await self._sql_read(read)

    async def expire_pending_elicitations(self, session_ids: Sequence[str] | None = None) -> int:
        """Mark pending elicitations expired (their waiters died with a process).

        Every one, or only those of ``session_ids``.
        """
        query = self.dialect.q(
            "UPDATE elicitations SET status = 'expired', action = 'expired', "
            "resolved_at = ? WHERE status = 'pending'"
        )
        params: list[Any] = []
        if session_ids is not None:
            match, params = self.dialect.in_list("session_id", session_ids)
            query += f" AND {match}"

        def write(c: SQLConn) -> int:
            return c.execute(query, (now(), *params)).rowcount

        return await self._sql_write_one(write)

    # -- files -----------------------------------------------------------------------

    async def get_file(self, file_id: str) -> FileRow | None:
        query = self.dialect.q(
            "SELECT id, filename, content_type, bytes, owner, created_at FROM files WHERE id = ?"
        )

        def read(c: SQLConn) -> FileRow | None:
            r = c.execute(query, (file_id,)).fetchone()
            return None if r is None else FileRow(*r)

        return await self._sql_read(read)

    async def get_file_content(self, file_id: str) -> bytes | None:
        query = self.dialect.q("SELECT content FROM files WHERE id = ?")

        def read(c: SQLConn) -> bytes | None:
            r = c.execute(query, (file_id,)).fetchone()
            return None if r is None else bytes(r[0])

        return await self._sql_read(read)


class SQLHarnessStateMixin(SQLBase):
    """Harness state: small strings a harness keeps on a session, for both stores.

    A native coding agent's own conversation id (Claude Code's session id, a Codex
    thread id) lives here, so a later turn continues that conversation — also after a
    restart. Rows are keyed by session, harness name and key, and deleted with the
    session.
    """

    async def get_harness_state(self, session_id: str, harness: str) -> dict[str, str]:
        """What ``harness`` keeps on the session (``{}`` if nothing)."""
        query = self.dialect.q(
            "SELECT key, value FROM harness_state WHERE session_id = ? AND harness = ?"
        )

        def read(c: SQLConn) -> dict[str, str]:
            return {r[0]: r[1] for r in c.execute(query, (session_id, harness))}

        return await self._sql_read(read)

    async def put_harness_state(
        self, session_id: str, harness: str, key: str, value: str | None
    ) -> None:
        """Store one value (``None`` deletes it); a deleted session keeps nothing."""
        if value is None:
            query = self.dialect.q(
                "DELETE FROM harness_state WHERE session_id = ? AND harness = ? AND key = ?"
            )
            params: tuple[Any, ...] = (session_id, harness, key)
        else:
            # A session deleted meanwhile keeps no state (nothing would delete it).
            query = self.dialect.q(
                "INSERT INTO harness_state (session_id, harness, key, value) "
                "SELECT ?, ?, ?, ? WHERE EXISTS (SELECT 1 FROM sessions WHERE id = ?) "
                "ON CONFLICT (session_id, harness, key) DO UPDATE SET value = excluded.value"
            )
            params = (session_id, harness, key, value, session_id)
        await self._sql_write_one(lambda c: c.execute(query, params))
