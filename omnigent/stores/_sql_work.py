"""The sub-agent work statements both stores share, and the inbox reads that vet items.

A work entry is finished exactly once: :meth:`SQLWorkMixin.finish_work` updates it
only while it is open and writes the parent's inbox item in the same transaction, so
neither a late completion nor a retry after a restart can deliver twice, and a crash
can never leave a finished entry without its item (or an item without its finished
entry). Each store's ``WorkMixin`` (``_sqlite_work``, ``_pg_work``) keeps what differs:
creating an entry (PostgreSQL tolerates a retry) and marking inbox items read.
"""

from __future__ import annotations

from typing import Any, ClassVar

from .._ids import now
from ._rows import WORK_OPEN, WorkRow
from ._sql import Dialect, SQLBase, SQLConn

__all__ = ["WORK_COLUMNS", "SQLWorkMixin", "undelivered", "work_values"]

#: The columns of :class:`~._rows.WorkRow`, in its order.
WORK_COLUMNS = (
    "work_id, parent_session_id, child_session_id, agent, title, message_id, status, "
    "output, created_at, finished_at"
)


def work_values(row: WorkRow) -> tuple[Any, ...]:
    """The parameters that store ``row`` as :data:`WORK_COLUMNS`."""
    return (
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
    )


def undelivered(c: SQLConn, dialect: Dialect, session_id: str) -> int:
    """How many inbox items of ``session_id`` are not delivered yet (on ``c``)."""
    query = dialect.q(
        f"SELECT count(*) FROM inbox WHERE session_id = ? AND delivered = {dialect.false}"
    )
    r = c.execute(query, (session_id,)).fetchone()
    return 0 if r is None else int(r[0])


class SQLWorkMixin(SQLBase):
    """Sub-agent work and inbox-vetting methods whose statements the stores share."""

    #: The column that orders work entries created in the same instant.
    _work_seq: ClassVar[str] = "seq"

    async def start_work(self, work_id: str) -> bool:
        query = self.dialect.q(
            "UPDATE subagent_work SET status = 'running' WHERE work_id = ? AND status = 'launching'"
        )

        def write(c: SQLConn) -> bool:
            return c.execute(query, (work_id,)).rowcount > 0

        return await self._sql_write_one(write)

    async def finish_work(
        self, work_id: str, status: str, output: str, inbox_id: str, inbox_data: str
    ) -> int | None:
        """Finish an open entry and write its inbox item, atomically (see the protocol)."""
        d = self.dialect
        is_open, open_params = d.in_list("status", WORK_OPEN)
        finish = d.q(
            "UPDATE subagent_work SET status = ?, output = ?, finished_at = ? "
            f"WHERE work_id = ? AND {is_open} RETURNING parent_session_id"
        )
        exists = d.q("SELECT 1 FROM sessions WHERE id = ?")
        deliver = d.q("INSERT INTO inbox (id, session_id, data, created_at) VALUES (?, ?, ?, ?)")

        def write(c: SQLConn) -> int | None:
            r = c.execute(finish, (status, output, now(), work_id, *open_params)).fetchone()
            if r is None:
                return None
            parent = r[0]
            if c.execute(exists, (parent,)).fetchone() is None:
                return None  # the parent was deleted: nobody to deliver to
            c.execute(deliver, (inbox_id, parent, inbox_data, now()))
            return undelivered(c, d, parent)

        return await self._sql_write(write)

    async def drop_work(self, work_id: str) -> None:
        query = self.dialect.q("DELETE FROM subagent_work WHERE work_id = ?")
        await self._sql_write_one(lambda c: c.execute(query, (work_id,)))

    async def list_work(
        self,
        *,
        parent_session_id: str | None = None,
        child_session_id: str | None = None,
        open_only: bool = True,
    ) -> list[WorkRow]:
        d = self.dialect
        where, args = [d.true], list[Any]()
        for column, value in (
            ("parent_session_id", parent_session_id),
            ("child_session_id", child_session_id),
        ):
            if value is not None:
                where.append(f"{column} = {d.mark}")
                args.append(value)
        if open_only:
            is_open, open_params = d.in_list("status", WORK_OPEN)
            where.append(is_open)
            args += open_params
        query = (
            f"SELECT {WORK_COLUMNS} FROM subagent_work WHERE {' AND '.join(where)} "
            f"ORDER BY created_at, {self._work_seq}"
        )

        def read(c: SQLConn) -> list[WorkRow]:
            return [WorkRow(*(r[i] for i in range(10))) for r in c.execute(query, args)]

        return await self._sql_read(read)

    # -- the inbox, vetted before it is marked read -----------------------------------

    async def peek_inbox(self, session_id: str, limit: int = 1000) -> list[tuple[str, str]]:
        query = self.dialect.q(
            "SELECT id, data FROM inbox WHERE session_id = ? "
            f"AND delivered = {self.dialect.false} ORDER BY seq LIMIT ?"
        )

        def read(c: SQLConn) -> list[tuple[str, str]]:
            return [(r[0], r[1]) for r in c.execute(query, (session_id, limit)).fetchall()]

        return await self._sql_read(read)

    async def sessions_with_inbox(self) -> list[str]:
        query = f"SELECT DISTINCT session_id FROM inbox WHERE delivered = {self.dialect.false}"

        def read(c: SQLConn) -> list[str]:
            return [r[0] for r in c.execute(query)]

        return await self._sql_read(read)
