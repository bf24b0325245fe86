"""The event bus's subscribe side: open a subscription, attach it for live delivery.

:meth:`BusSubscribing.subscribe` opens a :class:`~._subscription.Subscription` (replay
from the store, then live: the iterator itself is there) and keeps it registered by
session for as long as its block runs, so a delete can end even one still catching up
from the store (:meth:`~._state.BusState.forget_session`), and so the session's
state (:mod:`._state`) is kept while it is open. The subscription attaches to and
detaches from the live fan-out (:mod:`._live`) through :meth:`BusSubscribing._attach`
and :meth:`BusSubscribing._detach`.

A live-only subscription (``after=None``) on a session this bus writes starts at the
newest id it assigned and attaches at once, without reading the store: every later
event is still to be delivered here.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import trio

from ...model import Event
from ._state import BusState
from ._subscription import Live, Subscription

__all__ = ["BusSubscribing"]


class BusSubscribing(BusState):
    """The subscribe half of an :class:`~._bus.EventBus`."""

    def _attach(
        self, session_id: str, position: int = 0
    ) -> tuple[Live, trio.MemoryReceiveChannel[tuple[Event, ...]]]:
        return self._live.attach(session_id, position, closed=self._closed)

    def _detach(self, session_id: str, live: Live) -> None:
        if self._live.detach(session_id, live):
            self._maybe_drop(session_id)

    @asynccontextmanager
    async def subscribe(
        self,
        session_id: str,
        after: int | None,
        *,
        admits: Callable[[Event], Awaitable[bool]] | None = None,
    ) -> AsyncIterator[Subscription]:
        """Events of one session with ``event_id > after``; ``None`` means live only.

        ``admits``, if given, is asked about each event before it is yielded; an event
        it refuses is skipped (and counts as seen: ``last_event_id`` moves past it).

        Resource handling: the live registration is released when the block exits.
        """
        live_now = False
        if after is None and not self._owners.owns(session_id):
            after = await self.last_event_id(session_id)  # written by another server
        elif after is None:
            entry = await self._loaded(session_id)  # kept: the subscription holds it now
            assert entry.last_id is not None
            after, live_now = entry.last_id, True
        subscription = Subscription(self, session_id, after, admits=admits)
        if live_now:
            # No await since ``after`` was read, and this bus writes the session: every
            # later event is still to be delivered here, so attach now and skip the
            # store (a turn's stream would otherwise read back what its turn published
            # before the stream's first read).
            subscription._go_live()
        self._open[session_id].add(subscription)
        try:
            yield subscription
        finally:
            subscription._close()
            opened = self._open[session_id]
            opened.discard(subscription)
            if not opened:
                del self._open[session_id]
                self._maybe_drop(session_id)
