"""The event bus: per-session sequence numbers, persist then publish, replay.

``publish`` encodes an event, stamps it with its session's next ``event_id`` and
queues it; one writer task (:meth:`EventBus.run`, in the runtime's service nursery)
takes whatever is queued, writes it to the store in one transaction, and only then
fans it out to live subscribers (:mod:`._subscription`). So every event a subscriber
sees is already durable, and a turn streaming thousands of deltas pays one thread hop
per batch, not per delta.

Nothing lost:

* An event is encoded to JSON *before* it takes an id, so a payload the store could
  not take (a ``datetime``, a ``NaN``) is refused to its publisher with
  :class:`~omnigent.errors.InvalidInput` and never reaches the writer.
* A batch the store refuses anyway is retried, then written row by row
  (:mod:`._persist`): only the offending row is refused (logged with its session and
  type), and every other session's log stays complete and gap-free.
* A records-only bus refuses every publish (``StoreBusy``): the database's owner
  assigns the ids. A session being deleted is sealed, and a deleted one has no row
  to count from, so nothing is published into either (``SessionNotFound``).

Fairness, cheaply: ``publish`` checks for cancellation every time and yields to the
scheduler every :data:`YIELD_EVERY` publishes, so a harness streaming deltas from memory
never runs more than a few of them before every other task (another session, an
interrupt) gets the loop — without paying a scheduler round for each delta. The
writer hands each subscriber a whole batch at once (one wake-up per batch, not per
event), and a subscription yields every :data:`YIELD_EVERY` events it serves from one.
Each event is encoded to JSON once (:meth:`Event.to_json`); the store and every
subscriber's transport use that text.

With several servers on one database (:mod:`._ownership`), only the server holding a
session's tree stamps and writes its events: ``publish`` refuses a session held
elsewhere (``SessionElsewhere``), the bus keeps a tenure on the tree while the session
has events on their way to the store (the store fences writes by lease), and a write
the store refused because the lease is gone is dropped — never delivered — and the
tree given up (:mod:`._persist`). Events other servers write reach this bus's
subscribers through :meth:`EventBus.deliver_remote` (the remote feed, :mod:`._fanout`).

Resource handling: the queue and every subscriber buffer are bounded. ``publish``
waits for room when the queue is full, or when its session already has a couple of
batches on their way to the store (back-pressure on the producer, fair between
sessions), but never while holding a half-assigned sequence number. Per-session state
lives only while the session is in use — held by an actor, subscribed to, or with
events on their way to the store — so memory stays flat however many sessions a
process touches.
"""

from __future__ import annotations

import logging
import math
from collections import defaultdict
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any

import attrs
import trio

from .._ids import now
from ..errors import InvalidInput, SessionElsewhere, SessionNotFound, StoreBusy
from ..model import Event, SessionStatus
from ..stores import Store, StoredEvent
from ._live import LiveSubscribers
from ._ownership import Ownership, SoloOwnership, Tenure
from ._persist import Persister
from ._subscription import Live, Subscription

__all__ = ["YIELD_EVERY", "EventBus", "SessionHold", "Subscription", "encode_event"]

log = logging.getLogger(__name__)

_QUEUE_SIZE = 8192
# One session may have this many events on their way to the store: a session streaming
# faster than the store writes waits here, leaving the rest of the queue to the others,
# and whatever it writes next (its interrupted message, its terminal status) waits
# behind a couple of batches, not a whole queue.
_SESSION_IN_FLIGHT = 2048
_BATCH_MAX = 1024
YIELD_EVERY = 16
"""Publishes (and events a subscription serves) between two yields to the scheduler."""


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


@attrs.define(eq=False)
class _SessionLog:
    """What the bus keeps for one session while it is in use."""

    last_id: int | None = None  # None until read from the store
    status: str | None = None
    in_flight: int = 0  # queued, not yet written
    users: int = 0  # publishers between an await and their stamp
    holds: int = 0  # actors keeping the counter warm
    gone: bool = False  # the session was deleted
    tenure: Tenure | None = None  # the tree held here while events are in flight


@attrs.frozen(eq=False)
class SessionHold:
    """A token from :meth:`EventBus.hold`; give it back with :meth:`EventBus.release`."""

    session_id: str
    log: _SessionLog


@attrs.define(eq=False)
class _Queued:
    event: Event
    row: StoredEvent
    log: _SessionLog


@attrs.define(eq=False)
class _Flush:
    """A marker in the queue: set once everything queued before it is published."""

    done: trio.Event = attrs.field(factory=trio.Event)


class EventBus:
    """Sequences, persists and fans out session events. Owned by a ``Runtime``.

    Args:
        store: where events are written and replayed from.
        ownership: where sessions' work runs (default: this process owns everything).
        records_only: the runtime does not own the database: refuse every publish.
    """

    def __init__(
        self, store: Store, ownership: Ownership | None = None, *, records_only: bool = False
    ) -> None:
        self._store = store
        self._owners: Ownership = ownership if ownership is not None else SoloOwnership()
        self._records_only = records_only
        # The channel itself is unbounded; publish() keeps it to _QUEUE_SIZE by waiting
        # for room, and only publish_now() (a turn's terminal events: a handful per
        # live turn) may go past that bound, so a turn can always end.
        self._send, self._receive = trio.open_memory_channel[_Queued | _Flush](math.inf)
        self._depth = 0  # what is in that channel (cheaper than its statistics())
        self._unyielded = 0  # publishes since publish() last yielded
        self._room = trio.lowlevel.ParkingLot()
        self._logs: dict[str, _SessionLog] = {}
        self._live = LiveSubscribers()
        # Open subscriptions by session (entries live as long as their block), so a
        # delete can end even those still catching up from the store.
        self._open: defaultdict[str, set[Subscription]] = defaultdict(set)
        # Sessions being deleted: nothing more is published on them.
        self._sealed: set[str] = set()
        self._closed = False
        self._persister = Persister(store, on_lost=self._lost)
        self.drained = trio.Event()  # the writer has returned

    # -- per-session state -----------------------------------------------------------

    async def _loaded(self, session_id: str) -> _SessionLog:
        """The session's state with its counter read (from the store if need be).

        Raises:
            SessionNotFound: the session does not exist (or is being deleted).
            SessionElsewhere: another server holds the session's tree (it counts).
        """
        if session_id in self._sealed:
            raise SessionNotFound(session_id)
        if not await self._owners.admit(session_id):
            if await self._store.max_event_id(session_id) is None:
                raise SessionNotFound(session_id)
            raise SessionElsewhere(session_id, "another server")
        entry = self._logs.get(session_id)
        if entry is None:
            entry = self._logs[session_id] = _SessionLog()
        if entry.last_id is None:
            entry.users += 1
            try:
                stored = await self._store.max_event_id(session_id)
            finally:
                entry.users -= 1
            if stored is None:
                self._maybe_drop(session_id)
                raise SessionNotFound(session_id)
            if entry.last_id is None:
                entry.last_id = stored
        return entry

    def _maybe_drop(self, session_id: str) -> None:
        """Forget a session's state once nothing needs it (its row has it all)."""
        entry = self._logs.get(session_id)
        if (
            entry is not None
            and not (entry.users or entry.holds or entry.in_flight)
            and session_id not in self._live
            and session_id not in self._open
        ):
            del self._logs[session_id]

    def hold(self, session_id: str) -> SessionHold:
        """Keep the session's counter in memory until :meth:`release` (an actor's life)."""
        entry = self._logs.get(session_id)
        if entry is None:
            entry = self._logs[session_id] = _SessionLog()
        entry.holds += 1
        return SessionHold(session_id, entry)

    def release(self, hold: SessionHold) -> None:
        hold.log.holds -= 1
        if self._logs.get(hold.session_id) is hold.log:
            self._maybe_drop(hold.session_id)

    # -- producing -------------------------------------------------------------------

    async def last_event_id(self, session_id: str) -> int:
        """The id of the newest event published (queued) for the session.

        For a session whose tree this process does not hold: the newest stored one.

        Raises:
            SessionNotFound: no such session.
        """
        if not self._owners.owns(session_id):
            stored = await self._store.max_event_id(session_id)
            if stored is None:
                raise SessionNotFound(session_id)
            return stored
        entry = await self._loaded(session_id)
        assert entry.last_id is not None
        value = entry.last_id
        self._maybe_drop(session_id)
        return value

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
        self, session_id: str, entry: _SessionLog, events: Sequence[Event]
    ) -> list[Event]:
        # Synchronous: nothing can run between taking an id and queueing the event.
        if self._closed:
            raise trio.ClosedResourceError("the event bus is closed")
        if entry.gone or session_id in self._sealed or self._logs.get(session_id) is not entry:
            raise SessionNotFound(session_id)
        if entry.last_id is None:  # the tree was given up while the publisher waited
            raise SessionElsewhere(session_id, "another server")
        created = now()
        ready: list[_Queued] = []
        for offset, event in enumerate(events, start=1):
            stamped: Event = event.stamped(
                session_id=session_id, event_id=entry.last_id + offset, created_at=created
            )
            status = stamped.status if isinstance(stamped, SessionStatus) else None
            row = StoredEvent(
                session_id,
                stamped.event_id,
                stamped.type,
                encode_event(stamped),  # kept on the event for every subscriber
                status,
                created,
            )
            ready.append(_Queued(stamped, row, entry))
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

    def status_of(self, session_id: str) -> str | None:
        """The latest status published in this process and not yet known to the store."""
        entry = self._logs.get(session_id)
        return None if entry is None else entry.status

    def known_last_id(self, session_id: str) -> int:
        """The newest event id this process assigned for the session (0 if none)."""
        entry = self._logs.get(session_id)
        return 0 if entry is None or entry.last_id is None else entry.last_id

    async def flush(self) -> None:
        """Wait until every event published before this call is persisted and delivered."""
        marker = _Flush()
        while self._queued() >= _QUEUE_SIZE:
            await self._room.park()
        self._send.send_nowait(marker)
        self._depth += 1
        await marker.done.wait()

    def seal(self, session_ids: Sequence[str]) -> None:
        """Refuse every later publish on these sessions (they are being deleted)."""
        self._sealed.update(session_ids)

    def unseal(self, session_ids: Sequence[str]) -> None:
        """Undo :meth:`seal` (a delete that failed, or finished)."""
        self._sealed.difference_update(session_ids)

    def disown(self, session_ids: set[str]) -> None:
        """Forget the counters of sessions whose tree is no longer held here.

        Another server may write their events next: the counter is read from the
        store again the next time this process holds them.
        """
        for session_id in session_ids:
            entry = self._logs.get(session_id)
            if entry is not None:
                entry.last_id = None
                entry.status = None

    def _lost(self, session_ids: tuple[str, ...]) -> None:
        """The store refused these sessions' events: their tree is not held here."""
        self._owners.lost(session_ids)
        self.disown(set(session_ids))

    def forget_session(self, session_id: str) -> None:
        """End every subscription of a deleted session and drop what is kept for it."""
        for subscription in self._open.get(session_id, ()):
            subscription.ended = True
        self._live.end_session(session_id)
        entry = self._logs.pop(session_id, None)
        if entry is not None:
            entry.gone = True
        self._sealed.discard(session_id)

    # -- the writer ------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """The writer: persist each batch, then fan it out. Returns after :meth:`close`.

        Cancellation: shielded. The writer must outlive every turn that may still
        publish its terminal events while the runtime is being cancelled; it ends only
        when :meth:`close` is called (the runtime does, last), and quickly after
        :meth:`abandon`.
        """
        task_status.started()
        try:
            with trio.CancelScope(shield=True):
                async with self._receive:
                    async for first in self._receive:
                        # No wait for more to arrive: what a streaming session publishes
                        # while a batch is being written is the next batch. Under load
                        # (two hundred subscribers to serve) a scheduler round is long,
                        # and every stage of persist-then-publish that waits one adds
                        # to every subscriber's delay.
                        batch = [first]
                        while len(batch) < _BATCH_MAX:
                            try:
                                batch.append(self._receive.receive_nowait())
                            except (trio.WouldBlock, trio.EndOfChannel):
                                break
                        self._depth -= len(batch)
                        self._room.unpark_all()
                        await self._write(batch)
                        self._room.unpark_all()  # sessions below their in-flight bound
            self._live.close_all()
        finally:
            self.drained.set()

    async def _write(self, batch: list[_Queued | _Flush]) -> None:
        queued = [q for q in batch if isinstance(q, _Queued)]
        written = await self._persister.persist([q.row for q in queued]) if queued else []
        # Stored events by session, in order: each subscriber gets its session's share
        # of the batch as one tuple (one wake-up), shared by all of them.
        stored: dict[str, list[Event]] = {}
        for item, ok in zip(queued, written, strict=True):
            item.log.in_flight -= 1
            if not item.log.in_flight and item.log.tenure is not None:
                item.log.tenure.release()
                item.log.tenure = None
            if ok:
                stored.setdefault(item.row.session_id, []).append(item.event)
        for session_id, events in stored.items():
            self._deliver(session_id, tuple(events))
        for marker in batch:
            if isinstance(marker, _Flush):
                marker.done.set()
        for session_id in {q.row.session_id for q in queued}:
            self._maybe_drop(session_id)

    def deliver_remote(self, event: Event) -> None:
        """Deliver an event another server wrote (it is durable already)."""
        self._deliver(event.session_id, (event,))

    def live_position(self, session_id: str) -> int | None:
        """The lowest id delivered to a live subscriber of the session (``None``: none)."""
        return self._live.position(session_id)

    def _deliver(self, session_id: str, events: tuple[Event, ...]) -> None:
        self._live.deliver(session_id, events)

    async def close(self) -> None:
        """Stop accepting events; the writer persists what is queued, then returns."""
        self._closed = True
        self._room.unpark_all()
        await self._send.aclose()

    def abandon(self) -> None:
        """Stop retrying: what the store has not taken yet is dropped (and logged).

        For a shutdown past its grace, with the store abandoned too.
        """
        self._persister.abandon()

    # -- consuming -------------------------------------------------------------------

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

    def statistics(self) -> dict[str, Any]:
        """Queue depth, subscriber counts and sessions kept, for tests and monitoring."""
        return {
            "queued": self._queued(),
            "subscribers": self._live.count(),
            "sessions": len(self._logs),
        }
