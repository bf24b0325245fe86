"""The log reads both stores share: items in order, pending messages, events.

Each store's ``LogMixin`` (``_sqlite_log``, ``_pg_log``) builds on
:class:`SQLLogMixin` and keeps its writes, which genuinely differ: PostgreSQL batches
events into one fenced statement, SQLite into one transaction of ``executemany``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ._rows import Page, PendingItem
from ._sql import Dialect, SQLBase, SQLConn

__all__ = ["SQLLogMixin", "require_session"]


def require_session(c: SQLConn, dialect: Dialect, session_id: str) -> None:
    """Raise :class:`LookupError` unless ``session_id`` exists (on ``c``, in its transaction)."""
    query = dialect.q("SELECT 1 FROM sessions WHERE id = ?")
    if c.execute(query, (session_id,)).fetchone() is None:
        raise LookupError(session_id)


class SQLLogMixin(SQLBase):
    """Item and event reads whose statements the two stores share."""

    # -- items -----------------------------------------------------------------------

    async def item_taken_by(self, session_id: str, item_id: str) -> str | None:
        """Which turn took a message (``""``: a stop dropped it; ``None``: not yet)."""
        query = self.dialect.q("SELECT taken_by FROM items WHERE id = ? AND session_id = ?")

        def read(c: SQLConn) -> str | None:
            r = c.execute(query, (item_id, session_id)).fetchone()
            return None if r is None else r[0]

        return await self._sql_read(read)

    async def pending_items(self, session_ids: Sequence[str] | None = None) -> list[PendingItem]:
        """Every message no turn has taken yet (of ``session_ids``), oldest first."""
        d = self.dialect
        query = f"SELECT session_id, data FROM items WHERE pending = {d.true}"
        params: list[Any] = []
        if session_ids is not None:
            match, params = d.in_list("session_id", session_ids)
            query += f" AND {match}"
        query += " ORDER BY seq"

        def read(c: SQLConn) -> list[PendingItem]:
            return [PendingItem(r[0], json.loads(r[1])) for r in c.execute(query, params)]

        return await self._sql_read(read)

    async def list_items(
        self,
        session_id: str,
        *,
        order: str = "asc",
        limit: int | None = None,
        after: str | None = None,
        include_pending: bool = True,
    ) -> Page:
        """Items of a session in order; ``after`` is an item id (exclusive cursor).

        ``include_pending=False`` leaves out messages no turn has taken yet.

        Raises:
            LookupError: ``after`` is not an item of the session.
        """
        if order == "asc" and limit is None and after is None and not include_pending:
            history = await self._sql_history(session_id)  # a turn's start reads this
            if history is not None:
                return Page(history, False)
        d = self.dialect
        direction, compare = ("ASC", ">") if order == "asc" else ("DESC", "<")
        find_after = d.q("SELECT seq FROM items WHERE id = ? AND session_id = ?")

        def read(c: SQLConn) -> Page:
            where, args = "session_id = ?", list[Any]([session_id])
            if not include_pending:
                where += f" AND pending = {d.false}"
            if after is not None:
                cursor = c.execute(find_after, (after, session_id)).fetchone()
                if cursor is None:
                    raise LookupError(after)
                where += f" AND seq {compare} ?"
                args.append(cursor[0])
            query = f"SELECT data FROM items WHERE {where} ORDER BY seq {direction}"
            if limit is not None:
                query += f" LIMIT {int(limit) + 1}"
            rows = [json.loads(r[0]) for r in c.execute(d.q(query), args)]
            if limit is not None and len(rows) > limit:
                return Page(rows[:limit], True)
            return Page(rows, False)

        return await self._sql_read(read)

    # -- events ----------------------------------------------------------------------

    async def read_events(
        self, session_id: str, after: int, limit: int = 1000
    ) -> list[dict[str, Any]]:
        """Events with ``event_id > after``, oldest first, wire form."""
        query = self.dialect.q(
            "SELECT data FROM events WHERE session_id = ? AND event_id > ? "
            "ORDER BY event_id LIMIT ?"
        )

        def read(c: SQLConn) -> list[dict[str, Any]]:
            return [json.loads(r[0]) for r in c.execute(query, (session_id, after, limit))]

        return await self._sql_read(read)

    async def newest_event(
        self, session_id: str, types: Sequence[str], *, match: tuple[str, str] | None = None
    ) -> dict[str, Any] | None:
        """The session's newest stored event of one of ``types`` (wire form), if any."""
        condition, params = self.dialect.in_list("type", types)
        if match is not None:
            field, value = match
            condition += f" AND {self.dialect.json_text('data', field)} = ?"
            params = [*params, value]
        query = self.dialect.q(
            f"SELECT data FROM events WHERE session_id = ? AND {condition} "
            "ORDER BY event_id DESC LIMIT 1"
        )

        def read(c: SQLConn) -> dict[str, Any] | None:
            r = c.execute(query, (session_id, *params)).fetchone()
            return None if r is None else dict(json.loads(r[0]))

        return await self._sql_read(read)
