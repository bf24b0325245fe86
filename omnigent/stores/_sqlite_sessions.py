"""The SQLite store's sessions: rows, turn counts, ancestry and permission grants.

Grants live here because they are keyed by session and read together with it (the
``viewer`` filter of :meth:`SessionsMixin.list_sessions` joins them); deleting a session
also deletes every row of the other tables that belongs to it.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Sequence
from typing import Any

from ._rows import Page, SessionRow
from ._sqlite_base import SQLiteBase
from ._sqlite_log import insert_items

__all__ = ["SessionsMixin"]

_SESSION_COLUMNS = (
    "id, agent_id, agent_version, owner, title, parent_session_id, root_session_id, "
    "harness_override, model_override, labels, status, last_event_id, turn_count, created_at, "
    "cwd, updated_at, sub_agent"
)


def _session_row(r: sqlite3.Row) -> SessionRow:
    return SessionRow(
        id=r["id"],
        agent_id=r["agent_id"],
        agent_version=r["agent_version"],
        owner=r["owner"],
        title=r["title"],
        parent_session_id=r["parent_session_id"],
        root_session_id=r["root_session_id"],
        harness_override=r["harness_override"],
        model_override=r["model_override"],
        labels=json.loads(r["labels"]),
        status=r["status"],
        last_event_id=r["last_event_id"],
        turn_count=r["turn_count"],
        created_at=r["created_at"],
        cwd=r["cwd"],
        updated_at=r["updated_at"] if r["updated_at"] is not None else r["created_at"],
        sub_agent=r["sub_agent"],
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


# Every table whose rows belong to one session (deleted with it).
_SESSION_TABLES = (
    "items",
    "events",
    "inbox",
    "elicitations",
    "permissions",
    "harness_state",
    "running_tasks",
    "process_groups",
)


def _descendants(c: sqlite3.Connection, session_id: str) -> list[str]:
    rows = c.execute(
        "WITH RECURSIVE d(id) AS (SELECT id FROM sessions WHERE parent_session_id = ? "
        "UNION SELECT s.id FROM sessions s JOIN d ON s.parent_session_id = d.id) "
        "SELECT id FROM d",
        (session_id,),
    ).fetchall()
    return [r[0] for r in rows]


def _marks(values: Sequence[Any]) -> str:
    return ", ".join("?" * len(values))


class SessionsMixin(SQLiteBase):
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
                f"INSERT INTO sessions ({_SESSION_COLUMNS}) VALUES "
                "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
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

        await self._write(write)

    async def get_session(self, session_id: str) -> SessionRow | None:
        def read(c: sqlite3.Connection) -> SessionRow | None:
            r = c.execute(
                f"SELECT {_SESSION_COLUMNS} FROM sessions WHERE id = ?", (session_id,)
            ).fetchone()
            return None if r is None else _session_row(r)

        return await self._read(read)

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
        grant on (or that are public), and every session below any of those — the
        core's rule (grants inherit down the tree from any ancestor). With ``cwd``, only
        sessions whose working directory is exactly ``cwd``. ``after`` must be a session
        the same listing could show.

        Raises:
            LookupError: ``after`` names no session, or one ``viewer`` may not read
                (the two are not told apart).
        """

        def read(c: sqlite3.Connection) -> Page:
            prefix = ""
            where: list[str] = ["1 = 1"]
            head: list[Any] = []
            args: list[Any] = []
            if viewer is not None:
                prefix = _VISIBLE_CTE
                head += [viewer, viewer]
                where.append("id IN (SELECT id FROM visible)")
            if agent_id is not None:
                where.append("agent_id = ?")
                args.append(agent_id)
            if parent_session_id is not None:
                where.append("parent_session_id = ?")
                args.append(parent_session_id)
            if cwd is not None:
                where.append("cwd = ?")
                args.append(cwd)
            if after is not None:
                visible = " AND id IN (SELECT id FROM visible)" if viewer is not None else ""
                cursor = c.execute(
                    f"{prefix}SELECT seq FROM sessions WHERE id = ?{visible}", (*head, after)
                ).fetchone()
                if cursor is None:
                    raise LookupError(after)
                where.append("seq < ?")
                args.append(cursor[0])
            rows = c.execute(
                f"{prefix}SELECT {_SESSION_COLUMNS} FROM sessions WHERE {' AND '.join(where)} "
                "ORDER BY seq DESC LIMIT ?",
                (*head, *args, limit + 1),
            ).fetchall()
            return Page([_session_row(r) for r in rows[:limit]], len(rows) > limit)

        return await self._read(read)

    async def update_session(self, session_id: str, **fields: Any) -> None:
        """Set columns of one session (``labels`` as a dict)."""
        if "labels" in fields:
            fields["labels"] = json.dumps(fields["labels"])
        assignments = ", ".join(f"{name} = ?" for name in fields)

        def write(c: sqlite3.Connection) -> None:
            c.execute(
                f"UPDATE sessions SET {assignments} WHERE id = ?", (*fields.values(), session_id)
            )

        await self._write(write)

    async def begin_turn(self, session_id: str) -> int:
        """Count a new turn; returns its zero-based number."""

        def write(c: sqlite3.Connection) -> int:
            r = c.execute(
                "UPDATE sessions SET turn_count = turn_count + 1 WHERE id = ? RETURNING turn_count",
                (session_id,),
            ).fetchone()
            return int(r[0]) - 1

        return await self._write(write)

    async def sessions_with_status(self, statuses: Sequence[str]) -> list[str]:
        """Ids of sessions whose latest status is one of ``statuses``."""
        marks = ", ".join("?" * len(statuses))

        def read(c: sqlite3.Connection) -> list[str]:
            rows = c.execute(f"SELECT id FROM sessions WHERE status IN ({marks})", tuple(statuses))
            return [r[0] for r in rows]

        return await self._read(read)

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
            for table in _SESSION_TABLES:
                c.executemany(f"DELETE FROM {table} WHERE session_id = ?", ids)
            for column in ("parent_session_id", "child_session_id"):
                c.executemany(f"DELETE FROM subagent_work WHERE {column} = ?", ids)
            c.executemany("DELETE FROM sessions WHERE id = ?", ids)

        await self._write(write)

    async def ancestor_ids(self, session_id: str) -> list[str]:
        """The parent, grandparent, … of a session, nearest first."""

        def read(c: sqlite3.Connection) -> list[str]:
            rows = c.execute(
                "WITH RECURSIVE a(id, depth) AS ("
                "SELECT parent_session_id, 1 FROM sessions WHERE id = ? "
                "UNION ALL SELECT s.parent_session_id, a.depth + 1 FROM sessions s "
                "JOIN a ON s.id = a.id WHERE a.depth < 64) "
                "SELECT id FROM a WHERE id IS NOT NULL ORDER BY depth",
                (session_id,),
            ).fetchall()
            return [r[0] for r in rows]

        return await self._read(read)

    async def descendant_ids(self, session_id: str) -> list[str]:
        """Every session below ``session_id`` (children, grandchildren, …)."""
        return await self._read(lambda c: _descendants(c, session_id))

    # -- permissions -----------------------------------------------------------------

    async def grants_for(
        self, session_ids: set[str], user_ids: set[str] | None
    ) -> list[tuple[str, int]]:
        """``(user_id, level)`` grants on any of ``session_ids`` (for ``user_ids``)."""
        sessions = sorted(session_ids)
        sql = f"SELECT user_id, level FROM permissions WHERE session_id IN ({_marks(sessions)})"
        args: list[Any] = list(sessions)
        if user_ids is not None:
            users = sorted(user_ids)
            sql += f" AND user_id IN ({_marks(users)})"
            args += users

        def read(c: sqlite3.Connection) -> list[tuple[str, int]]:
            return [(r[0], int(r[1])) for r in c.execute(sql + " ORDER BY user_id", args)]

        return await self._read(read)

    async def put_grant(self, session_id: str, user_id: str, level: int) -> None:
        def write(c: sqlite3.Connection) -> None:
            c.execute(
                "INSERT INTO permissions VALUES (?, ?, ?) "
                "ON CONFLICT(session_id, user_id) DO UPDATE SET level = excluded.level",
                (session_id, user_id, level),
            )

        await self._write(write)

    async def delete_grant(self, session_id: str, user_id: str) -> bool:
        def write(c: sqlite3.Connection) -> bool:
            cur = c.execute(
                "DELETE FROM permissions WHERE session_id = ? AND user_id = ?",
                (session_id, user_id),
            )
            return cur.rowcount > 0

        return await self._write(write)
