"""The bus's live subscribers: who gets a session's stored events as they are written.

:class:`LiveSubscribers` is the fan-out part of the :class:`~._bus.EventBus`. The
writer hands it each session's share of a stored batch (:meth:`LiveSubscribers.deliver`):
every live subscriber of that session gets the batch as one tuple — one wake-up, the
tuple shared by all of them. A subscriber too slow to keep
:data:`SUBSCRIBER_BUFFER` events pending is detached (``lagging``); its subscription
resumes from the store, so it still gets every event once, in order.

Resource handling: each subscriber's channel is bounded (a batch holds at least one
event, so never more than :data:`SUBSCRIBER_BUFFER` batches are pending); a session's
entry lives only while it has a subscriber.
"""

from __future__ import annotations

from collections import defaultdict

import attrs
import trio

from ...model import Event

__all__ = ["SUBSCRIBER_BUFFER", "Live", "LiveSubscribers"]

SUBSCRIBER_BUFFER = 2048
"""Events a live subscriber may have pending before it is detached to catch up."""


@attrs.define(eq=False)
class Live:
    """One subscriber's live buffer, as the writer sees it.

    ``pending`` counts the events sent and not yet received (the writer's bound).
    """

    send: trio.MemorySendChannel[tuple[Event, ...]]
    pending: int = 0
    lagging: bool = False
    position: int = 0  # the last id delivered (or where its subscription stood)


class LiveSubscribers:
    """Live subscribers by session, and the delivery of stored batches to them."""

    def __init__(self) -> None:
        self._by_session: defaultdict[str, set[Live]] = defaultdict(set)
        self._closed = False  # the bus takes no more events

    def count(self, session_id: str | None = None) -> int:
        """How many live subscribers the session has (``None``: over every session)."""
        if session_id is not None:
            return len(self._by_session.get(session_id, ()))
        return sum(len(s) for s in self._by_session.values())

    def attach(
        self, session_id: str, position: int
    ) -> tuple[Live, trio.MemoryReceiveChannel[tuple[Event, ...]]]:
        """A new live subscriber of the session, delivered from ``position`` on.

        Once the bus is closing (:meth:`close`) the subscriber's channel is closed at
        once: its subscription reads what is stored and ends.
        """
        send, receive = trio.open_memory_channel[tuple[Event, ...]](SUBSCRIBER_BUFFER)
        live = Live(send, position=position)
        if self._closed:
            send.close()
        else:
            self._by_session[session_id].add(live)
        return live, receive

    def detach(self, session_id: str, live: Live) -> None:
        """Remove a subscriber (its channel is closed)."""
        subscribers = self._by_session.get(session_id)
        if subscribers is not None:
            subscribers.discard(live)
            if not subscribers:
                del self._by_session[session_id]
        live.send.close()

    def position(self, session_id: str) -> int | None:
        """The lowest id delivered to a live subscriber of the session (``None``: none)."""
        subscribers = self._by_session.get(session_id)
        if not subscribers:
            return None
        return min(live.position for live in subscribers)

    def deliver(self, session_id: str, events: tuple[Event, ...]) -> None:
        """Hand stored ``events`` (one session's, in order) to its live subscribers."""
        subscribers = self._by_session.get(session_id)
        if not subscribers:
            return
        last = events[-1].event_id
        for live in list(subscribers):
            if live.pending and live.pending + len(events) > SUBSCRIBER_BUFFER:
                # Too slow: detach it; its iterator resumes from the store.
                live.lagging = True
                subscribers.discard(live)
                live.send.close()
                continue
            try:
                live.send.send_nowait(events)
            except trio.WouldBlock:  # cannot happen: the channel holds a batch per event
                live.lagging = True
                subscribers.discard(live)
                live.send.close()
            except trio.BrokenResourceError:
                subscribers.discard(live)
            else:
                live.pending += len(events)
                live.position = max(live.position, last)

    def end_session(self, session_id: str) -> None:
        """Close every live subscriber of a deleted session."""
        for live in self._by_session.pop(session_id, set()):
            live.send.close()

    def close(self) -> None:
        """Attach no more subscribers: the bus takes no more events."""
        self._closed = True

    def close_all(self) -> None:
        """Close every live subscriber (the writer has returned: nothing more comes)."""
        self._closed = True
        for subscribers in self._by_session.values():
            for live in subscribers:
                live.send.close()
        self._by_session.clear()
