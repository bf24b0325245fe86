"""The SQLite store's per-session log: conversation items and the event stream.

Items are the history the model reads (upserted by id, ordered by ``seq``); events are
the append-only wire log that clients replay from an ``event_id``. Events are written
in batches because a thread hop per row would dominate the hot path.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from .._ids import now
from ._rows import StoredEvent
from ._sql_log import SQLLogMixin, require_session
from ._sqlite_base import SQLiteBase

__all__ = ["LogMixin", "insert_items", "take_items"]


def insert_items(
    c: sqlite3.Connection,
    session_id: str,
    items: Iterable[dict[str, Any]],
    *,
    pending: bool = False,
) -> None:
    """Upsert ``items`` into a session's history on ``c`` (inside the caller's transaction).

    An item whose id exists keeps its place (and its ``pending`` mark) and takes the
    new data.
    """
    t = now()
    c.executemany(
        "INSERT INTO items (id, session_id, data, created_at, pending) VALUES (?, ?, ?, ?, ?) "
        "ON CONFLICT(id) DO UPDATE SET data = excluded.data",
        [(item["id"], session_id, json.dumps(item), t, int(pending)) for item in items],
    )


def take_items(
    c: sqlite3.Connection, session_id: str, item_ids: Sequence[str], taken_by: str | None
) -> None:
    """Move items to the end of the session's history, keeping their relative order, and
    mark them taken (see :meth:`LogMixin.move_items_to_end`), on ``c``."""
    for item_id in item_ids:
        c.execute(
            "UPDATE items SET seq = (SELECT MAX(seq) FROM items) + 1 "
            "WHERE id = ? AND session_id = ? AND seq < (SELECT MAX(seq) FROM items "
            "WHERE session_id = ?)",
            (item_id, session_id, session_id),
        )
    c.executemany(
        "UPDATE items SET pending = 0 WHERE id = ? AND session_id = ? AND pending = 1",
        [(item_id, session_id) for item_id in item_ids],
    )
    if taken_by is not None:
        c.executemany(
            "UPDATE items SET taken_by = ? WHERE id = ? AND session_id = ?",
            [(taken_by, item_id, session_id) for item_id in item_ids],
        )


class LogMixin(SQLLogMixin, SQLiteBase):
    """Item and event methods of :class:`~.sqlite.SQLiteStore`."""

    # -- items -----------------------------------------------------------------------

    async def put_items(
        self, session_id: str, items: Sequence[dict[str, Any]], *, pending: bool = False
    ) -> None:
        """Append items; an item whose id exists is replaced in place (same position).

        ``pending`` marks user messages no turn has taken yet (cleared by
        :meth:`move_items_to_end` or :meth:`settle_items`).

        Raises:
            LookupError: the session does not exist (deleted meanwhile).
        """

        def write(c: sqlite3.Connection) -> None:
            require_session(c, self.dialect, session_id)
            insert_items(c, session_id, items, pending=pending)

        await self._write(write)

    async def move_items_to_end(
        self, session_id: str, item_ids: Sequence[str], *, taken_by: str | None = None
    ) -> None:
        """Move items to the end of the session's history, keeping their relative order,
        and mark them taken (no longer pending; ``taken_by`` the turn's response id).

        A buffered message is stored when it arrives, but the model reads it only when
        a turn takes it; moving it keeps the stored order equal to what the model saw.
        """
        if not item_ids:
            return
        await self._write(lambda c: take_items(c, session_id, item_ids, taken_by))

    async def settle_items(self, session_id: str, item_ids: Sequence[str]) -> None:
        """Mark pending messages settled where they are (a stop dropped them): taken by
        no turn."""
        if not item_ids:
            return
        await self._write(
            lambda c: c.executemany(
                "UPDATE items SET pending = 0, taken_by = COALESCE(taken_by, '') "
                "WHERE id = ? AND session_id = ?",
                [(item_id, session_id) for item_id in item_ids],
            )
        )

    async def delete_items(self, session_id: str, item_ids: Sequence[str]) -> None:
        """Remove items from a session's history (a message the runtime refused)."""
        if not item_ids:
            return
        await self._write(
            lambda c: c.executemany(
                "DELETE FROM items WHERE id = ? AND session_id = ?",
                [(item_id, session_id) for item_id in item_ids],
            )
        )

    # -- events ----------------------------------------------------------------------

    async def append_events(
        self, events: Sequence[StoredEvent], *, on_stored: Callable[[], None] | None = None
    ) -> None:
        """Persist a batch of events in one transaction.

        ``on_stored`` is called from the commit's completion, on the event loop, a
        scheduler round before this call returns (see the protocol).

        Also keeps each session's ``last_event_id``, ``updated_at`` (its newest event's
        ``created_at``) and ``status`` (from its latest ``session.status`` event)
        current, so snapshots need no scan of the log. An event of a session that no
        longer exists is not written (a deleted session keeps no log). A batch stored
        already, with the same content, is not written twice: that is a success.

        Raises:
            sqlite3.IntegrityError: a row's id is taken by different content.
        """
        rows = [(e.session_id, e.event_id, e.type, e.data, e.session_id) for e in events]
        last: dict[str, tuple[int, float]] = {}
        status: dict[str, str] = {}
        for e in events:
            if e.event_id >= last.get(e.session_id, (0, 0.0))[0]:
                last[e.session_id] = (e.event_id, e.created_at or now())
            if e.status is not None:
                status[e.session_id] = e.status

        def write(c: sqlite3.Connection) -> None:
            try:
                c.executemany(
                    "INSERT INTO events SELECT ?, ?, ?, ? "
                    "WHERE EXISTS (SELECT 1 FROM sessions WHERE id = ?)",
                    rows,
                )
            except sqlite3.IntegrityError:
                # A retry of a batch whose first write committed after its caller had
                # stopped waiting finds it written: that is success. Anything else
                # taking these ids is a conflict.
                if _already_written(c, events):
                    return
                raise
            c.executemany(
                "UPDATE sessions SET last_event_id = MAX(last_event_id, ?), updated_at = ? "
                "WHERE id = ?",
                [(event_id, at, k) for k, (event_id, at) in last.items()],
            )
            c.executemany(
                "UPDATE sessions SET status = ? WHERE id = ?", [(v, k) for k, v in status.items()]
            )

        await self._write(write, on_stored)

    async def max_event_id(self, session_id: str) -> int | None:
        """The newest stored event id of the session (0 if none); ``None``: no such session."""

        def read(c: sqlite3.Connection) -> int | None:
            r = c.execute(
                "SELECT last_event_id, (SELECT MAX(event_id) FROM events WHERE session_id = ?) "
                "FROM sessions WHERE id = ?",
                (session_id, session_id),
            ).fetchone()
            if r is None:
                return None
            return max(int(r[0] or 0), int(r[1] or 0))

        return await self._read(read)


def _already_written(c: sqlite3.Connection, events: Sequence[StoredEvent]) -> bool:
    """Whether every event of the batch is stored with exactly this content (or its
    session is gone, which keeps no log)."""
    for e in events:
        r = c.execute(
            "SELECT data FROM events WHERE session_id = ? AND event_id = ?",
            (e.session_id, e.event_id),
        ).fetchone()
        if r is not None:
            if r[0] != e.data:
                return False
        elif c.execute("SELECT 1 FROM sessions WHERE id = ?", (e.session_id,)).fetchone():
            return False
    return True
