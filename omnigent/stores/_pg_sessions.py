"""The PostgreSQL store's sessions: rows, turn counts, ancestry and permission grants.

The same tables and meaning as the SQLite store's ``_sqlite_sessions``; grants live
here because the ``viewer`` filter of :meth:`SessionsMixin.list_sessions` joins them.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterable, Sequence
from typing import Any

from psycopg import sql

from ._cluster import EVENTS_CHANNEL
from ._pg_base import Conn, PGBase
from ._pg_log import insert_items
from ._rows import Page, SessionRow

__all__ = ["SESSION_TABLES", "SessionsMixin"]

_COLUMNS = (
    "id, agent_id, agent_version, owner, title, parent_session_id, root_session_id, "
    "harness_override, model_override, labels, status, last_event_id, turn_count, created_at, "
    "cwd, updated_at, sub_agent"
)
_UPDATABLE = frozenset(
    {"title", "labels", "model_override", "harness_override", "status", "cwd", "updated_at"}
)

#: Tables whose rows belong to a session (deleted with it).
SESSION_TABLES = (
    "items",
    "events",
    "inbox",
    "elicitations",
    "permissions",
    "harness_state",
    "running_tasks",
    "process_groups",
)


def _session_row(r: tuple[Any, ...]) -> SessionRow:
    return SessionRow(
        id=r[0],
        agent_id=r[1],
        agent_version=r[2],
        owner=r[3],
        title=r[4],
        parent_session_id=r[5],
        root_session_id=r[6],
        harness_override=r[7],
        model_override=r[8],
        labels=json.loads(r[9]),
        status=r[10],
        last_event_id=r[11],
        turn_count=r[12],
        created_at=r[13],
        cwd=r[14],
        updated_at=r[15] if r[15] is not None else r[13],
        sub_agent=r[16],
    )


# The sessions a viewer may read (two parameters: the viewer, twice): what they own or
# were granted (or is public), then everything below those. UNION (not UNION ALL)
# drops repeats, so the recursion ends on any tree.
_VISIBLE_CTE = (
    "WITH RECURSIVE visible(id) AS ("
    "SELECT id FROM sessions WHERE owner = %s "
    "UNION SELECT session_id FROM permissions WHERE user_id IN (%s, '__public__') "
    "UNION SELECT s.id FROM sessions s JOIN visible v ON s.parent_session_id = v.id) "
)


def _descendants(c: Conn, session_id: str) -> list[str]:
    rows = c.execute(
        "WITH RECURSIVE d(id, depth) AS ("
        "SELECT id, 1 FROM sessions WHERE parent_session_id = %s "
        "UNION SELECT s.id, d.depth + 1 FROM sessions s "
        "JOIN d ON s.parent_session_id = d.id WHERE d.depth < 64) "
        "SELECT id FROM d ORDER BY depth",
        (session_id,),
    )
    return [r[0] for r in rows]


class SessionsMixin(PGBase):
    """Session and permission methods of :class:`~.postgres.PostgresStore`."""

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
                f"INSERT INTO sessions ({_COLUMNS}) VALUES "
                "(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) "
                "ON CONFLICT (id) DO NOTHING",
                (
                    row.id,
                    row.agent_id,
                    row.agent_version,
                    row.owner,
                    row.title,
                    row.parent_session_id,
                    row.root_session_id,
                    row.harness_override,
                    row.model_override,
                    json.dumps(row.labels),
                    row.status,
                    row.last_event_id,
                    row.turn_count,
                    row.created_at,
                    row.cwd,
                    row.updated_at or row.created_at,
                    row.sub_agent,
                ),
            )
            insert_items(c, row.id, items)

        await self._transaction(write)

    async def get_session(self, session_id: str) -> SessionRow | None:
        def read(c: Conn) -> SessionRow | None:
            r = c.execute(f"SELECT {_COLUMNS} FROM sessions WHERE id = %s", (session_id,))
            found = r.fetchone()
            return None if found is None else _session_row(found)

        return await self._run(read)

    async def list_sessions(
        self,
        *,
        agent_id: str | None = None,
        parent_session_id: str | None = None,
        limit: int = 20,
        after: str | None = None,
        viewer: str | None = None,
        cwd: str | None = None,
    ) -> Page:
        """Sessions newest first; ``after`` is the id of the last row of the previous page.

        With ``viewer``, only sessions that user may read: those they own, or hold a
        grant on (or that are public), and every session below any of those. With
        ``cwd``, only sessions whose working directory is exactly ``cwd``.

        Raises:
            LookupError: ``after`` names no session, or one ``viewer`` may not read.
        """

        def read(c: Conn) -> Page:
            prefix = ""
            where: list[str] = ["TRUE"]
            head: list[Any] = []
            args: list[Any] = []
            if viewer is not None:
                prefix = _VISIBLE_CTE
                head += [viewer, viewer]
                where.append("id IN (SELECT id FROM visible)")
            if agent_id is not None:
                where.append("agent_id = %s")
                args.append(agent_id)
            if parent_session_id is not None:
                where.append("parent_session_id = %s")
                args.append(parent_session_id)
            if cwd is not None:
                where.append("cwd = %s")
                args.append(cwd)
            if after is not None:
                visible = " AND id IN (SELECT id FROM visible)" if viewer is not None else ""
                cursor = c.execute(
                    f"{prefix}SELECT seq FROM sessions WHERE id = %s{visible}", (*head, after)
                ).fetchone()
                if cursor is None:
                    raise LookupError(after)
                where.append("seq < %s")
                args.append(cursor[0])
            rows = c.execute(
                f"{prefix}SELECT {_COLUMNS} FROM sessions WHERE {' AND '.join(where)} "
                "ORDER BY seq DESC LIMIT %s",
                (*head, *args, limit + 1),
            ).fetchall()
            return Page([_session_row(r) for r in rows[:limit]], len(rows) > limit)

        return await self._run(read)

    async def update_session(self, session_id: str, **fields: Any) -> None:
        """Set columns of one session (``labels`` as a dict).

        Raises:
            ValueError: a field that is not an updatable column.
        """
        unknown = set(fields) - _UPDATABLE
        if unknown:
            raise ValueError(f"not updatable: {sorted(unknown)}")
        if "labels" in fields:
            fields["labels"] = json.dumps(fields["labels"])
        assignments = sql.SQL(", ").join(
            sql.SQL("{} = %s").format(sql.Identifier(name)) for name in fields
        )
        query = sql.SQL("UPDATE sessions SET {} WHERE id = %s").format(assignments)
        await self._run(lambda c: c.execute(query, (*fields.values(), session_id)))

    async def begin_turn(self, session_id: str) -> int:
        """Count a new turn; returns its zero-based number.

        A per-call token makes a retry (after a lost answer) count the turn once.
        """
        token = secrets.token_hex(8)

        def write(c: Conn) -> int:
            r = c.execute(
                "UPDATE sessions SET turn_count = turn_count + "
                "CASE WHEN turn_token IS DISTINCT FROM %s THEN 1 ELSE 0 END, turn_token = %s "
                "WHERE id = %s RETURNING turn_count",
                (token, token, session_id),
            ).fetchone()
            return 0 if r is None else int(r[0]) - 1

        return await self._run(write)

    async def sessions_with_status(self, statuses: Sequence[str]) -> list[str]:
        """Ids of sessions whose latest status is one of ``statuses``."""

        def read(c: Conn) -> list[str]:
            rows = c.execute("SELECT id FROM sessions WHERE status = ANY(%s)", (list(statuses),))
            return [r[0] for r in rows]

        return await self._run(read)

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
                doomed.update(_descendants(c, root))
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

    async def ancestor_ids(self, session_id: str) -> list[str]:
        """The parent, grandparent, … of a session, nearest first."""

        def read(c: Conn) -> list[str]:
            rows = c.execute(
                "WITH RECURSIVE a(id, depth) AS ("
                "SELECT parent_session_id, 1 FROM sessions WHERE id = %s "
                "UNION ALL SELECT s.parent_session_id, a.depth + 1 FROM sessions s "
                "JOIN a ON s.id = a.id WHERE a.depth < 64) "
                "SELECT id FROM a WHERE id IS NOT NULL ORDER BY depth",
                (session_id,),
            )
            return [r[0] for r in rows]

        return await self._run(read)

    async def descendant_ids(self, session_id: str) -> list[str]:
        """Every session below ``session_id``, parents before their children."""
        return await self._run(lambda c: _descendants(c, session_id))

    # -- permissions -----------------------------------------------------------------

    async def grants_for(
        self, session_ids: set[str], user_ids: set[str] | None
    ) -> list[tuple[str, int]]:
        """``(user_id, level)`` grants on any of ``session_ids`` (for ``user_ids``)."""

        def read(c: Conn) -> list[tuple[str, int]]:
            if user_ids is None:
                rows = c.execute(
                    "SELECT user_id, level FROM permissions WHERE session_id = ANY(%s) "
                    "ORDER BY user_id",
                    (sorted(session_ids),),
                )
            else:
                rows = c.execute(
                    "SELECT user_id, level FROM permissions WHERE session_id = ANY(%s) "
                    "AND user_id = ANY(%s) ORDER BY user_id",
                    (sorted(session_ids), sorted(user_ids)),
                )
            return [(r[0], int(r[1])) for r in rows]

        return await self._run(read)

    async def put_grant(self, session_id: str, user_id: str, level: int) -> None:
        await self._run(
            lambda c: c.execute(
                "INSERT INTO permissions VALUES (%s, %s, %s) "
                "ON CONFLICT (session_id, user_id) DO UPDATE SET level = EXCLUDED.level",
                (session_id, user_id, level),
            )
        )

    async def delete_grant(self, session_id: str, user_id: str) -> bool:
        def write(c: Conn) -> bool:
            cur = c.execute(
                "DELETE FROM permissions WHERE session_id = %s AND user_id = %s",
                (session_id, user_id),
            )
            return cur.rowcount > 0

        return await self._run(write)
