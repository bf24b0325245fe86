"""The PostgreSQL store's sessions: rows, turn counts, ancestry and permission grants.

The same tables and meaning as the SQLite store's ``_sqlite_sessions``; grants live
here because the ``viewer`` filter of :meth:`SessionsMixin.list_sessions` joins them.
"""

from __future__ import annotations

import secrets
from collections.abc import Collection, Iterable, Sequence
from typing import Any

from psycopg import sql

from .._grouped import Grouped
from ._cluster import EVENTS_CHANNEL
from ._pg_base import Conn, PGBase
from ._pg_log import TAKE_ONE_ITEM, insert_items, take_items
from ._rows import SessionRow, TurnStart
from ._sql_sessions import (
    SESSION_AND_AGENT_VERSION,
    SESSION_COLUMNS,
    SESSION_TABLES,
    SQLSessionsMixin,
    session_row,
    session_values,
    turn_start,
)

__all__ = ["SessionsMixin", "trees_of"]


# Counts a turn once per token, returning the row and its agent's latest version;
# parameters: the token, the token, the session.
_COUNT_TURN = (
    "UPDATE sessions SET turn_count = turn_count + "
    "CASE WHEN turn_token IS DISTINCT FROM %s THEN 1 ELSE 0 END, turn_token = %s "
    f"WHERE id = %s RETURNING {SESSION_AND_AGENT_VERSION}"
)
_TAKE_ONE_AND_COUNT_TURN = f"WITH taken AS ({TAKE_ONE_ITEM}) {_COUNT_TURN}"


def descendants(c: Conn, session_id: str) -> list[str]:
    """Every session below ``session_id``, parents before their children (on ``c``)."""
    rows = c.execute(
        "WITH RECURSIVE d(id, depth) AS ("
        "SELECT id, 1 FROM sessions WHERE parent_session_id = %s "
        "UNION SELECT s.id, d.depth + 1 FROM sessions s "
        "JOIN d ON s.parent_session_id = d.id WHERE d.depth < 64) "
        "SELECT id FROM d ORDER BY depth",
        (session_id,),
    )
    return [r[0] for r in rows]


def trees_of(c: Conn, root_ids: Sequence[str]) -> dict[str, list[tuple[str, int]]]:
    """Each root's tree, in one statement (on ``c``): the root, then every session
    below it, parents first, each with its newest stored event id (as
    :meth:`LogMixin.max_event_id` reads it); a root with no row is not a key."""
    rows = c.execute(
        "WITH RECURSIVE d(top, id, depth) AS ("
        "SELECT id, id, 0 FROM sessions WHERE id = ANY(%s) "
        "UNION SELECT d.top, s.id, d.depth + 1 FROM sessions s "
        "JOIN d ON s.parent_session_id = d.id WHERE d.depth < 64) "
        "SELECT d.top, d.id, GREATEST(s.last_event_id, COALESCE((SELECT MAX(event_id) "
        "FROM events e WHERE e.session_id = d.id), 0)) "
        "FROM d JOIN sessions s ON s.id = d.id ORDER BY d.top, d.depth",
        (list(root_ids),),
    )
    trees: dict[str, list[tuple[str, int]]] = {}
    for top, session_id, head in rows:
        trees.setdefault(top, []).append((session_id, int(head)))
    return trees


class SessionsMixin(SQLSessionsMixin, PGBase):
    """Session and permission methods of :class:`~.postgres.PostgresStore`."""

    #: Reads of session rows asked at the same moment, sent together (made by the store).
    _session_reads: Grouped[str, tuple[Any, ...] | None]

    async def get_session(self, session_id: str) -> SessionRow | None:
        """The session's row (``None``: no such session).

        The rows asked while one read is on its way are read together in the next
        statement (:class:`~omnigent._grouped.Grouped`; issue 32: 200 turns starting
        at once read their rows in a handful of statements).
        """
        found = await self._session_reads(session_id)
        return None if found is None else session_row(found)

    async def _read_session_rows(
        self, session_ids: Collection[str]
    ) -> dict[str, tuple[Any, ...] | None]:
        """The stored columns of each session (``None``: missing), in one statement;
        each caller makes its own row of them (a row's ``labels`` is a dict)."""
        ids = list(session_ids)

        def read(c: Conn) -> dict[str, tuple[Any, ...] | None]:
            rows = c.execute(
                f"SELECT {SESSION_COLUMNS} FROM sessions WHERE id = ANY(%s)", (ids,)
            ).fetchall()
            found = {r[0]: tuple(r) for r in rows}
            return {session_id: found.get(session_id) for session_id in ids}

        return await self._read(read)

    async def insert_session(self, row: SessionRow, items: Sequence[dict[str, Any]] = ()) -> None:
        """Create a session and its initial items in one transaction.

        Repeating it (a retry after a lost answer) changes nothing.

        Raises:
            LookupError: ``row.parent_session_id`` names no session (deleted meanwhile).
        """

        def write(c: Conn) -> None:
            if row.parent_session_id is not None:
                parent = c.execute(
                    "SELECT 1 FROM sessions WHERE id = %s FOR SHARE", (row.parent_session_id,)
                ).fetchone()
                if parent is None:
                    raise LookupError(row.parent_session_id)
            c.execute(
                f"INSERT INTO sessions ({SESSION_COLUMNS}) VALUES ({self.dialect.marks(18)}) "
                "ON CONFLICT (id) DO NOTHING",
                session_values(row),
            )
            if items:
                insert_items(c, row.id, items)  # the row is there: inserted just above

        await self._transaction(write)

    async def begin_turn(
        self, session_id: str, taken: Sequence[str] = (), *, taken_by: str | None = None
    ) -> TurnStart | None:
        """Count a new turn, taking its messages; the turn and the session's row after it.

        One statement for a turn's one message, returning the row (where a turn's
        start took two writes and a read). A per-call token makes a retry (after a
        lost answer) count the turn once; taking a message again leaves it where it is.
        """
        token = secrets.token_hex(8)
        count = (token, token, session_id)

        def write(c: Conn) -> TurnStart | None:
            if len(taken) == 1:
                params = (session_id, taken_by, taken[0], session_id, *count)
                found = c.execute(_TAKE_ONE_AND_COUNT_TURN, params).fetchone()
            else:
                take_items(c, session_id, taken, taken_by)
                found = c.execute(_COUNT_TURN, count).fetchone()
            return None if found is None else turn_start(found)

        if len(taken) > 1:
            return await self._transaction(write)
        return await self._run(write)

    async def delete_sessions(self, session_ids: Iterable[str]) -> None:
        """Delete sessions and their descendants, with everything that belongs to them.

        The descendants are found inside the transaction (and the rows locked), so a
        child created while the delete was on its way goes with its parent, and one
        created after it is refused by :meth:`insert_session`. Notifies every server
        (``SESSION:deleted:INSTANCE``) on commit.
        """
        roots = list(session_ids)

        def write(c: Conn) -> None:
            # Lock first (a child being inserted under one of them commits first),
            # then find the subtree as it is now.
            c.execute("SELECT 1 FROM sessions WHERE id = ANY(%s) FOR UPDATE", (roots,))
            doomed = set(roots)
            for root in roots:
                doomed.update(descendants(c, root))
            ids = sorted(doomed)
            c.execute("SELECT 1 FROM sessions WHERE id = ANY(%s) FOR UPDATE", (ids,))
            for table in SESSION_TABLES:
                c.execute(
                    sql.SQL("DELETE FROM {} WHERE session_id = ANY(%s)").format(
                        sql.Identifier(table)
                    ),
                    (ids,),
                )
            c.execute(
                "DELETE FROM subagent_work WHERE parent_session_id = ANY(%s) "
                "OR child_session_id = ANY(%s)",
                (ids, ids),
            )
            c.execute("DELETE FROM sessions WHERE id = ANY(%s)", (ids,))
            # Every server ends its subscriptions of these (delivered on commit).
            c.execute(
                "SELECT pg_notify(%s, s || ':deleted:' || %s) FROM unnest(%s::text[]) AS s",
                (EVENTS_CHANNEL, self.instance or "", ids),
            )

        await self._transaction(write)

    async def descendant_ids(self, session_id: str) -> list[str]:
        """Every session below ``session_id``, parents before their children."""
        return await self._read(lambda c: descendants(c, session_id))
