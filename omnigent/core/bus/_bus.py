"""The event bus: per-session sequence numbers, persist then publish, replay.

``publish`` encodes an event, stamps it with its session's next ``event_id`` and
queues it; one writer task (:meth:`EventBus.run`) takes whatever is queued, writes it
to the store in one transaction, and only then fans it out to live subscribers. So
every event a subscriber sees is already durable.

:class:`EventBus` is one object composed of parts with one job each, all made in its
constructor:

* :class:`~._logs.SessionLogs` — each session's counter, status and users, and the
  stamping of events with the next id;
* :class:`~._writer.EventWriter` — the bounded queue and the writer task that persists
  each batch (:class:`~._persist.Persister`), then delivers it;
* :class:`~._live.LiveSubscribers` — who gets a session's stored events as they are
  written;
* :class:`~._subscriptions.Subscriptions` — the open subscriptions (replay, then live).

This module is the publishing side (encode, stamp, queue: the hot path) and the
bus's public face over the parts.

Nothing lost (on the way in; the writer's part is in :mod:`._writer`):

* An event is encoded to JSON *before* it takes an id, so a payload the store could
  not take (a ``datetime``, a ``NaN``) is refused to its publisher with
  :class:`~omnigent.errors.InvalidInput` and never reaches the writer. Each event is
  encoded once (:meth:`Event.to_json`); the store and every subscriber's transport use
  that text.
* A records-only bus refuses every publish (``StoreBusy``): the database's owner
  assigns the ids. A session being deleted is sealed, and a deleted one has no row
  to count from, so nothing is published into either (``SessionNotFound``).
* With several servers on one database (:mod:`omnigent.core.cluster`), only the server
  holding a session's tree stamps its events: ``publish`` refuses a session held
  elsewhere (``SessionElsewhere``).

Fairness, cheaply: ``publish`` checks for cancellation every time and yields to the
scheduler every :data:`YIELD_EVERY` publishes, so a harness streaming deltas from memory
never runs more than a few of them before every other task (another session, an
interrupt) gets the loop — without paying a scheduler round for each delta. The
writer hands each subscriber a whole batch at once, and a subscription yields every
:data:`~._subscription.YIELD_EVERY` events it serves from one.

Resource handling: the queue and every subscriber buffer are bounded. ``publish``
waits for room when the queue holds :data:`~._writer.QUEUE_SIZE` events, or when its
session already has :data:`SESSION_IN_FLIGHT` on their way to the store (back-pressure
on the producer, fair between sessions), but never while holding a half-assigned
sequence number. ``publish_now`` (a turn's terminal events) never waits: it may use the
queue's last :data:`~._writer.RESERVE` places, and past them it is refused with
:class:`~omnigent.errors.EventLogFull`. Per-session state lives only while the
session is in use (:mod:`._logs`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any

import trio

from ...errors import StoreBusy
from ...model import Event
from ...observability import Metrics
from ...stores import Store
from ..cluster import Ownership, SoloOwnership
from ._live import LiveSubscribers
from ._logs import SessionHold, SessionLog, SessionLogs
from ._persist import Persister
from ._session_changes import SessionChanges
from ._subscription import Subscription
from ._subscriptions import Subscriptions
from ._writer import EventWriter

__all__ = ["SESSION_IN_FLIGHT", "YIELD_EVERY", "EventBus"]

SESSION_IN_FLIGHT = 2048
"""Events one session may have on their way to the store before its publisher waits.

A session streaming faster than the store writes waits here, leaving the rest of the
queue to the others, and whatever it writes next (its interrupted message, its terminal
status) waits behind a couple of batches, not a whole queue."""
YIELD_EVERY = 16
"""Publishes between two yields to the scheduler (a subscription has its own:
:data:`~._subscription.YIELD_EVERY`)."""


class EventBus:
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
        metrics: Metrics | None = None,
    ) -> None:
        owners = ownership if ownership is not None else SoloOwnership()
        self._store = store
        self._owners = owners
        self._records_only = records_only
        self._logs = SessionLogs(store, owners)
        self._live = LiveSubscribers()
        self._writer = EventWriter(
            Persister(store, on_lost=self._logs.lost, metrics=metrics),
            self._logs,
            self._live,
            changes if changes is not None else SessionChanges(),
        )
        self._subscriptions = Subscriptions(store, self._logs, self._live, owners)
        self._closed = False
        self._unyielded = 0  # publishes since publish() last yielded

    # -- publishing (the hot path) -------------------------------------------------------

    async def publish(self, session_id: str, event: Event) -> Event:
        """Encode ``event``, stamp it with the session's next id and queue it.

        Returns the stamped event. Always a cancellation point; yields to the
        scheduler every :data:`YIELD_EVERY` calls (fairness, see the module docstring);
        waits only while the queue is full, or while the session has
        :data:`SESSION_IN_FLIGHT` events on their way to the store.

        Raises:
            InvalidInput: the payload cannot be encoded (nothing published, no id used).
            StoreBusy: a records-only runtime. SessionNotFound: the session is deleted
            or being deleted. SessionElsewhere: another server holds its tree.
            trio.ClosedResourceError: the bus is closed.

        Cancellation: if cancelled before the event is queued, nothing was published
        and no id was used; once queued, the event is published and returned.
        """
        await trio.lowlevel.checkpoint_if_cancelled()
        if self._records_only:
            await self._refuse_records_only()
        log = self._logs.ready(session_id)
        if log is None:
            log = await self._logs.load(session_id)  # the hot path skips it: all known
        writer = self._writer
        if writer.queued >= writer.queue_size or log.in_flight >= SESSION_IN_FLIGHT:
            await self._wait_for_room(log)
        # From here to the put, nothing awaits: an id taken is an id queued (and the
        # room just checked is still there).
        if self._closed:
            raise trio.ClosedResourceError("the event bus is closed")
        queued = self._logs.stamp(session_id, log, (event,))
        writer.put(queued)
        self._unyielded += 1
        if self._unyielded >= YIELD_EVERY:
            self._unyielded = 0
            await trio.lowlevel.cancel_shielded_checkpoint()
        return queued[0].event

    async def publish_now(self, session_id: str, *events: Event) -> list[Event]:
        """Publish ``events`` back to back without waiting for room in the queue.

        For what must not be held up or split: a turn's terminal ``response.*`` event
        and ``session.status`` go out together even when the queue is full (they may
        use the places :data:`~._writer.RESERVE` keeps). All are encoded first, so
        either all are published or none.

        Raises:
            EventLogFull: not even the reserved places have room (nothing published).
            As :meth:`publish` otherwise.
        """
        if self._records_only:
            await self._refuse_records_only()
        log = await self._logs.load(session_id)
        return self._queue(session_id, log, events)

    async def _wait_for_room(self, log: SessionLog) -> None:
        log.users += 1  # the session's state is kept while its publisher waits
        try:
            writer = self._writer
            while not self._closed and (
                writer.queued >= writer.queue_size or log.in_flight >= SESSION_IN_FLIGHT
            ):
                await writer.room.park()
        finally:
            log.users -= 1

    def _queue(self, session_id: str, log: SessionLog, events: Sequence[Event]) -> list[Event]:
        # Synchronous: nothing can run between taking an id and queueing the event.
        if self._closed:
            raise trio.ClosedResourceError("the event bus is closed")
        self._writer.check_room(len(events), reserve=True)
        queued = self._logs.stamp(session_id, log, events)
        self._writer.put(queued)
        return [item.event for item in queued]

    async def _refuse_records_only(self) -> None:
        owner = await self._store.owner_info()
        raise StoreBusy(self._store.location, owner, records_only=True)

    async def flush(self) -> None:
        """Wait until every event published before this call is persisted and delivered."""
        await self._writer.flush()

    # -- subscribing ---------------------------------------------------------------------

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

        Raises:
            SessionNotFound: no such session.

        Resource handling: the live registration is released when the block exits.
        """
        async with self._subscriptions.open(session_id, after, admits=admits) as subscription:
            yield subscription

    def live_position(self, session_id: str) -> int | None:
        """The lowest id delivered to a live subscriber of the session (``None``: none)."""
        return self._live.position(session_id)

    def deliver_remote(self, event: Event) -> None:
        """Deliver an event another server wrote (it is durable already)."""
        self._writer.deliver(event.session_id, (event,))

    # -- sessions --------------------------------------------------------------------------

    async def last_event_id(self, session_id: str) -> int:
        """See :meth:`~._logs.SessionLogs.last_event_id`."""
        return await self._logs.last_event_id(session_id)

    def hold(self, session_id: str) -> SessionHold:
        """Keep the session's counter in memory until :meth:`release` (an actor's life)."""
        return self._logs.hold(session_id)

    def release(self, hold: SessionHold) -> None:
        self._logs.release(hold)

    def status_of(self, session_id: str) -> str | None:
        """The latest status published in this process and not yet known to the store."""
        return self._logs.status_of(session_id)

    def known_last_id(self, session_id: str) -> int:
        """The newest event id this process assigned for the session (0 if none)."""
        return self._logs.known_last_id(session_id)

    def seal(self, session_ids: Sequence[str]) -> None:
        """Refuse every later publish on these sessions (they are being deleted)."""
        self._logs.seal(session_ids)

    def unseal(self, session_ids: Sequence[str]) -> None:
        """Undo :meth:`seal` (a delete that failed, or finished)."""
        self._logs.unseal(session_ids)

    def disown(self, session_ids: set[str]) -> None:
        """Forget the counters of sessions whose tree is no longer held here (see
        :meth:`~._logs.SessionLogs.disown`)."""
        self._logs.disown(session_ids)

    def forget_session(self, session_id: str) -> None:
        """End every subscription of a deleted session and drop what is kept for it."""
        self._subscriptions.end_session(session_id)
        self._logs.forget(session_id)

    # -- the writer ------------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """The writer task: see :meth:`~._writer.EventWriter.run`. Returns after :meth:`close`."""
        await self._writer.run(task_status=task_status)

    @property
    def drained(self) -> trio.Event:
        """Set once the writer task has returned."""
        return self._writer.drained

    async def close(self) -> None:
        """Stop accepting events; the writer persists what is queued, then returns."""
        self._closed = True
        self._live.close()
        await self._writer.close()

    def abandon(self) -> None:
        """Stop retrying: what the store has not taken yet is dropped (and logged).

        For a shutdown past its grace, with the store abandoned too.
        """
        self._writer.abandon()

    def cancel_writer(self) -> None:
        """Cancel a writer that did not end once abandoned (what it holds is dropped
        and logged): the last step of a shutdown that must end."""
        self._writer.cancel()

    def statistics(self) -> dict[str, Any]:
        """Queue depth, subscriber counts and sessions kept, for tests and monitoring."""
        return {
            "queued": self._writer.queued,
            "subscribers": self._live.count(),
            "sessions": len(self._logs),
        }
