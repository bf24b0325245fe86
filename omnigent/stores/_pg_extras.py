"""The PostgreSQL store's side tables: inbox, elicitations, harness state and files.

The same tables and meaning as the SQLite store's ``_sqlite_extras``. Draining the
inbox tags the rows it takes with a per-call token, so a retry after a lost answer
gets the same rows back instead of losing them.
"""

from __future__ import annotations

import secrets

from .._ids import now
from ._pg_base import Conn, PGBase
from ._rows import FileRow, ProcessGroupRow
from ._sql_extras import SQLExtrasMixin, SQLHarnessStateMixin
from ._sql_work import undelivered

__all__ = ["ExtrasMixin"]


class ExtrasMixin(SQLExtrasMixin, SQLHarnessStateMixin, PGBase):
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
            return undelivered(c, self.dialect, session_id)

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

    # -- elicitations ---------------------------------------------------------------

    async def insert_elicitation(self, elicitation_id: str, session_id: str, request: str) -> None:
        await self._run(
            lambda c: c.execute(
                "INSERT INTO elicitations (id, session_id, status, request, created_at) "
                "VALUES (%s, %s, 'pending', %s, %s) ON CONFLICT (id) DO NOTHING",
                (elicitation_id, session_id, request, now()),
            )
        )

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
