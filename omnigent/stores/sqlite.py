"""The embedded SQLite store: WAL, one writer, readers in threads.

Every call runs the blocking ``sqlite3`` work in a worker thread
(``trio.to_thread.run_sync``). Writes share one connection behind a
``CapacityLimiter(1)``, so they are serialised without ever blocking the event loop;
reads use a small pool of their own connections and run beside the writer (WAL).
An in-memory store (``path=None``) has a single connection for both.

A thread hop costs 150–200 µs: hot paths (events) write in batches
(:meth:`SQLiteStore.append_events`), never one row per call.

Cancellation: a thread call cannot be interrupted; a cancelled caller waits for the
statement it started to finish (bounded by SQLite's busy timeout), then sees
``trio.Cancelled``. Nothing is left half-written: each method is one transaction.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

import attrs
import trio

from .._ids import new_id, now
from ._schema import MIGRATIONS
from .base import AgentRow, FileRow, Page, SessionRow, StoredEvent

__all__ = ["SQLiteStore", "open_sqlite_store"]

T = TypeVar("T")
_READERS = 4

_SESSION_COLUMNS = (
    "id, agent_id, agent_version, owner, title, parent_session_id, root_session_id, "
    "harness_override, model_override, labels, status, last_event_id, turn_count, created_at"
)


def _connect(path: Path | None) -> sqlite3.Connection:
    target = ":memory:" if path is None else str(path)
    conn = sqlite3.connect(target, isolation_level=None, check_same_thread=False, timeout=30)
    conn.row_factory = sqlite3.Row
    conn.execute("PRAGMA foreign_keys = ON")
    if path is not None:
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")
    return conn


def _migrate(conn: sqlite3.Connection) -> None:
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    for number, script in enumerate(MIGRATIONS[version:], start=version + 1):
        conn.execute("BEGIN IMMEDIATE")
        try:
            for statement in script.split(";"):
                if statement.strip():
                    conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {number}")
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise


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
    )


def _marks(values: Sequence[Any]) -> str:
    return ", ".join("?" * len(values))


class SQLiteStore:
    """SQLite-backed store. Open with :func:`open_sqlite_store`."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._writer = _connect(path)
        self._write_limiter = trio.CapacityLimiter(1)
        self._readers: list[sqlite3.Connection] = []
        self._read_limiter = self._write_limiter
        if path is not None:
            self._readers = [_connect(path) for _ in range(_READERS)]
            self._read_limiter = trio.CapacityLimiter(_READERS)
        _migrate(self._writer)

    def close(self) -> None:
        for conn in [self._writer, *self._readers]:
            conn.close()

    # -- thread plumbing -------------------------------------------------------------

    async def _write(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        def run() -> T:
            conn = self._writer
            conn.execute("BEGIN IMMEDIATE")
            try:
                result = fn(conn)
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return result

        return await trio.to_thread.run_sync(run, limiter=self._write_limiter)

    async def _read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        if not self._readers:
            return await trio.to_thread.run_sync(fn, self._writer, limiter=self._read_limiter)
        async with self._read_limiter:
            conn = self._readers.pop()
            try:
                return await trio.to_thread.run_sync(fn, conn)
            finally:
                self._readers.append(conn)

    # -- agents ----------------------------------------------------------------------

    async def put_agent_version(self, name: str, spec: dict[str, Any], owner: str) -> AgentRow:
        """Create the agent ``name``, or add a new version of it; returns the new row."""
        spec_text = json.dumps(spec)

        def write(c: sqlite3.Connection) -> AgentRow:
            t = now()
            row = c.execute("SELECT * FROM agents WHERE name = ?", (name,)).fetchone()
            if row is None:
                agent_id, version, created, agent_owner = new_id("agent"), 1, t, owner
                c.execute(
                    "INSERT INTO agents VALUES (?, ?, ?, 1, ?, ?)", (agent_id, name, owner, t, t)
                )
            else:
                agent_id, version = row["id"], row["latest_version"] + 1
                created, agent_owner = row["created_at"], row["owner"]
                c.execute(
                    "UPDATE agents SET latest_version = ?, updated_at = ? WHERE id = ?",
                    (version, t, agent_id),
                )
            c.execute(
                "INSERT INTO agent_versions VALUES (?, ?, ?, ?)", (agent_id, version, spec_text, t)
            )
            return AgentRow(agent_id, name, agent_owner, version, spec, created, t)

        return await self._write(write)

    async def get_agent(self, agent_id: str, version: int | None = None) -> AgentRow | None:
        """The agent with that id (its latest version unless ``version`` is given)."""
        return await self._read(lambda c: self._agent(c, "a.id = ?", agent_id, version))

    async def get_agent_by_name(self, name: str) -> AgentRow | None:
        return await self._read(lambda c: self._agent(c, "a.name = ?", name, None))

    async def list_agents(self) -> list[AgentRow]:
        def read(c: sqlite3.Connection) -> list[AgentRow]:
            ids = [r[0] for r in c.execute("SELECT id FROM agents ORDER BY created_at, id")]
            return [a for i in ids if (a := self._agent(c, "a.id = ?", i, None)) is not None]

        return await self._read(read)

    @staticmethod
    def _agent(c: sqlite3.Connection, where: str, key: str, version: int | None) -> AgentRow | None:
        row = c.execute(
            "SELECT a.id, a.name, a.owner, v.version, v.spec, a.created_at, v.created_at AS vt "
            "FROM agents a JOIN agent_versions v ON v.agent_id = a.id "
            f"AND v.version = COALESCE(?, a.latest_version) WHERE {where}",
            (version, key),
        ).fetchone()
        if row is None:
            return None
        return AgentRow(
            row["id"],
            row["name"],
            row["owner"],
            row["version"],
            json.loads(row["spec"]),
            row["created_at"],
            row["vt"],
        )

    # -- sessions --------------------------------------------------------------------

    async def insert_session(self, row: SessionRow, items: Sequence[dict[str, Any]] = ()) -> None:
        """Create a session and its initial items in one transaction."""

        def write(c: sqlite3.Connection) -> None:
            c.execute(
                f"INSERT INTO sessions ({_SESSION_COLUMNS}) VALUES "
                "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
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
                ),
            )
            self._insert_items(c, row.id, items)

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
    ) -> Page:
        """Sessions newest first; ``after`` is the id of the last row of the previous page.

        With ``viewer``, only sessions that user may read: owned, granted, or public
        (directly or through the session's root).
        """

        def read(c: sqlite3.Connection) -> Page:
            where: list[str] = ["1 = 1"]
            args: list[Any] = []
            if viewer is not None:
                where.append(
                    "(owner = ? OR root_session_id IN (SELECT id FROM sessions WHERE owner = ?) "
                    "OR EXISTS (SELECT 1 FROM permissions p WHERE p.session_id IN "
                    "(sessions.id, sessions.root_session_id) AND p.user_id IN (?, '__public__')))"
                )
                args += [viewer, viewer, viewer]
            if agent_id is not None:
                where.append("agent_id = ?")
                args.append(agent_id)
            if parent_session_id is not None:
                where.append("parent_session_id = ?")
                args.append(parent_session_id)
            if after is not None:
                where.append("seq < COALESCE((SELECT seq FROM sessions WHERE id = ?), -1)")
                args.append(after)
            rows = c.execute(
                f"SELECT {_SESSION_COLUMNS} FROM sessions WHERE {' AND '.join(where)} "
                "ORDER BY seq DESC LIMIT ?",
                (*args, limit + 1),
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
        """Delete sessions with everything that belongs to them."""
        ids = [(i,) for i in session_ids]

        def write(c: sqlite3.Connection) -> None:
            for table in ("items", "events", "inbox", "elicitations", "permissions"):
                c.executemany(f"DELETE FROM {table} WHERE session_id = ?", ids)
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

        def read(c: sqlite3.Connection) -> list[str]:
            rows = c.execute(
                "WITH RECURSIVE d(id) AS (SELECT id FROM sessions WHERE parent_session_id = ? "
                "UNION SELECT s.id FROM sessions s JOIN d ON s.parent_session_id = d.id) "
                "SELECT id FROM d",
                (session_id,),
            ).fetchall()
            return [r[0] for r in rows]

        return await self._read(read)

    # -- items -----------------------------------------------------------------------

    @staticmethod
    def _insert_items(
        c: sqlite3.Connection, session_id: str, items: Iterable[dict[str, Any]]
    ) -> None:
        t = now()
        c.executemany(
            "INSERT INTO items (id, session_id, data, created_at) VALUES (?, ?, ?, ?) "
            "ON CONFLICT(id) DO UPDATE SET data = excluded.data",
            [(item["id"], session_id, json.dumps(item), t) for item in items],
        )

    async def put_items(self, session_id: str, items: Sequence[dict[str, Any]]) -> None:
        """Append items; an item whose id exists is replaced in place (same position)."""
        await self._write(lambda c: self._insert_items(c, session_id, items))

    async def move_items_to_end(self, session_id: str, item_ids: Sequence[str]) -> None:
        """Move items to the end of the session's history, keeping their relative order.

        A buffered message is stored when it arrives, but the model reads it only when
        a turn takes it; moving it keeps the stored order equal to what the model saw.
        """
        if not item_ids:
            return

        def write(c: sqlite3.Connection) -> None:
            for item_id in item_ids:
                c.execute(
                    "UPDATE items SET seq = (SELECT MAX(seq) FROM items) + 1 "
                    "WHERE id = ? AND session_id = ? AND seq < (SELECT MAX(seq) FROM items "
                    "WHERE session_id = ?)",
                    (item_id, session_id, session_id),
                )

        await self._write(write)

    async def list_items(
        self,
        session_id: str,
        *,
        order: str = "asc",
        limit: int | None = None,
        after: str | None = None,
    ) -> Page:
        """Items of a session in order; ``after`` is an item id (exclusive cursor)."""
        direction, compare = ("ASC", ">") if order == "asc" else ("DESC", "<")

        def read(c: sqlite3.Connection) -> Page:
            where, args = "session_id = ?", list[Any]([session_id])
            if after is not None:
                where += f" AND seq {compare} COALESCE((SELECT seq FROM items WHERE id = ?), ?)"
                args += [after, 0 if order == "asc" else 2**62]
            sql = f"SELECT data FROM items WHERE {where} ORDER BY seq {direction}"
            if limit is not None:
                sql += f" LIMIT {int(limit) + 1}"
            rows = [json.loads(r[0]) for r in c.execute(sql, args)]
            if limit is not None and len(rows) > limit:
                return Page(rows[:limit], True)
            return Page(rows, False)

        return await self._read(read)

    # -- events ----------------------------------------------------------------------

    async def append_events(self, events: Sequence[StoredEvent]) -> None:
        """Persist a batch of events in one transaction.

        Also keeps each session's ``last_event_id`` and ``status`` (from its latest
        ``session.status`` event) current, so snapshots need no scan of the log.
        """
        rows = [(e.session_id, e.event_id, e.type, json.dumps(e.data)) for e in events]
        last: dict[str, int] = {}
        status: dict[str, str] = {}
        for e in events:
            last[e.session_id] = e.event_id
            if e.type == "session.status":
                status[e.session_id] = e.data["status"]

        def write(c: sqlite3.Connection) -> None:
            c.executemany("INSERT INTO events VALUES (?, ?, ?, ?)", rows)
            c.executemany(
                "UPDATE sessions SET last_event_id = ? WHERE id = ?",
                [(v, k) for k, v in last.items()],
            )
            c.executemany(
                "UPDATE sessions SET status = ? WHERE id = ?", [(v, k) for k, v in status.items()]
            )

        await self._write(write)

    async def read_events(
        self, session_id: str, after: int, limit: int = 1000
    ) -> list[dict[str, Any]]:
        """Events with ``event_id > after``, oldest first, wire form."""

        def read(c: sqlite3.Connection) -> list[dict[str, Any]]:
            rows = c.execute(
                "SELECT data FROM events WHERE session_id = ? AND event_id > ? "
                "ORDER BY event_id LIMIT ?",
                (session_id, after, limit),
            )
            return [json.loads(r[0]) for r in rows]

        return await self._read(read)

    async def max_event_id(self, session_id: str) -> int:
        def read(c: sqlite3.Connection) -> int:
            r = c.execute(
                "SELECT MAX(event_id) FROM events WHERE session_id = ?", (session_id,)
            ).fetchone()
            return int(r[0] or 0)

        return await self._read(read)

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

    # -- inbox -----------------------------------------------------------------------

    async def add_inbox_item(self, session_id: str, item_id: str, data: str) -> int:
        """Persist one inbox item; returns the session's undelivered count."""

        def write(c: sqlite3.Connection) -> int:
            c.execute(
                "INSERT INTO inbox (id, session_id, data, created_at) VALUES (?, ?, ?, ?)",
                (item_id, session_id, data, now()),
            )
            return self._undelivered(c, session_id)

        return await self._write(write)

    async def drain_inbox(self, session_id: str) -> list[tuple[str, str]]:
        """Take every undelivered item ``(id, data)``, oldest first, marking it delivered."""

        def write(c: sqlite3.Connection) -> list[tuple[str, str]]:
            rows = c.execute(
                "SELECT id, data FROM inbox WHERE session_id = ? AND delivered = 0 ORDER BY seq",
                (session_id,),
            ).fetchall()
            c.execute(
                "UPDATE inbox SET delivered = 1 WHERE session_id = ? AND delivered = 0",
                (session_id,),
            )
            return [(r[0], r[1]) for r in rows]

        return await self._write(write)

    async def inbox_count(self, session_id: str) -> int:
        return await self._read(lambda c: self._undelivered(c, session_id))

    @staticmethod
    def _undelivered(c: sqlite3.Connection, session_id: str) -> int:
        r = c.execute(
            "SELECT COUNT(*) FROM inbox WHERE session_id = ? AND delivered = 0", (session_id,)
        ).fetchone()
        return int(r[0])

    # -- elicitations ---------------------------------------------------------------

    async def insert_elicitation(self, elicitation_id: str, session_id: str, request: str) -> None:
        def write(c: sqlite3.Connection) -> None:
            c.execute(
                "INSERT INTO elicitations (id, session_id, status, request, created_at) "
                "VALUES (?, ?, 'pending', ?, ?)",
                (elicitation_id, session_id, request, now()),
            )

        await self._write(write)

    async def finish_elicitation(self, elicitation_id: str, status: str, action: str) -> None:
        def write(c: sqlite3.Connection) -> None:
            c.execute(
                "UPDATE elicitations SET status = ?, action = ?, resolved_at = ? WHERE id = ?",
                (status, action, now(), elicitation_id),
            )

        await self._write(write)

    async def get_elicitation(self, elicitation_id: str) -> dict[str, Any] | None:
        def read(c: sqlite3.Connection) -> dict[str, Any] | None:
            r = c.execute("SELECT * FROM elicitations WHERE id = ?", (elicitation_id,)).fetchone()
            return None if r is None else dict(r)

        return await self._read(read)

    async def expire_pending_elicitations(self) -> int:
        """Mark every pending elicitation expired (their waiters died with a process)."""

        def write(c: sqlite3.Connection) -> int:
            cur = c.execute(
                "UPDATE elicitations SET status = 'expired', action = 'expired', "
                "resolved_at = ? WHERE status = 'pending'",
                (now(),),
            )
            return cur.rowcount

        return await self._write(write)

    # -- files -----------------------------------------------------------------------

    async def put_file(self, row: FileRow, content: bytes) -> None:
        def write(c: sqlite3.Connection) -> None:
            c.execute(
                "INSERT INTO files VALUES (?, ?, ?, ?, ?, ?, ?)",
                (*attrs.astuple(row)[:5], content, row.created_at),
            )

        await self._write(write)

    async def get_file(self, file_id: str) -> FileRow | None:
        def read(c: sqlite3.Connection) -> FileRow | None:
            r = c.execute(
                "SELECT id, filename, content_type, bytes, owner, created_at FROM files "
                "WHERE id = ?",
                (file_id,),
            ).fetchone()
            return None if r is None else FileRow(*r)

        return await self._read(read)

    async def get_file_content(self, file_id: str) -> bytes | None:
        def read(c: sqlite3.Connection) -> bytes | None:
            r = c.execute("SELECT content FROM files WHERE id = ?", (file_id,)).fetchone()
            return None if r is None else bytes(r[0])

        return await self._read(read)


@asynccontextmanager
async def open_sqlite_store(path: Path | None) -> AsyncIterator[SQLiteStore]:
    """Open (creating and migrating as needed) the store at ``path``; ``None``: memory.

    Resource handling: the connections close when the block exits, however it exits.
    """
    if path is not None:
        await trio.to_thread.run_sync(lambda: path.parent.mkdir(parents=True, exist_ok=True))
    store = await trio.to_thread.run_sync(SQLiteStore, path)
    try:
        yield store
    finally:
        store.close()
