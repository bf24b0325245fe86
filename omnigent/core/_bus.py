"""The event bus: per-session sequence numbers, persist then publish, replay.

``publish`` stamps an event with its session's next ``event_id`` and queues it; one
writer task (:meth:`EventBus.run`, in the runtime's service nursery) takes whatever is
queued, writes it to the store in one transaction, and only then fans it out to live
subscribers. So every event a subscriber sees is already durable, and a turn streaming
thousands of deltas pays one thread hop per batch, not per delta.

A subscriber replays from the store, then tails live, with no gap and no duplicate:
it registers for live delivery *before* its last store read and skips anything at or
below the last id it yielded. A subscriber that falls behind is detached rather than
allowed to block the writer; its iterator notices and resumes from the store where it
stopped, so it never loses an event.

Resource handling: the queue and every subscriber buffer are bounded. ``publish``
waits for room when the queue is full (back-pressure on the producer), but never while
holding a half-assigned sequence number.
"""

from __future__ import annotations

import logging
import math
from collections import defaultdict, deque
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import attrs
import trio

from .._ids import now
from ..model import Event, SessionStatus, event_from_dict
from ..stores import Store, StoredEvent

__all__ = ["EventBus", "Subscription"]

log = logging.getLogger(__name__)

_QUEUE_SIZE = 8192
_BATCH_MAX = 1024
_SUBSCRIBER_BUFFER = 2048
_REPLAY_PAGE = 500
_RETRY_DELAYS = (0.05, 0.25, 1.0)


@attrs.define(eq=False)
class _Flush:
    """A marker in the queue: set once everything queued before it is published."""

    done: trio.Event = attrs.field(factory=trio.Event)


@attrs.define(eq=False)
class _Live:
    """One subscriber's live buffer, as the writer sees it."""

    send: trio.MemorySendChannel[Event]
    lagging: bool = False


class EventBus:
    """Sequences, persists and fans out session events. Owned by a ``Runtime``."""

    def __init__(self, store: Store) -> None:
        self._store = store
        # The channel itself is unbounded; publish() keeps it to _QUEUE_SIZE by waiting
        # for room, and only publish_now() (a turn's terminal events: a handful per
        # live turn) may go past that bound, so a turn can always end.
        self._send, self._receive = trio.open_memory_channel[Event | _Flush](math.inf)
        self._room = trio.lowlevel.ParkingLot()
        self._last_id: dict[str, int] = {}
        self._live: defaultdict[str, set[_Live]] = defaultdict(set)
        self._closed = False
        self._status: dict[str, str] = {}
        # Open subscriptions by session (entries live as long as their block), so a
        # delete can end even those still catching up from the store.
        self._open: defaultdict[str, set[Subscription]] = defaultdict(set)

    # -- producing -------------------------------------------------------------------

    async def last_event_id(self, session_id: str) -> int:
        """The id of the newest event published (queued) for the session."""
        if session_id not in self._last_id:
            stored = await self._store.max_event_id(session_id)
            self._last_id.setdefault(session_id, stored)
        return self._last_id[session_id]

    async def publish(self, session_id: str, event: Event) -> Event:
        """Stamp ``event`` with the session's next id and queue it for the writer.

        Returns the stamped event. Waits only while the queue is full.

        Cancellation: if cancelled while waiting for room, nothing was published and
        no id was used.
        """
        await self.last_event_id(session_id)
        while self._queued() >= _QUEUE_SIZE:
            await self._room.park()
        return self._stamp_and_queue(session_id, event)

    async def publish_now(self, session_id: str, *events: Event) -> list[Event]:
        """Publish ``events`` back to back without waiting for room in the queue.

        For what must not be held up or split: a turn's terminal ``response.*`` event
        and ``session.status`` go out together even when the queue is full.

        Raises:
            trio.ClosedResourceError: the bus is closed.
        """
        await self.last_event_id(session_id)
        return [self._stamp_and_queue(session_id, event) for event in events]

    def _stamp_and_queue(self, session_id: str, event: Event) -> Event:
        # Synchronous: nothing can run between taking an id and queueing the event.
        if self._closed:
            raise trio.ClosedResourceError("the event bus is closed")
        event_id = self._last_id[session_id] + 1
        self._last_id[session_id] = event_id
        stamped: Event = event.stamped(session_id=session_id, event_id=event_id, created_at=now())
        if isinstance(stamped, SessionStatus):
            self._status[session_id] = stamped.status
        self._send.send_nowait(stamped)
        return stamped

    def _queued(self) -> int:
        return self._send.statistics().current_buffer_used

    def status_of(self, session_id: str) -> str | None:
        """The latest status published for the session in this process, if any."""
        return self._status.get(session_id)

    def known_last_id(self, session_id: str) -> int:
        """The newest event id this process assigned for the session (0 if none)."""
        return self._last_id.get(session_id, 0)

    async def flush(self) -> None:
        """Wait until every event published before this call is persisted and delivered."""
        marker = _Flush()
        while self._queued() >= _QUEUE_SIZE:
            await self._room.park()
        self._send.send_nowait(marker)
        await marker.done.wait()

    def forget_session(self, session_id: str) -> None:
        """End every live subscription of a deleted session and drop its counter."""
        for subscription in self._open.get(session_id, ()):
            subscription.ended = True
        for live in self._live.pop(session_id, set()):
            live.send.close()
        self._last_id.pop(session_id, None)
        self._status.pop(session_id, None)

    # -- the writer ------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """The writer: persist each batch, then fan it out. Returns after :meth:`close`.

        Cancellation: shielded. The writer must outlive every turn that may still
        publish its terminal events while the runtime is being cancelled; it ends only
        when :meth:`close` is called (the runtime does, last).
        """
        task_status.started()
        with trio.CancelScope(shield=True):
            async with self._receive:
                async for first in self._receive:
                    batch = [first]
                    while len(batch) < _BATCH_MAX:
                        try:
                            batch.append(self._receive.receive_nowait())
                        except (trio.WouldBlock, trio.EndOfChannel):
                            break
                    self._room.unpark_all()
                    await self._write(batch)
        for subscribers in self._live.values():
            for live in subscribers:
                live.send.close()
        self._live.clear()

    async def _write(self, batch: list[Event | _Flush]) -> None:
        events = [e for e in batch if not isinstance(e, _Flush)]
        stored = not events or await self._persist(events)
        for item in batch:
            if isinstance(item, _Flush):
                item.done.set()
            elif stored:
                self._deliver(item)

    async def _persist(self, events: list[Event]) -> bool:
        """Write a batch, retrying a failing store; False if it could not be written.

        A store that keeps failing must not take the runtime down with it: the batch
        is then dropped (and logged), as it was never durable it is never delivered.
        """
        rows = [StoredEvent(e.session_id, e.event_id, e.type, e.to_dict()) for e in events]
        for delay in (*_RETRY_DELAYS, None):
            try:
                await self._store.append_events(rows)
            except Exception:
                if delay is None:
                    log.exception("dropping %d events the store would not take", len(rows))
                    return False
                log.warning("the store refused %d events; retrying", len(rows), exc_info=True)
                await trio.sleep(delay)
            else:
                return True
        return False  # pragma: no cover - the loop always returns

    def _deliver(self, event: Event) -> None:
        subscribers = self._live.get(event.session_id)
        if not subscribers:
            return
        for live in list(subscribers):
            try:
                live.send.send_nowait(event)
            except trio.WouldBlock:
                # Too slow: detach it; its iterator resumes from the store.
                live.lagging = True
                subscribers.discard(live)
                live.send.close()
            except trio.BrokenResourceError:
                subscribers.discard(live)

    async def close(self) -> None:
        """Stop accepting events; the writer persists what is queued, then returns."""
        self._closed = True
        self._room.unpark_all()
        await self._send.aclose()

    # -- consuming -------------------------------------------------------------------

    def _attach(self, session_id: str) -> tuple[_Live, trio.MemoryReceiveChannel[Event]]:
        send, receive = trio.open_memory_channel[Event](_SUBSCRIBER_BUFFER)
        live = _Live(send)
        if self._closed:
            send.close()
        else:
            self._live[session_id].add(live)
        return live, receive

    def _detach(self, session_id: str, live: _Live) -> None:
        subscribers = self._live.get(session_id)
        if subscribers is not None:
            subscribers.discard(live)
            if not subscribers:
                del self._live[session_id]
        live.send.close()

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
        start = await self.last_event_id(session_id) if after is None else after
        subscription = Subscription(self, session_id, start, admits=admits)
        self._open[session_id].add(subscription)
        try:
            yield subscription
        finally:
            subscription._close()
            opened = self._open[session_id]
            opened.discard(subscription)
            if not opened:
                del self._open[session_id]

    def statistics(self) -> dict[str, Any]:
        """Queue depth and subscriber counts, for tests and monitoring."""
        return {
            "queued": self._queued(),
            "subscribers": sum(len(s) for s in self._live.values()),
        }


class Subscription:
    """An async iterator over a session's events, in order, each exactly once.

    Made by :meth:`EventBus.subscribe`; ``last_event_id`` is the id of the last event
    it yielded (or skipped as not for this viewer), where a reconnecting client resumes.
    """

    def __init__(
        self,
        bus: EventBus,
        session_id: str,
        after: int,
        *,
        admits: Callable[[Event], Awaitable[bool]] | None = None,
    ) -> None:
        self._bus = bus
        self.session_id = session_id
        self.last_event_id = after
        self._admits = admits
        # The next event, held while ``admits`` decides (so a cancel there loses nothing).
        self._held: Event | None = None
        self._replay: deque[Event] = deque()
        self._live: _Live | None = None
        self._receive: trio.MemoryReceiveChannel[Event] | None = None
        self._caught_up = False
        self._closed = False
        self.ended = False  # set when the session is deleted

    def __aiter__(self) -> Subscription:
        return self

    async def __anext__(self) -> Event:
        """The next event (that ``admits`` lets through, if the subscription has one).

        Cancellation: safe at any point. Every store read is kept the moment it
        returns, and an event is held until ``admits`` has answered for it, so a
        cancelled call loses nothing and the next call resumes.

        Raises:
            trio.ClosedResourceError: the subscription's block has exited.
        """
        while True:
            if self._held is None:
                self._held = await self._next_event()
            event = self._held
            admitted = self._admits is None or await self._admits(event)
            self._held = None
            self.last_event_id = event.event_id
            if admitted:
                return event

    async def _next_event(self) -> Event:
        """The next event after ``last_event_id``, from the store or live."""
        while True:
            if self._closed:
                raise trio.ClosedResourceError("this subscription was released")
            if self.ended:
                self._release()
                raise StopAsyncIteration
            if self._replay:
                event = self._replay.popleft()
                if event.event_id > self.last_event_id:
                    return event
                continue
            if not self._caught_up:
                await self._catch_up_step()
                continue
            assert self._receive is not None
            try:
                event = await self._receive.receive()
            except (trio.EndOfChannel, trio.ClosedResourceError):
                if self._live is not None and self._live.lagging:
                    self._release()  # resume from the store where we stopped
                    continue
                raise StopAsyncIteration from None
            if event.event_id > self.last_event_id:
                return event

    async def _catch_up_step(self) -> None:
        """One read of the store towards the present.

        Reads a page after the last yielded id. A full page means more to read. A
        short one means the store is nearly caught up: attach for live delivery, then
        read once more — an event committed meanwhile is either in that read or
        delivered live (or both, and then skipped by id) — and go live.
        """
        page = await self._read_page(self.last_event_id)
        self._replay.extend(page)
        if len(page) == _REPLAY_PAGE:
            return
        if self._receive is None:
            self._live, self._receive = self._bus._attach(self.session_id)
        else:
            self._caught_up = True

    async def _read_page(self, after: int) -> list[Event]:
        rows = await self._bus._store.read_events(self.session_id, after, _REPLAY_PAGE)
        return [event_from_dict(r) for r in rows]

    def _close(self) -> None:
        """End the subscription for good (its ``subscribe`` block exited)."""
        self._closed = True
        self._release()

    def _release(self) -> None:
        if self._live is not None:
            self._bus._detach(self.session_id, self._live)
        if self._receive is not None:
            self._receive.close()
        self._live = None
        self._receive = None
        self._caught_up = False
