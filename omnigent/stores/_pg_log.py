"""The PostgreSQL store's per-session log: conversation items and the event stream.

Items are the history the model reads (upserted by id, ordered by ``seq``); events are
the append-only wire log clients replay from an ``event_id``. The same tables and
meaning as the SQLite store's ``_sqlite_log``: a user message is stored *pending* until
a turn takes it (``taken_by`` then names that turn's response, ``""`` a stop that
dropped it), so a restart — or another server — knows which are unanswered.

:meth:`LogMixin.append_events` is the hot path: a whole batch — the events, every
session's new ``last_event_id``, ``updated_at`` and ``status``, and one ``NOTIFY
omnigent_events`` per session (``SESSION:LAST_ID:INSTANCE``, delivered to other servers
on commit) — is one statement, so one round trip. In a cluster it is fenced: only
sessions whose tree this instance holds a live lease on are written (the lease rows
are share-locked by the same statement, so a takeover waits for the write to finish
and then sees it). The primary key ``(session_id, event_id)`` is the backstop behind
that, never the mechanism. Events of a session that no longer exists are not written.

The batch's arrays are sent in binary (``%(name)b``): psycopg builds a text-format
array in Python, quoting and escaping every element with a regular expression — for
a batch of 720 events of JSON, 25 ms of the event loop's GIL and most of the
statement's time; the binary form takes 1 ms (issue 32). The batch runs on the
connections kept for the event writer (``_run_events``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Iterable, Sequence
from typing import Any

import psycopg

from .._grouped import Grouped
from .._ids import now
from ._cluster import EVENTS_CHANNEL, LeaseLost
from ._pg_base import Conn, PGBase
from ._rows import StoredEvent
from ._sql_log import SQLLogMixin

__all__ = ["TAKE_ONE_ITEM", "LogMixin", "insert_items", "take_items"]

_BATCH = (
    "WITH batch AS (SELECT * FROM unnest(%(sid)b::text[], %(eid)b::bigint[], "
    "%(type)b::text[], %(data)b::text[]) AS b(session_id, event_id, type, data)), "
    "heads AS (SELECT * FROM unnest(%(hsid)b::text[], %(hlast)b::bigint[], %(hstatus)b::text[], "
    "%(hat)b::float8[]) AS h(session_id, last_id, status, at)), "
    "present AS (SELECT id FROM sessions WHERE id = ANY(%(hsid)b)), "
)
_ALLOWED_FENCED = (
    "allowed AS (SELECT s.id FROM sessions s JOIN leases l ON l.root_id = s.root_session_id "
    "WHERE s.id = ANY(%(hsid)b) AND l.instance = %(me)b AND l.expires_at > now() "
    "ORDER BY l.root_id FOR SHARE OF l), "  # in root order: see _pg_cluster's _MINE
)
_ALLOWED_ALL = "allowed AS (SELECT id FROM present), "
_WRITE = (
    "ins AS (INSERT INTO events (session_id, event_id, type, data) "
    "SELECT b.* FROM batch b WHERE b.session_id IN (SELECT id FROM allowed)), "
    "upd AS (UPDATE sessions s SET last_event_id = GREATEST(s.last_event_id, h.last_id), "
    "updated_at = h.at, status = COALESCE(h.status, s.status) FROM heads h "
    "WHERE s.id = h.session_id AND h.session_id IN (SELECT id FROM allowed)) "
    "SELECT h.session_id, h.session_id IN (SELECT id FROM allowed), "
    "h.session_id IN (SELECT id FROM present), "
    "CASE WHEN h.session_id IN (SELECT id FROM allowed) THEN pg_notify('" + EVENTS_CHANNEL + "', "
    "h.session_id || ':' || h.last_id || ':' || %(me)b) END FROM heads h"
)


# The session's row key-share-locked (a delete takes it FOR UPDATE; the event batch's
# update of its head, which takes no key lock, is not waited for), the items upserted
# only if it exists, in the order given; whether it exists. The arrays go in binary,
# as the event batch's do (a text-format array is quoted in Python).
_UPSERT_ITEMS = (
    "WITH s AS (SELECT id FROM sessions WHERE id = %s FOR KEY SHARE), "
    "ins AS (INSERT INTO items (id, session_id, data, created_at, pending) "
    "SELECT u.i, %s, u.d, %s, %s FROM s, unnest(%b::text[], %b::text[]) "
    "WITH ORDINALITY AS u(i, d, n) ORDER BY u.n "
    "ON CONFLICT (id) DO UPDATE SET data = EXCLUDED.data) "
    "SELECT EXISTS (SELECT 1 FROM s)"
)

# move_items_to_end of one item: moved to the end unless it is there, marked taken.
# Parameters: the session, taken_by, the item, the session.
TAKE_ONE_ITEM = (
    "UPDATE items SET seq = CASE WHEN seq < (SELECT MAX(seq) FROM items WHERE session_id = %s) "
    "THEN nextval(pg_get_serial_sequence('items', 'seq')) ELSE seq END, "
    "pending = FALSE, taken_by = COALESCE(%s, taken_by) WHERE id = %s AND session_id = %s"
)


def insert_items(
    c: Conn, session_id: str, items: Iterable[dict[str, Any]], *, pending: bool = False
) -> bool:
    """Upsert ``items`` into a session's history on ``c``, in one statement; whether the
    session exists (if not, nothing is written).

    An item whose id exists keeps its place (and its ``pending`` mark) and takes the
    new data.
    """
    rows = list(items)
    ids, data = [i["id"] for i in rows], [json.dumps(i) for i in rows]
    found = c.execute(_UPSERT_ITEMS, (session_id, session_id, now(), pending, ids, data))
    row = found.fetchone()
    return row is not None and bool(row[0])


def take_items(c: Conn, session_id: str, item_ids: Sequence[str], taken_by: str | None) -> None:
    """Move items to the end of the session's history, keeping their relative order, and
    mark them taken (see :meth:`LogMixin.move_items_to_end`), on ``c``, in its
    transaction (one statement for one item: :data:`TAKE_ONE_ITEM`)."""
    for item_id in item_ids:
        c.execute(
            "UPDATE items SET seq = nextval(pg_get_serial_sequence('items', 'seq')) "
            "WHERE id = %s AND session_id = %s "
            "AND seq < (SELECT MAX(seq) FROM items WHERE session_id = %s)",
            (item_id, session_id, session_id),
        )
    c.execute(
        "UPDATE items SET pending = FALSE, taken_by = COALESCE(%s, taken_by) "
        "WHERE session_id = %s AND id = ANY(%s)",
        (taken_by, session_id, list(item_ids)),
    )


class LogMixin(SQLLogMixin, PGBase):
    """Item and event methods of :class:`~.postgres.PostgresStore`."""

    #: Reads of histories asked at the same moment, sent together (made by the store).
    _history_reads: Grouped[str, list[str]]

    async def _sql_history(self, session_id: str) -> list[dict[str, Any]]:
        """A session's history as a turn's start loads it (every taken item, in order),
        read together with the others asked while one read is on its way
        (:class:`~omnigent._grouped.Grouped`)."""
        return [json.loads(data) for data in await self._history_reads(session_id)]

    async def _read_histories(self, session_ids: Collection[str]) -> dict[str, list[str]]:
        """Each session's taken items (JSON text, in order), in one statement; each
        caller decodes its own."""
        ids = list(session_ids)

        def read(c: Conn) -> dict[str, list[str]]:
            histories: dict[str, list[str]] = {session_id: [] for session_id in ids}
            rows = c.execute(
                "SELECT session_id, data FROM items WHERE session_id = ANY(%s) "
                "AND NOT pending ORDER BY seq",
                (ids,),
            )
            for session_id, data in rows:
                histories[session_id].append(data)
            return histories

        return await self._read(read)

    # -- items -----------------------------------------------------------------------

    async def put_items(
        self, session_id: str, items: Sequence[dict[str, Any]], *, pending: bool = False
    ) -> None:
        """Append items; an item whose id exists is replaced in place (same position).

        ``pending`` marks user messages no turn has taken yet.

        Raises:
            LookupError: the session does not exist (deleted meanwhile).
        """

        def write(c: Conn) -> None:
            # One statement (one round trip, where a transaction took four): the
            # session's row is key-share-locked, so a delete under way waits for it or
            # has gone first — then nothing is written and the session is missing.
            if not insert_items(c, session_id, items, pending=pending):
                raise LookupError(session_id)

        await self._run(write)

    async def move_items_to_end(
        self, session_id: str, item_ids: Sequence[str], *, taken_by: str | None = None
    ) -> None:
        """Move items to the end of the session's history, keeping their relative order,
        and mark them taken (``taken_by``: the response id of the turn that took them)."""
        if not item_ids:
            return
        if len(item_ids) == 1:  # a message taken during a turn: one statement
            await self._run(
                lambda c: c.execute(TAKE_ONE_ITEM, (session_id, taken_by, item_ids[0], session_id))
            )
            return
        await self._transaction(lambda c: take_items(c, session_id, item_ids, taken_by))

    async def settle_items(self, session_id: str, item_ids: Sequence[str]) -> None:
        """Mark pending messages settled where they are (a stop dropped them)."""
        if not item_ids:
            return
        await self._run(
            lambda c: c.execute(
                "UPDATE items SET pending = FALSE, taken_by = COALESCE(taken_by, '') "
                "WHERE session_id = %s AND id = ANY(%s)",
                (session_id, list(item_ids)),
            )
        )

    async def delete_items(self, session_id: str, item_ids: Sequence[str]) -> None:
        """Remove items from a session's history (a message the runtime refused)."""
        if not item_ids:
            return
        await self._run(
            lambda c: c.execute(
                "DELETE FROM items WHERE session_id = %s AND id = ANY(%s)",
                (session_id, list(item_ids)),
            )
        )

    # -- events ----------------------------------------------------------------------

    async def append_events(
        self, events: Sequence[StoredEvent], *, on_stored: Callable[[], None] | None = None
    ) -> None:
        """Persist a batch of events in one statement (see the module docstring).

        ``on_stored`` is called once it committed, just before this returns.

        Also keeps each session's ``last_event_id``, ``updated_at`` (its newest
        event's ``created_at``) and ``status`` (from its latest ``session.status``).

        Raises:
            LeaseLost: (cluster members) some sessions' events were not written: this
                instance does not hold their tree's lease. The other sessions' were.
            psycopg.errors.UniqueViolation: a row's id is taken by different content.
        """
        if not events:
            return
        last: dict[str, int] = {}
        at: dict[str, float] = {}
        status: dict[str, str | None] = {}
        for e in events:
            if e.event_id >= last.get(e.session_id, 0):
                last[e.session_id] = e.event_id
                at[e.session_id] = e.created_at or now()
            status.setdefault(e.session_id, None)
            if e.status is not None:
                status[e.session_id] = e.status
        heads = list(last)
        params: dict[str, Any] = {
            "sid": [e.session_id for e in events],
            "eid": [e.event_id for e in events],
            "type": [e.type for e in events],
            "data": [e.data for e in events],
            "hsid": heads,
            "hlast": [last[s] for s in heads],
            "hstatus": [status[s] for s in heads],
            "hat": [float(at[s]) for s in heads],  # binary float8: no int in the list
            "me": self.instance or "",
        }
        statement = _BATCH + (_ALLOWED_FENCED if self.instance else _ALLOWED_ALL) + _WRITE

        def write(c: Conn) -> list[str]:
            try:
                rows = c.execute(statement, params).fetchall()
            except psycopg.errors.UniqueViolation:
                # A retry of a batch whose commit answer was lost finds it written:
                # that is success. Anything else taking these ids is a conflict.
                if _already_written(c, params):
                    return []
                raise
            # Refused: the session exists but its tree's lease is not ours (a session
            # that no longer exists keeps no log, and is no one's loss).
            return [r[0] for r in rows if r[2] and not r[1]]

        refused = await self._run_events(write)
        if refused:
            raise LeaseLost(sorted(refused))
        if on_stored is not None:
            on_stored()

    async def max_event_id(self, session_id: str) -> int | None:
        """The newest stored event id of the session (0 if none); ``None``: no such session."""

        def read(c: Conn) -> int | None:
            r = c.execute(
                "SELECT GREATEST(last_event_id, COALESCE((SELECT MAX(event_id) FROM events "
                "WHERE session_id = %s), 0)) FROM sessions WHERE id = %s",
                (session_id, session_id),
            ).fetchone()
            return None if r is None else int(r[0])

        return await self._read(read)


def _already_written(c: Conn, params: dict[str, Any]) -> bool:
    """Whether every event of the batch is stored with exactly this content."""
    r = c.execute(
        "SELECT count(*) FROM unnest(%(sid)b::text[], %(eid)b::bigint[], %(data)b::text[]) "
        "AS b(session_id, event_id, data) JOIN events e USING (session_id, event_id) "
        "WHERE e.data = b.data",
        params,
    ).fetchone()
    return r is not None and int(r[0]) == len(params["sid"])
