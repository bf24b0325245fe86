"""The SQLite store's sessions: rows, turn counts, ancestry and permission grants.

Grants live here because they are keyed by session and read together with it (the
``viewer`` filter of :meth:`SessionsMixin.list_sessions` joins them); deleting a session
also deletes every row of the other tables that belongs to it. The statements both
stores share are in :class:`~._sql_sessions.SQLSessionsMixin`.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence
from typing import Any

from ._rows import SessionRow, TurnStart
from ._sql_sessions import (
    SESSION_AND_AGENT_VERSION,
    SESSION_COLUMNS,
    SESSION_TABLES,
    SQLSessionsMixin,
    session_values,
    turn_start,
)
from ._sqlite_base import SQLiteBase
from ._sqlite_log import insert_items, take_items

__all__ = ["SessionsMixin"]


def _descendants(c: sqlite3.Connection, session_id: str) -> list[str]:
    rows = c.execute(
        "WITH RECURSIVE d(id) AS (SELECT id FROM sessions WHERE parent_session_id = ? "
        "UNION SELECT s.id FROM sessions s JOIN d ON s.parent_session_id = d.id) "
        "SELECT id FROM d",
        (session_id,),
    ).fetchall()
    return [r[0] for r in rows]


class SessionsMixin(SQLSessionsMixin, SQLiteBase):
    """Session and permission methods of :class:`~.sqlite.SQLiteStore`."""

    async def insert_session(self, row: SessionRow, items: Sequence[dict[str, Any]] = ()) -> None:
        """Create a session and its initial items in one transaction.

        Raises:
            LookupError: ``row.parent_session_id`` names no session (deleted meanwhile).
        """

        def write(c: sqlite3.Connection) -> None:
            if row.parent_session_id is not None:
                parent = c.execute(
                    "SELECT 1 FROM sessions WHERE id = ?", (row.parent_session_id,)
                ).fetchone()
                if parent is None:
                    raise LookupError(row.parent_session_id)
            c.execute(
                f"INSERT INTO sessions ({SESSION_COLUMNS}) VALUES ({self.dialect.marks(18)})",
                session_values(row),
            )
            insert_items(c, row.id, items)

        await self._write(write)

    async def begin_turn(
        self, session_id: str, taken: Sequence[str] = (), *, taken_by: str | None = None
    ) -> TurnStart | None:
        """Count a new turn, taking its messages; the turn and the session's row after it."""
        counted = f"SELECT {SESSION_AND_AGENT_VERSION} FROM sessions WHERE id = ?"

        def write(c: sqlite3.Connection) -> TurnStart | None:
            take_items(c, session_id, taken, taken_by)
            c.execute("UPDATE sessions SET turn_count = turn_count + 1 WHERE id = ?", (session_id,))
            found = c.execute(counted, (session_id,)).fetchone()
            return None if found is None else turn_start(found)

        return await self._write(write)

    async def delete_sessions(self, session_ids: Iterable[str]) -> None:
        """Delete sessions and their descendants, with everything that belongs to them.

        The descendants are found inside the transaction, so a child created while
        the delete was on its way goes with its parent (and one created after it is
        refused by :meth:`insert_session`).
        """
        roots = list(session_ids)

        def write(c: sqlite3.Connection) -> None:
            doomed = set(roots)
            for root in roots:
                doomed.update(_descendants(c, root))
            ids = [(i,) for i in sorted(doomed)]
            for table in SESSION_TABLES:
                c.executemany(f"DELETE FROM {table} WHERE session_id = ?", ids)
            for column in ("parent_session_id", "child_session_id"):
                c.executemany(f"DELETE FROM subagent_work WHERE {column} = ?", ids)
            c.executemany("DELETE FROM sessions WHERE id = ?", ids)

        await self._write(write)

    async def descendant_ids(self, session_id: str) -> list[str]:
        """Every session below ``session_id`` (children, grandchildren, …)."""
        return await self._read(lambda c: _descendants(c, session_id))
