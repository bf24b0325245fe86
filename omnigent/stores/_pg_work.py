"""The PostgreSQL store's sub-agent work entries, and the inbox reads that vet items first.

The same table and meaning as the SQLite store's ``_sqlite_work``: a work entry is
finished exactly once, together with the parent's inbox item, in one statement —
updated only while it is open, so neither a late completion nor a retry (after a
restart, or after a lost answer) can deliver twice.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .._ids import now
from ._pg_base import Conn, PGBase
from ._rows import WORK_OPEN, WorkRow

__all__ = ["WorkMixin"]

_COLUMNS = (
    "work_id, parent_session_id, child_session_id, agent, title, message_id, status, "
    "output, created_at, finished_at"
)


def _undelivered(c: Conn, session_id: str) -> int:
    r = c.execute(
        "SELECT count(*) FROM inbox WHERE session_id = %s AND NOT delivered", (session_id,)
    ).fetchone()
    return 0 if r is None else int(r[0])


class WorkMixin(PGBase):
    """Sub-agent work and inbox-vetting methods of :class:`~.postgres.PostgresStore`."""

    async def insert_work(self, row: WorkRow) -> None:
        await self._run(
            lambda c: c.execute(
                f"INSERT INTO subagent_work ({_COLUMNS}) "
                "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT (work_id) DO NOTHING",
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
        )

    async def start_work(self, work_id: str) -> bool:
        def write(c: Conn) -> bool:
            cur = c.execute(
                "UPDATE subagent_work SET status = 'running' "
                "WHERE work_id = %s AND status = 'launching'",
                (work_id,),
            )
            return cur.rowcount > 0

        return await self._run(write)

    async def finish_work(
        self, work_id: str, status: str, output: str, inbox_id: str, inbox_data: str
    ) -> int | None:
        """Finish an open entry and write its inbox item, atomically (see the protocol)."""

        def write(c: Conn) -> int | None:
            r = c.execute(
                "UPDATE subagent_work SET status = %s, output = %s, finished_at = %s "
                "WHERE work_id = %s AND status = ANY(%s) RETURNING parent_session_id",
                (status, output, now(), work_id, list(WORK_OPEN)),
            ).fetchone()
            if r is None:
                return None
            parent = r[0]
            if c.execute("SELECT 1 FROM sessions WHERE id = %s", (parent,)).fetchone() is None:
                return None  # the parent was deleted: nobody to deliver to
            c.execute(
                "INSERT INTO inbox (id, session_id, data, created_at) VALUES (%s, %s, %s, %s)",
                (inbox_id, parent, inbox_data, now()),
            )
            return _undelivered(c, parent)

        return await self._transaction(write)

    async def drop_work(self, work_id: str) -> None:
        await self._run(
            lambda c: c.execute("DELETE FROM subagent_work WHERE work_id = %s", (work_id,))
        )

    async def list_work(
        self,
        *,
        parent_session_id: str | None = None,
        child_session_id: str | None = None,
        open_only: bool = True,
    ) -> list[WorkRow]:
        where, args = ["TRUE"], list[Any]()
        if parent_session_id is not None:
            where.append("parent_session_id = %s")
            args.append(parent_session_id)
        if child_session_id is not None:
            where.append("child_session_id = %s")
            args.append(child_session_id)
        if open_only:
            where.append("status = ANY(%s)")
            args.append(list(WORK_OPEN))
        query = (
            f"SELECT {_COLUMNS} FROM subagent_work WHERE {' AND '.join(where)} "
            "ORDER BY created_at, seq"
        )

        def read(c: Conn) -> list[WorkRow]:
            return [WorkRow(*r) for r in c.execute(query, args)]

        return await self._run(read)

    # -- the inbox, vetted before it is marked read -----------------------------------

    async def peek_inbox(self, session_id: str, limit: int = 1000) -> list[tuple[str, str]]:
        def read(c: Conn) -> list[tuple[str, str]]:
            rows = c.execute(
                "SELECT id, data FROM inbox WHERE session_id = %s AND NOT delivered "
                "ORDER BY seq LIMIT %s",
                (session_id, limit),
            )
            return [(r[0], r[1]) for r in rows]

        return await self._run(read)

    async def ack_inbox(self, session_id: str, item_ids: Sequence[str]) -> int:
        def write(c: Conn) -> int:
            c.execute(
                "UPDATE inbox SET delivered = TRUE WHERE session_id = %s AND id = ANY(%s)",
                (session_id, list(item_ids)),
            )
            return _undelivered(c, session_id)

        return await self._transaction(write)

    async def sessions_with_inbox(self) -> list[str]:
        def read(c: Conn) -> list[str]:
            rows = c.execute("SELECT DISTINCT session_id FROM inbox WHERE NOT delivered")
            return [r[0] for r in rows]

        return await self._run(read)
