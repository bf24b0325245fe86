"""The event bus: per-session sequence numbers, persist then publish, replay.

``publish`` encodes an event, stamps it with its session's next ``event_id`` and
queues it; one writer task (:meth:`EventBus.run`, :mod:`._writer`) takes whatever
is queued, writes it to the store in one transaction, and only then fans it out to
live subscribers (:mod:`._live`, :mod:`._subscription`). So every event a subscriber
sees is already durable.

:class:`EventBus` is one object in four modules, by job: this one builds it and holds
the publishing side (encode, stamp, queue — the hot path); :mod:`._state` the
per-session state it stamps with and when that state is forgotten; :mod:`._writer`
the writer that persists then delivers; :mod:`._subscribe` opening subscriptions.
The parts are mixins over one instance, so the hot path pays no call or attribute hop
for the split.

Nothing lost (on the way in; the writer's part is in :mod:`._writer`):

* An event is encoded to JSON *before* it takes an id, so a payload the store could
  not take (a ``datetime``, a ``NaN``) is refused to its publisher with
  :class:`~omnigent.errors.InvalidInput` and never reaches the writer. Each event is
  encoded once (:meth:`Event.to_json`); the store and every subscriber's transport use
  that text.
* A records-only bus refuses every publish (``StoreBusy``): the database's owner
  assigns the ids. A session being deleted is sealed, and a deleted one has no row
  to count from, so nothing is published into either (``SessionNotFound``).
* With several servers on one database (:mod:`omnigent.core.cluster._ownership`), only
  the server holding a session's tree stamps its events: ``publish`` refuses a session
  held elsewhere (``SessionElsewhere``).

Fairness, cheaply: ``publish`` checks for cancellation every time and yields to the
scheduler every :data:`YIELD_EVERY` publishes, so a harness streaming deltas from memory
never runs more than a few of them before every other task (another session, an
interrupt) gets the loop — without paying a scheduler round for each delta. The
writer hands each subscriber a whole batch at once, and a subscription yields every
:data:`~._subscription.YIELD_EVERY` events it serves from one.

Resource handling: the queue and every subscriber buffer are bounded. ``publish``
waits for room when the queue is full, or when its session already has a couple of
batches on their way to the store (back-pressure on the producer, fair between
sessions), but never while holding a half-assigned sequence number. Per-session state
lives only while the session is in use (:mod:`._state`).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import trio

from ..._ids import now
from ...errors import InvalidInput, SessionElsewhere, SessionNotFound, StoreBusy
from ...model import Event, SessionStatusChanged
from ...stores import Store, StoredEvent
from ..cluster import Ownership, SoloOwnership
from ._live import LiveSubscribers
from ._persist import Persister
from ._session_changes import SessionChanges
from ._state import Flush, Queued, SessionHold, SessionLog
from ._subscribe import BusSubscribing
from ._subscription import Subscription
from ._writer import BusWriter

__all__ = ["YIELD_EVERY", "EventBus", "SessionHold", "Subscription", "encode_event"]

_QUEUE_SIZE = 8192
# One session may have this many events on their way to the store: a session streaming
# faster than the store writes waits here, leaving the rest of the queue to the others,
# and whatever it writes next (its interrupted message, its terminal status) waits
# behind a couple of batches, not a whole queue.
_SESSION_IN_FLIGHT = 2048
YIELD_EVERY = 16
"""Publishes between two yields to the scheduler (a subscription has its own:
:data:`~._subscription.YIELD_EVERY`)."""


def encode_event(event: Event) -> str:
    """An event's wire form as strict JSON text (no ``NaN``, no foreign objects).

    The text is kept on the event (:meth:`Event.to_json`): encoding it again is free.

    Raises:
        InvalidInput: the payload cannot be encoded.
    """
    try:
        return event.to_json()
    except (TypeError, ValueError, RecursionError) as exc:
        raise InvalidInput(f"the {event.type} event cannot be stored: {exc}") from exc


class EventBus(BusWriter, BusSubscribing):
    """Sequences, persists and fans out session events. Owned by a ``Runtime``.

    Args:
        store: where events are written and replayed from.
        ownership: where sessions' work runs (default: this process owns everything).
        records_only: the runtime does not own the database: refuse every publish.
        changes: the sessions feed told of each stored batch (see
            :mod:`._session_changes`); a private one by default.
    """

    def __init__(
        self,
        store: Store,
        ownership: Ownership | None = None,
        *,
        records_only: bool = False,
        changes: SessionChanges | None = None,
    ) -> None:
        self._store = store
        self._changes = changes if changes is not None else SessionChanges()
        self._owners = ownership if ownership is not None else SoloOwnership()
        self._records_only = records_only
        # The channel itself is unbounded; publish() keeps it to _QUEUE_SIZE by waiting
        # for room, and only publish_now() (a turn's terminal events: a handful per
        # live turn) may go past that bound, so a turn can always end.
        self._send, self._receive = trio.open_memory_channel[Queued | Flush](math.inf)
        self._depth = 0  # what is in that channel (cheaper than its statistics())
        self._unyielded = 0  # publishes since publish() last yielded
        self._room = trio.lowlevel.ParkingLot()
        self._logs = {}
        self._live = LiveSubscribers()
        # Open subscriptions by session (entries live as long as their block), so a
        # delete can end even those still catching up from the store.
        self._open = defaultdict(set)
        # Sessions being deleted: nothing more is published on them.
        self._sealed = set()
        self._closed = False
        self._persister = Persister(store, on_lost=self._lost)
        self.drained = trio.Event()  # the writer has returned

    # -- producing -------------------------------------------------------------------

    async def publish(self, session_id: str, event: Event) -> Event:
        """Encode ``event``, stamp it with the session's next id and queue it.

        Returns the stamped event. Always a cancellation point; yields to the
        scheduler every :data:`YIELD_EVERY` calls (fairness, see the module docstring);
        waits only while the queue is full, or while the session has
        :data:`_SESSION_IN_FLIGHT` events on their way to the store.

        Raises:
            InvalidInput: the payload cannot be encoded (nothing published, no id used).
            StoreBusy: a records-only runtime. SessionNotFound: the session is deleted
            or being deleted. trio.ClosedResourceError: the bus is closed.

        Cancellation: if cancelled before the event is queued, nothing was published
        and no id was used; once queued, the event is published and returned.
        """
        await trio.lowlevel.checkpoint_if_cancelled()
        if self._records_only:
            await self._check_writable()
        entry = self._logs.get(session_id)
        if (
            entry is None
            or entry.last_id is None
            or session_id in self._sealed
            or not self._owners.owns(session_id)
        ):
            entry = await self._loaded(session_id)  # the hot path skips it: all known
        if self._depth >= _QUEUE_SIZE or entry.in_flight >= _SESSION_IN_FLIGHT:
            entry.users += 1
            try:
                while self._depth >= _QUEUE_SIZE or entry.in_flight >= _SESSION_IN_FLIGHT:
                    await self._room.park()
            finally:
                entry.users -= 1
        (stamped,) = self._stamp_and_queue(session_id, entry, (event,))
        self._unyielded += 1
        if self._unyielded >= YIELD_EVERY:
            self._unyielded = 0
            await trio.lowlevel.cancel_shielded_checkpoint()
        return stamped

    async def publish_now(self, session_id: str, *events: Event) -> list[Event]:
        """Publish ``events`` back to back without waiting for room in the queue.

        For what must not be held up or split: a turn's terminal ``response.*`` event
        and ``session.status`` go out together even when the queue is full. All are
        encoded first, so either all are published or none.

        Raises:
            as :meth:`publish`.
        """
        await self._check_writable()
        entry = await self._loaded(session_id)
        return self._stamp_and_queue(session_id, entry, events)

    async def _check_writable(self) -> None:
        if self._records_only:
            owner = await self._store.owner_info()
            raise StoreBusy(self._store.location, owner, records_only=True)

    def _stamp_and_queue(
        self, session_id: str, entry: SessionLog, events: Sequence[Event]
    ) -> list[Event]:
        # Synchronous: nothing can run between taking an id and queueing the event.
        if self._closed:
            raise trio.ClosedResourceError("the event bus is closed")
        if entry.gone or session_id in self._sealed or self._logs.get(session_id) is not entry:
            raise SessionNotFound(session_id)
        if entry.last_id is None:  # the tree was given up while the publisher waited
            raise SessionElsewhere(session_id, "another server")
        created = now()
        ready: list[Queued] = []
        for offset, event in enumerate(events, start=1):
            stamped: Event = event.stamped(
                session_id=session_id, event_id=entry.last_id + offset, created_at=created
            )
            status = stamped.status if isinstance(stamped, SessionStatusChanged) else None
            row = StoredEvent(
                session_id,
                stamped.event_id,
                stamped.type,
                encode_event(stamped),  # kept on the event for every subscriber
                status,
                created,
            )
            ready.append(Queued(stamped, row, entry))
        if not entry.in_flight:
            # The tree stays held here until these events are written (or refused).
            entry.tenure = self._owners.retain(session_id)
        for queued in ready:
            entry.last_id = queued.event.event_id
            entry.in_flight += 1
            if queued.row.status is not None:
                entry.status = queued.row.status
            self._send.send_nowait(queued)
            self._depth += 1
        return [queued.event for queued in ready]

    def _queued(self) -> int:
        return self._depth

    async def flush(self) -> None:
        """Wait until every event published before this call is persisted and delivered."""
        marker = Flush()
        while self._queued() >= _QUEUE_SIZE:
            await self._room.park()
        self._send.send_nowait(marker)
        self._depth += 1
        await marker.done.wait()

    def statistics(self) -> dict[str, Any]:
        """Queue depth, subscriber counts and sessions kept, for tests and monitoring."""
        return {
            "queued": self._queued(),
            "subscribers": self._live.count(),
            "sessions": len(self._logs),
        }
