"""The events of one message's turn stream, up to the end of the turn that answers it.

:class:`TurnEvents` is the iterator :meth:`Runtime.open_turn_stream` yields: a
session's :class:`~omnigent.core.bus._subscription.Subscription`, ended after the
terminal event of the turn that handled the message (its ``response.*``), or after the
session's terminal status when a stop dropped the message before any turn took it.

Which turn took the message is known locally (``watched``, filled in by the turn
that takes it) or, when another server ran that turn, from the store
(:meth:`~omnigent.stores.Store.item_taken_by`). Each event is handed out first and
decided about on the next call — the client sees a terminal event without waiting
for a store read.

It is a class rather than an async generator so that it is cancel-safe: a cancel inside
an async generator's ``__anext__`` finalizes it, and an HTTP stream cancels its wait
for the next event every time it sends a ping. Here the event being decided about is
kept until its store read returns, and the subscription is cancel-safe itself, so a
cancelled call loses nothing and the next one resumes.
"""

from __future__ import annotations

from collections.abc import Mapping

from ...model import (
    TERMINAL_STATUSES,
    Event,
    ResponseCancelled,
    ResponseCompleted,
    ResponseFailed,
    SessionStatusChanged,
)
from ...stores import Store
from ..bus import Subscription

__all__ = ["TurnEvents"]


class TurnEvents:
    """An async iterator over a session's events until one message has been answered.

    Args:
        subscription: the session's events from before the message was delivered.
        item_id: the message's item id.
        watched: item id → the response id of the local turn that took it (``""``:
            a stop dropped it; ``None``: not yet taken), kept by the runtime while the
            stream is open.
        store: asked which turn took the message when no local turn did.
    """

    def __init__(
        self,
        subscription: Subscription,
        item_id: str,
        *,
        watched: Mapping[str, str | None],
        store: Store,
    ) -> None:
        self._subscription = subscription
        self._item_id = item_id
        self._watched = watched
        self._store = store
        # The event handed out last, until it is known not to end the stream: kept
        # across a cancelled store read, so the next call decides about it again.
        self._deciding: Event | None = None
        self._ended = False

    def __aiter__(self) -> TurnEvents:
        return self

    async def __anext__(self) -> Event:
        """The next event of the turn stream.

        Raises:
            StopAsyncIteration: the turn that answers the message has ended (or the
                session was deleted).
            trio.ClosedResourceError: the stream's block has exited.

        Cancellation: safe at any point — a cancelled call loses nothing; the next
        resumes.
        """
        event = await self._next(wait=True)
        assert event is not None
        return event

    async def next_ready(self) -> Event | None:
        """The next event if one is at hand, else ``None``: never waits for a new batch
        (see :meth:`Subscription.next_ready`). It may still read the store, to decide
        whether the last event ended the stream.

        Cancellation and errors: as :meth:`__anext__`.
        """
        return await self._next(wait=False)

    async def _next(self, *, wait: bool) -> Event | None:
        if self._ended:
            raise StopAsyncIteration
        if self._deciding is not None:
            if await self._ends(self._deciding):
                self._ended = True
                raise StopAsyncIteration
            self._deciding = None
        if wait:
            event: Event | None = await self._subscription.__anext__()
        else:
            event = await self._subscription.next_ready()
        self._deciding = event
        return event

    async def _ends(self, event: Event) -> bool:
        """Whether ``event`` is the last of the stream."""
        if not _may_end(event):
            return False
        handled = self._watched.get(self._item_id)
        if handled is None:
            # Taken (or dropped) by a turn that ran on another server, if at all.
            handled = await self._store.item_taken_by(self._subscription.session_id, self._item_id)
        return _ends_answer(event, handled)


def _may_end(event: Event) -> bool:
    """Whether ``event`` could end a turn stream (a terminal response or status)."""
    if isinstance(event, ResponseCompleted | ResponseFailed | ResponseCancelled):
        return True
    return isinstance(event, SessionStatusChanged) and event.status in TERMINAL_STATUSES


def _ends_answer(event: Event, handled_by: str | None) -> bool:
    """Whether ``event`` ends the stream of a message handled by ``handled_by``.

    ``handled_by`` is the answering turn's response id, ``""`` if a stop dropped the
    message, ``None`` while no turn has taken it yet.
    """
    if isinstance(event, ResponseCompleted | ResponseFailed | ResponseCancelled):
        return handled_by == event.response.id
    if isinstance(event, SessionStatusChanged) and event.status in TERMINAL_STATUSES:
        return handled_by == ""
    return False
