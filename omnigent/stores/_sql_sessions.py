"""The sessions logic both stores share: columns, row mapping, listing and grants.

Each store's ``SessionsMixin`` (``_sqlite_sessions``, ``_pg_sessions``) builds on
:class:`SQLSessionsMixin` and keeps what differs: creating a session (PostgreSQL
locks the parent and tolerates a retry), counting turns, finding descendants, and
deleting a tree.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ._rows import Page, SessionRow, TurnStart
from ._sql import SQLBase, SQLConn

__all__ = [
    "SESSION_AND_AGENT_VERSION",
    "SESSION_COLUMNS",
    "SESSION_TABLES",
    "SQLSessionsMixin",
    "session_row",
    "session_values",
    "turn_start",
]

#: The columns of :class:`~._rows.SessionRow`, in its order (what :func:`session_row`
#: reads and :func:`session_values` writes).
SESSION_COLUMNS = (
    "id, agent_id, agent_version, owner, title, parent_session_id, root_session_id, "
    "harness_override, model_override, labels, status, last_event_id, turn_count, created_at, "
    "cwd, updated_at, sub_agent, runner_id"
)
# A session's columns, then its agent's latest version (a turn's start reads both).
SESSION_AND_AGENT_VERSION = (
    f"{SESSION_COLUMNS}, (SELECT latest_version FROM agents WHERE agents.id = sessions.agent_id)"
)
_UPDATABLE = frozenset(
    {
        "title",
        "labels",
        "model_override",
        "harness_override",
        "status",
        "cwd",
        "updated_at",
        "agent_version",
    }
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
    "session_usage",
)

# The sessions a viewer may read (two parameters: the viewer, twice): what they own or
# were granted (or is public), then everything below those. UNION (not UNION ALL)
# drops repeats, so the recursion ends on any tree.
_VISIBLE_CTE = (
    "WITH RECURSIVE visible(id) AS ("
    "SELECT id FROM sessions WHERE owner = ? "
    "UNION SELECT session_id FROM permissions WHERE user_id IN (?, '__public__') "
    "UNION SELECT s.id FROM sessions s JOIN visible v ON s.parent_session_id = v.id) "
)


def turn_start(r: Sequence[Any]) -> TurnStart:
    """The turn just counted, from :data:`SESSION_AND_AGENT_VERSION` read after it."""
    row = session_row(r[:-1])
    return TurnStart(row.turn_count - 1, row, r[-1])


def session_row(r: Sequence[Any]) -> SessionRow:
    """The row read from :data:`SESSION_COLUMNS` (by position)."""
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
        runner_id=r[17],
    )


def session_values(row: SessionRow) -> tuple[Any, ...]:
    """The parameters that store ``row`` as :data:`SESSION_COLUMNS` (labels as JSON)."""
    return (
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
        row.runner_id,
    )


class SQLSessionsMixin(SQLBase):
    """Session and grant methods whose statements the two stores share."""

    async def get_session(self, session_id: str) -> SessionRow | None:
        q = self.dialect.q(f"SELECT {SESSION_COLUMNS} FROM sessions WHERE id = ?")

        def read(c: SQLConn) -> SessionRow | None:
            found = c.execute(q, (session_id,)).fetchone()
            return None if found is None else session_row(found)

        return await self._sql_read(read)

    async def get_session_and_agent_version(
        self, session_id: str
    ) -> tuple[SessionRow, int | None] | None:
        q = self.dialect.q(f"SELECT {SESSION_AND_AGENT_VERSION} FROM sessions WHERE id = ?")

        def read(c: SQLConn) -> tuple[SessionRow, int | None] | None:
            found = c.execute(q, (session_id,)).fetchone()
            if found is None:
                return None
            return session_row(found[:-1]), found[-1]

        return await self._sql_read(read)

    async def list_sessions(
        self,
        *,
        agent_id: str | None = None,
        parent_session_id: str | None = None,
        limit: int = 20,
        after: str | None = None,
        viewer: str | None = None,
        cwd: str | None = None,
        top_level: bool = False,
        runner_id: str | None = None,
    ) -> Page:
        """Sessions newest first; ``after`` is the id of the last row of the previous page.

        With ``viewer``, only sessions that user may read: those they own, or hold a
        grant on (or that are public), and every session below any of those — the
        core's rule (grants inherit down the tree from any ancestor). With ``cwd``, only
        sessions whose working directory is exactly ``cwd``; with ``top_level``, only
        sessions without a parent; with ``runner_id``, only sessions bound to that
        runner. ``after`` must be a session the same listing could show.

        Raises:
            LookupError: ``after`` names no session, or one ``viewer`` may not read
                (the two are not told apart).
        """
        d = self.dialect
        prefix = ""
        where: list[str] = [d.true]
        head: list[Any] = []
        args: list[Any] = []
        if viewer is not None:
            prefix = _VISIBLE_CTE
            head += [viewer, viewer]
            where.append("id IN (SELECT id FROM visible)")
        for column, value in (
            ("agent_id", agent_id),
            ("parent_session_id", parent_session_id),
            ("cwd", cwd),
            ("runner_id", runner_id),
        ):
            if value is not None:
                where.append(f"{column} = ?")
                args.append(value)
        if top_level:
            where.append("parent_session_id IS NULL")
        visible = " AND id IN (SELECT id FROM visible)" if viewer is not None else ""
        find_after = d.q(f"{prefix}SELECT seq FROM sessions WHERE id = ?{visible}")

        def read(c: SQLConn) -> Page:
            found = list(where)
            params = list(args)
            if after is not None:
                cursor = c.execute(find_after, (*head, after)).fetchone()
                if cursor is None:
                    raise LookupError(after)
                found.append("seq < ?")
                params.append(cursor[0])
            query = d.q(
                f"{prefix}SELECT {SESSION_COLUMNS} FROM sessions WHERE {' AND '.join(found)} "
                "ORDER BY seq DESC LIMIT ?"
            )
            rows = c.execute(query, (*head, *params, limit + 1)).fetchall()
            return Page([session_row(r) for r in rows[:limit]], len(rows) > limit)

        return await self._sql_read(read)

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
        # The names are checked above: only known columns reach the statement.
        assignments = ", ".join(f"{name} = ?" for name in fields)
        query = self.dialect.q(f"UPDATE sessions SET {assignments} WHERE id = ?")
        await self._sql_write_one(lambda c: c.execute(query, (*fields.values(), session_id)))

    async def runner_session_counts(self, *, viewer: str | None = None) -> dict[str, int]:
        """How many sessions are bound to each runner (``viewer``: of those they may read)."""
        prefix, head, visible = "", [], ""
        if viewer is not None:
            prefix, head = _VISIBLE_CTE, [viewer, viewer]
            visible = " AND id IN (SELECT id FROM visible)"
        query = self.dialect.q(
            f"{prefix}SELECT runner_id, COUNT(*) FROM sessions "
            f"WHERE runner_id IS NOT NULL{visible} GROUP BY runner_id"
        )

        def read(c: SQLConn) -> dict[str, int]:
            return {r[0]: int(r[1]) for r in c.execute(query, head)}

        return await self._sql_read(read)

    async def sessions_with_status(self, statuses: Sequence[str]) -> list[str]:
        """Ids of sessions whose latest status is one of ``statuses``."""
        match, params = self.dialect.in_list("status", statuses)
        query = f"SELECT id FROM sessions WHERE {match}"

        def read(c: SQLConn) -> list[str]:
            return [r[0] for r in c.execute(query, params)]

        return await self._sql_read(read)

    async def ancestor_ids(self, session_id: str) -> list[str]:
        """The parent, grandparent, … of a session, nearest first."""
        query = self.dialect.q(
            "WITH RECURSIVE a(id, depth) AS ("
            "SELECT parent_session_id, 1 FROM sessions WHERE id = ? "
            "UNION ALL SELECT s.parent_session_id, a.depth + 1 FROM sessions s "
            "JOIN a ON s.id = a.id WHERE a.depth < 64) "
            "SELECT id FROM a WHERE id IS NOT NULL ORDER BY depth"
        )

        def read(c: SQLConn) -> list[str]:
            return [r[0] for r in c.execute(query, (session_id,)).fetchall()]

        return await self._sql_read(read)

    # -- permissions -----------------------------------------------------------------

    async def grants_for(
        self, session_ids: set[str], user_ids: set[str] | None
    ) -> list[tuple[str, int]]:
        """``(user_id, level)`` grants on any of ``session_ids`` (for ``user_ids``)."""
        match, params = self.dialect.in_list("session_id", sorted(session_ids))
        query = f"SELECT user_id, level FROM permissions WHERE {match}"
        if user_ids is not None:
            users, more = self.dialect.in_list("user_id", sorted(user_ids))
            query += f" AND {users}"
            params += more
        query += " ORDER BY user_id"

        def read(c: SQLConn) -> list[tuple[str, int]]:
            return [(r[0], int(r[1])) for r in c.execute(query, params)]

        return await self._sql_read(read)

    async def put_grant(self, session_id: str, user_id: str, level: int) -> None:
        query = self.dialect.q(
            "INSERT INTO permissions VALUES (?, ?, ?) "
            "ON CONFLICT (session_id, user_id) DO UPDATE SET level = excluded.level"
        )
        await self._sql_write_one(lambda c: c.execute(query, (session_id, user_id, level)))

    async def delete_grant(self, session_id: str, user_id: str) -> bool:
        query = self.dialect.q("DELETE FROM permissions WHERE session_id = ? AND user_id = ?")

        def write(c: SQLConn) -> bool:
            return c.execute(query, (session_id, user_id)).rowcount > 0

        return await self._sql_write_one(write)
