"""The open subscriptions of an event bus, by session.

:meth:`Subscriptions.open` opens a :class:`~._subscription.Subscription` (replay from
the store, then live: the iterator itself is there) and keeps it registered by session
for as long as its block runs, so that a delete can end even one still catching up
from the store (:meth:`Subscriptions.end_session`), and holds the session's state in
the bus (:class:`~._logs.SessionLogs`) meanwhile.

A live-only subscription (``after=None``) on a session this bus writes starts at the
newest id it assigned and attaches at once, without reading the store: every later
event is still to be delivered here. On a session it does not write (idle, or held by
another server) it starts at the newest id stored, attaches, and then reads the store
once for what was written meanwhile.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

from ...model import Event
from ...stores import Store
from ..cluster import Ownership
from ._live import LiveSubscribers
from ._logs import SessionLogs
from ._subscription import Subscription

__all__ = ["Subscriptions"]


class Subscriptions:
    """Opens subscriptions and keeps the open ones by session. Owned by the ``EventBus``.

    Args:
        store: where subscriptions replay from.
        logs: the bus's per-session state (held while a subscription is open).
        live: the live fan-out subscriptions attach to.
        ownership: which sessions this process writes (the others are read back).
    """

    def __init__(
        self, store: Store, logs: SessionLogs, live: LiveSubscribers, ownership: Ownership
    ) -> None:
        self._store = store
        self._logs = logs
        self._live = live
        self._owners = ownership
        self._open: defaultdict[str, set[Subscription]] = defaultdict(set)

    @asynccontextmanager
    async def open(
        self,
        session_id: str,
        after: int | None,
        *,
        admits: Callable[[Event], Awaitable[bool]] | None = None,
    ) -> AsyncIterator[Subscription]:
        """See :meth:`omnigent.core.bus.EventBus.subscribe`."""
        hold = self._logs.hold(session_id)
        try:
            live_now = newest_stored = False
            if after is None and not self._owners.owns(session_id):
                after = await self._logs.last_event_id(session_id)  # another server writes
                newest_stored = True
            elif after is None:
                log = await self._logs.load(session_id)
                assert log.last_id is not None
                after, live_now = log.last_id, True
            subscription = Subscription(self._store, self._live, session_id, after, admits=admits)
            if live_now:
                # No await since ``after`` was read, and this bus writes the session:
                # every later event is still to be delivered here, so attach now and
                # skip the store (a turn's stream would otherwise read back what its
                # turn published before the stream's first read).
                subscription.go_live()
            elif newest_stored:
                # ``after`` is the newest id stored a moment ago: attach first, and one
                # read of the store covers what was written since.
                subscription.attach_first()
            self._open[session_id].add(subscription)
            try:
                yield subscription
            finally:
                subscription.close()
                opened = self._open[session_id]
                opened.discard(subscription)
                if not opened:
                    del self._open[session_id]
        finally:
            self._logs.release(hold)

    def end_session(self, session_id: str) -> None:
        """End every open subscription of a deleted session (each iterator stops)."""
        for subscription in self._open.get(session_id, ()):
            subscription.ended = True
        self._live.end_session(session_id)
