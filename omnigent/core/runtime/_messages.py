"""Messages in: validation and persistence, and the stream of the turn that answers one.

:class:`Messages` is owned by the runtime. :meth:`Messages.compose` validates a user
message (nothing is stored if it is invalid); :meth:`Messages.hand_over`, run where the
session's tree is held, stores it and hands it to the session's actor as one step.
:meth:`Messages.open_turn_stream` does both under a subscription and yields the events
up to the end of the turn that answers the message (``?stream=true``; a cancel-safe
:class:`~omnigent.core.session.TurnEvents`).

Which turn took a message is kept, per open stream, in ``LiveSessions.watched``: the
stream ends with that turn's terminal ``response.*`` event, or with the session's
terminal status when a stop dropped the message before any turn took it. When another
server runs the session's turns (several servers on one database), the stream asks the
store instead (:meth:`~omnigent.stores.Store.item_taken_by`): the turn that takes a
message records its response id there before it can end, and the message itself is
handed to that server (the ``deliver`` the runtime gives: its routed call, which runs
:meth:`Messages.hand_over` on the holder).

A message is stored *pending* (no turn has taken it yet), so a process that dies
before answering it answers it on its next start. Storing it and giving it to the actor
are one step: a message the runtime refuses after storing it (it started shutting
down, or the session's buffer filled, while the message was being written), or whose
send is cancelled as the write returns, is taken back out — a refusal or a cancelled
send changes nothing, and is never answered at the next start.

The buffer of messages waiting for a running turn holds at most
:data:`MAX_BUFFERED_MESSAGES`; past that a message is refused with ``Conflict``
(``409``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any

import attrs
import trio

from ...errors import Conflict, RuntimeClosed, SessionNotFound
from ...model import Event, Item, MessageAccepted, MessageItem, unstructure
from ...stores import SessionRow, Store
from ..bus import EventBus
from ..cluster import Tenure
from ..session import TurnEvents
from ._actors import Actors
from ._files import FileService
from ._inputs import MAX_MESSAGE_BYTES, check_message_bytes, parse_message_content
from ._live import LiveSessions
from ._session_catalog import SessionCatalog

__all__ = ["MAX_BUFFERED_MESSAGES", "Deliver", "Hold", "Messages"]

MAX_BUFFERED_MESSAGES = 100

Deliver = Callable[[SessionRow, MessageItem], Awaitable[str]]
"""Hands a composed message to its session wherever the tree is held (the runtime's
routed call): stores it and answers ``accepted`` or ``buffered``."""

Hold = Callable[[SessionRow], Awaitable[Tenure | None]]
"""Holds the session's tree here if a message to it would be handed over here: a
tenure to release once it has been, or ``None`` (it would go to another server)."""


class Messages:
    """User messages into sessions. Owned by the ``Runtime``."""

    def __init__(
        self,
        *,
        store: Store,
        bus: EventBus,
        live: LiveSessions,
        actors: Actors,
        files: FileService,
        sessions: SessionCatalog,
        max_message_bytes: int = MAX_MESSAGE_BYTES,
    ) -> None:
        self._store = store
        self._bus = bus
        self._live = live
        self._actors = actors
        self._files = files
        self._sessions = sessions
        # The largest message a session takes (a larger one is 413, nothing stored).
        self._max_bytes = max_message_bytes

    def _check_open(self, session_id: str) -> None:
        if self._live.closing:
            raise RuntimeClosed("the runtime is shutting down")
        if session_id in self._live.deleting:
            raise SessionNotFound(session_id)

    def _check_room(self, session_id: str) -> None:
        waiting = self._live.waiting_messages(session_id)
        if waiting >= MAX_BUFFERED_MESSAGES:
            raise Conflict(
                f"the session already has {waiting} messages waiting for its "
                "running turn; wait for it to finish (or interrupt it)"
            )

    async def compose(
        self,
        row: SessionRow,
        content: Any,
        role: str,
        viewer: str | None = None,
        *,
        item_id: str | None = None,
    ) -> MessageItem:
        """Validate a message to the session of ``row`` and make its item; nothing is
        stored.

        ``row``: the session's row, as the caller just read it to hand the message
        over (it is not read again here). ``item_id`` fixes the item's id (a dispatch
        records it before sending).

        Raises:
            RuntimeClosed, SessionNotFound (being deleted), InvalidInput.
        """
        self._check_open(row.id)
        blocks = parse_message_content(content, root="content")
        check_message_bytes(blocks, self._max_bytes, root="content")
        await self._files.check_references(blocks, root="content", viewer=viewer)
        # The sender is recorded: the session's tools act with no more than their
        # rights from now on (core/tools/session/_acting.py).
        item = MessageItem(role=role, content=blocks, created_by=viewer)  # type: ignore[arg-type]
        if item_id is not None:
            item = attrs.evolve(item, id=item_id)
        return item

    async def hand_over(
        self,
        session_id: str,
        item: MessageItem,
        *,
        before: Callable[[], None] | None = None,
    ) -> MessageAccepted:
        """Store a message (pending) and give it to the session's actor, as one step.

        Runs where the session's tree is held. The actor is given the message right
        after the write returns, with no checkpoint between; ``before`` (a dispatch
        watching the child) runs synchronously just before. If anything stops the
        hand-over once the row may be written — a refusal, or a cancel that arrives
        as the write returns — the row is taken back out: no message is stored that
        no actor holds, to be answered only at the next start (issue 22, defect 3).

        Returns:
            ``accepted`` (it starts a turn) or ``buffered`` (a turn is running).

        Raises:
            RuntimeClosed, SessionNotFound, Conflict (the buffer is full): nothing
            is stored.

        Cancellation: nothing is stored unless the actor took the message.
        """
        self._check_open(session_id)
        self._check_room(session_id)
        try:
            try:
                await self._store.put_items(session_id, [unstructure(item, Item)], pending=True)
            except LookupError:
                raise SessionNotFound(session_id) from None  # nothing was written
            # No checkpoint from here to the enqueue: a cancel cannot split them.
            self._check_open(session_id)
            self._check_room(session_id)
            actor = self._actors.actor(session_id)
            if before is not None:
                before()
            status = actor.enqueue(item)
        except BaseException:
            await self.take_back(session_id, item.id)
            raise
        return MessageAccepted(status, item.id)  # type: ignore[arg-type]

    async def take_back(self, session_id: str, item_id: str) -> None:
        """Remove a stored message no actor took (shielded, bounded)."""
        with trio.move_on_after(5, shield=True):
            await self._store.delete_items(session_id, [item_id])

    @asynccontextmanager
    async def open_turn_stream(
        self,
        session_id: str,
        content: str | Sequence[Any],
        role: str,
        viewer: str | None = None,
        *,
        deliver: Deliver,
        hold: Hold,
        admits: Callable[[Event], Awaitable[bool]] | None = None,
    ) -> AsyncIterator[tuple[MessageAccepted, TurnEvents]]:
        """See :meth:`Runtime.open_turn_stream`; ``admits`` filters the events shown,
        ``deliver`` hands the message over (see :data:`Deliver`), ``hold`` holds the
        tree here first if the message would be handed over here (see :data:`Hold`)."""
        row = await self._sessions.row(session_id)
        watched = self._live.watched
        # Held from before the subscription starts until the message is handed over
        # (its actor then holds the tree): the subscription starts live from the
        # bus's own counter — which the turn's events then take without a read —
        # instead of from the store's newest id and one more read of the store.
        tenure = await hold(row)
        try:
            async with self._bus.subscribe(session_id, after=None, admits=admits) as subscription:
                item = await self.compose(row, content, role, viewer)
                watched[item.id] = None
                try:
                    try:
                        status = await deliver(row, item)
                    finally:
                        if tenure is not None:
                            tenure.release()
                    accepted = MessageAccepted(status, item.id)  # type: ignore[arg-type]
                    events = TurnEvents(subscription, item.id, watched=watched, store=self._store)
                    yield accepted, events
                finally:
                    del watched[item.id]
        finally:
            if tenure is not None:
                tenure.release()  # idempotent: here if the message was never handed over
