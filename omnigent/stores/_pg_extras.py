"""The PostgreSQL store's side tables: inbox, elicitations, harness state and files.

The same tables and meaning as the SQLite store's ``_sqlite_extras``. Draining the
inbox tags the rows it takes with a per-call token, so a retry after a lost answer
gets the same rows back instead of losing them.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from typing import Any

from .._ids import now
from ._pg_base import Conn, PGBase
from ._rows import FileRow, ProcessGroupRow, RunningTask

__all__ = ["ExtrasMixin"]

_ELICITATION_COLUMNS = ("id", "session_id", "status", "request", "action", "created_at")


def _undelivered(c: Conn, session_id: str) -> int:
    r = c.execute(
        "SELECT count(*) FROM inbox WHERE session_id = %s AND NOT delivered", (session_id,)
    ).fetchone()
    return 0 if r is None else int(r[0])


class ExtrasMixin(PGBase):
    """Inbox, elicitation, harness state and file methods of :class:`~.postgres.PostgresStore`."""

    # -- inbox -----------------------------------------------------------------------

    async def add_inbox_item(
        self, session_id: str, item_id: str, data: str, *, task_id: str | None = None
    ) -> int:
        """Persist one inbox item; returns the session's undelivered count.

        ``task_id`` names the running task this item ends: its record goes in the same
        transaction, so a task is always either running or delivered, never neither.
        """

        def write(c: Conn) -> int:
            c.execute(
                "INSERT INTO inbox (id, session_id, data, created_at) VALUES (%s, %s, %s, %s) "
                "ON CONFLICT (id) DO NOTHING",
                (item_id, session_id, data, now()),
            )
            if task_id is not None:
                c.execute("DELETE FROM running_tasks WHERE handle_id = %s", (task_id,))
            return _undelivered(c, session_id)

        return await self._transaction(write)

    async def add_running_task(self, session_id: str, handle_id: str, tool: str) -> None:
        """Record a background task as running (until its inbox item is written)."""
        await self._run(
            lambda c: c.execute(
                "INSERT INTO running_tasks VALUES (%s, %s, %s, %s) ON CONFLICT (handle_id) "
                "DO UPDATE SET session_id = EXCLUDED.session_id, tool = EXCLUDED.tool",
                (handle_id, session_id, tool, now()),
            )
        )

    async def running_tasks(self, session_ids: Sequence[str] | None = None) -> list[RunningTask]:
        """Every task recorded as running (of ``session_ids``), oldest first."""

        def read(c: Conn) -> list[RunningTask]:
            if session_ids is None:
                rows = c.execute(
                    "SELECT session_id, handle_id, tool FROM running_tasks ORDER BY started_at"
                )
            else:
                rows = c.execute(
                    "SELECT session_id, handle_id, tool FROM running_tasks "
                    "WHERE session_id = ANY(%s) ORDER BY started_at",
                    (list(session_ids),),
                )
            return [RunningTask(r[0], r[1], r[2]) for r in rows]

        return await self._run(read)

    # -- process groups ---------------------------------------------------------------

    async def put_process_group(self, row: ProcessGroupRow) -> None:
        """Record a process group a tool started (cleared when it is gone)."""
        await self._run(
            lambda c: c.execute(
                "INSERT INTO process_groups VALUES (%s, %s, %s, %s, %s) "
                "ON CONFLICT (pgid, start_time) DO UPDATE SET boot_id = EXCLUDED.boot_id, "
                "session_id = EXCLUDED.session_id",
                (row.pgid, row.start_time, row.boot_id, row.session_id, now()),
            )
        )

    async def delete_process_group(self, pgid: int, start_time: int) -> None:
        await self._run(
            lambda c: c.execute(
                "DELETE FROM process_groups WHERE pgid = %s AND start_time = %s",
                (pgid, start_time),
            )
        )

    async def process_groups(
        self, session_ids: Sequence[str] | None = None
    ) -> list[ProcessGroupRow]:
        """Every recorded process group (of ``session_ids``), for recovery."""

        def read(c: Conn) -> list[ProcessGroupRow]:
            if session_ids is None:
                rows = c.execute("SELECT pgid, start_time, boot_id, session_id FROM process_groups")
            else:
                rows = c.execute(
                    "SELECT pgid, start_time, boot_id, session_id FROM process_groups "
                    "WHERE session_id = ANY(%s)",
                    (list(session_ids),),
                )
            return [ProcessGroupRow(int(r[0]), int(r[1]), r[2], r[3]) for r in rows]

        return await self._run(read)

    async def drain_inbox(self, session_id: str) -> list[tuple[str, str]]:
        """Take every undelivered item ``(id, data)``, oldest first, marking it delivered."""
        token = secrets.token_hex(8)

        def write(c: Conn) -> list[tuple[str, str]]:
            rows = c.execute(
                "UPDATE inbox SET delivered = TRUE, drain_token = %s WHERE session_id = %s "
                "AND (NOT delivered OR drain_token = %s) RETURNING seq, id, data",
                (token, session_id, token),
            ).fetchall()
            return [(r[1], r[2]) for r in sorted(rows)]

        return await self._run(write)

    async def inbox_count(self, session_id: str) -> int:
        return await self._run(lambda c: _undelivered(c, session_id))

    # -- elicitations ---------------------------------------------------------------

    async def insert_elicitation(self, elicitation_id: str, session_id: str, request: str) -> None:
        await self._run(
            lambda c: c.execute(
                "INSERT INTO elicitations (id, session_id, status, request, created_at) "
                "VALUES (%s, %s, 'pending', %s, %s) ON CONFLICT (id) DO NOTHING",
                (elicitation_id, session_id, request, now()),
            )
        )

    async def finish_elicitation(self, elicitation_id: str, status: str, action: str) -> None:
        await self._run(
            lambda c: c.execute(
                "UPDATE elicitations SET status = %s, action = %s, resolved_at = %s WHERE id = %s",
                (status, action, now(), elicitation_id),
            )
        )

    async def get_elicitation(self, elicitation_id: str) -> dict[str, Any] | None:
        def read(c: Conn) -> dict[str, Any] | None:
            r = c.execute(
                "SELECT id, session_id, status, request, action, created_at, resolved_at "
                "FROM elicitations WHERE id = %s",
                (elicitation_id,),
            ).fetchone()
            if r is None:
                return None
            return dict(zip((*_ELICITATION_COLUMNS, "resolved_at"), r, strict=True))

        return await self._run(read)

    async def expire_pending_elicitations(self, session_ids: Sequence[str] | None = None) -> int:
        """Mark pending elicitations expired (their waiters died with a process).

        Every one, or only those of ``session_ids``.
        """

        def write(c: Conn) -> int:
            sql = (
                "UPDATE elicitations SET status = 'expired', action = 'expired', "
                "resolved_at = %s WHERE status = 'pending'"
            )
            if session_ids is None:
                return c.execute(sql, (now(),)).rowcount
            return c.execute(sql + " AND session_id = ANY(%s)", (now(), list(session_ids))).rowcount

        return await self._run(write)

    # -- harness state ---------------------------------------------------------------

    async def get_harness_state(self, session_id: str, harness: str) -> dict[str, str]:
        """What ``harness`` keeps on the session (``{}`` if nothing)."""

        def read(c: Conn) -> dict[str, str]:
            rows = c.execute(
                "SELECT key, value FROM harness_state WHERE session_id = %s AND harness = %s",
                (session_id, harness),
            )
            return {r[0]: r[1] for r in rows}

        return await self._run(read)

    async def put_harness_state(
        self, session_id: str, harness: str, key: str, value: str | None
    ) -> None:
        """Store one value (``None`` deletes it); a deleted session keeps nothing."""

        def write(c: Conn) -> None:
            if value is None:
                c.execute(
                    "DELETE FROM harness_state WHERE session_id = %s AND harness = %s AND key = %s",
                    (session_id, harness, key),
                )
                return
            c.execute(
                "INSERT INTO harness_state (session_id, harness, key, value) "
                "SELECT %s, %s, %s, %s WHERE EXISTS (SELECT 1 FROM sessions WHERE id = %s) "
                "ON CONFLICT (session_id, harness, key) DO UPDATE SET value = EXCLUDED.value",
                (session_id, harness, key, value, session_id),
            )

        await self._run(write)

    # -- files -----------------------------------------------------------------------

    async def put_file(self, row: FileRow, content: bytes) -> None:
        await self._run(
            lambda c: c.execute(
                "INSERT INTO files VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT (id) DO NOTHING",
                (
                    row.id,
                    row.filename,
                    row.content_type,
                    row.bytes,
                    row.owner,
                    content,
                    row.created_at,
                ),
            )
        )

    async def get_file(self, file_id: str) -> FileRow | None:
        def read(c: Conn) -> FileRow | None:
            r = c.execute(
                "SELECT id, filename, content_type, bytes, owner, created_at FROM files "
                "WHERE id = %s",
                (file_id,),
            ).fetchone()
            return None if r is None else FileRow(*r)

        return await self._run(read)

    async def get_file_content(self, file_id: str) -> bytes | None:
        def read(c: Conn) -> bytes | None:
            r = c.execute("SELECT content FROM files WHERE id = %s", (file_id,)).fetchone()
            return None if r is None else bytes(r[0])

        return await self._run(read)
