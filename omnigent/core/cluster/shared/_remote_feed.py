"""The remote feed: other servers' events, to this server's live subscribers.

With several servers on one database, a session's events are written by the server
that owns its tree; a subscriber on any other server is fed from the database. The
owner's write notifies every server (``NOTIFY omnigent_events`` with
``SESSION:LAST_ID:INSTANCE``, sent on commit); :class:`RemoteFeed` notes which of the
sessions it follows moved, then reads their new rows from the store and hands them
to the bus, which delivers them exactly as it delivers its own writes. A subscriber
still catches up from the store first and skips ids it has already seen, so it gets
every event once, in order, wherever it was written.

Only sessions with live subscribers here and whose tree this server does not hold
are read; the rest of the notifications cost a dictionary lookup. A notification
that was lost (the listening connection dropped) is made up for: after a
reconnection every followed session is read again from where its feed stopped.

Resource handling: the feed keeps one entry per followed session (bounded by the
live subscriptions) and runs as one task in the nursery it is started in.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from typing import Protocol

import trio

from ....model import Event, event_from_dict
from ....stores import Store

__all__ = ["RemoteFeed", "RemoteTarget"]

log = logging.getLogger(__name__)

_PAGE = 500
_RETRY = 0.5


class RemoteTarget(Protocol):
    """What the feed needs from the bus."""

    def live_position(self, session_id: str) -> int | None:
        """The lowest id delivered to a live subscriber of the session (``None``: none)."""
        ...

    def deliver_remote(self, event: Event) -> None:
        """Deliver an event another server wrote (already durable)."""
        ...

    def forget_session(self, session_id: str) -> None:
        """End the subscriptions of a session another server deleted."""
        ...


class RemoteFeed:
    """Reads what other servers wrote for the sessions subscribed to here."""

    def __init__(
        self, store: Store, bus: RemoteTarget, instance: str, owns: Callable[[str], bool]
    ) -> None:
        self._store = store
        self._bus = bus
        self._instance = instance
        self._owns = owns
        self._moved: dict[str, float] = {}  # session -> the newest id notified
        self._cursor: dict[str, int] = {}  # session -> the last id this feed delivered
        self._wake = trio.Event()

    def notify(self, payload: str) -> None:
        """Take one notification (``""``: the listener reconnected; re-read all)."""
        if not payload:
            for session_id in self._cursor:
                self._moved[session_id] = math.inf
            self._wake.set()
            return
        try:
            session_id, last, writer = payload.rsplit(":", 2)
        except ValueError:
            log.warning("ignoring a malformed event notification %.100r", payload)
            return
        if writer == self._instance:
            return
        if last == "deleted":
            self._cursor.pop(session_id, None)
            self._moved.pop(session_id, None)
            self._bus.forget_session(session_id)
            return
        if self._bus.live_position(session_id) is None or self._owns(session_id):
            return
        try:
            newest = float(last)
        except ValueError:
            return
        self._moved[session_id] = max(newest, self._moved.get(session_id, 0))
        self._wake.set()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Feed subscribers until cancelled."""
        task_status.started()
        while True:
            await self._wake.wait()
            self._wake = trio.Event()
            moved, self._moved = self._moved, {}
            for session_id, newest in moved.items():
                try:
                    await self._read(session_id, newest)
                except Exception:
                    # The store is away: try again, from where this feed stopped.
                    log.warning("could not read the events of %s", session_id, exc_info=True)
                    self._moved[session_id] = max(newest, self._moved.get(session_id, 0))
                    await trio.sleep(_RETRY)
                    self._wake.set()
            self._drop_unfollowed()

    async def _read(self, session_id: str, newest: float) -> None:
        position = self._bus.live_position(session_id)
        if position is None or self._owns(session_id):
            self._cursor.pop(session_id, None)
            return
        cursor = self._cursor.get(session_id, position)
        while cursor < newest:
            rows = await self._store.read_events(session_id, cursor, _PAGE)
            for row in rows:
                event = event_from_dict(row)
                self._bus.deliver_remote(event)
                cursor = event.event_id
            self._cursor[session_id] = cursor
            if len(rows) < _PAGE:
                break

    def _drop_unfollowed(self) -> None:
        for session_id in [s for s in self._cursor if self._bus.live_position(s) is None]:
            del self._cursor[session_id]
