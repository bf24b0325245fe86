"""A subscription: one session's events, replayed from the store, then live.

A subscriber replays from the store, then tails live, with no gap and no duplicate: it
registers for live delivery *before* its last store read and skips anything at or below
the last id it yielded; an id skipped in live delivery (another server wrote it, see
:mod:`omnigent.core.cluster.shared._remote_feed`) sends it back to the store, which has
it. A subscriber that falls behind is detached by the bus rather than allowed to block the
writer; its iterator notices and resumes from the store where it stopped, so it never
loses an event.

Live events arrive in batches (the writer's share of one store write for this
session), served one by one from a local buffer; the subscription yields to the
scheduler every :data:`YIELD_EVERY` events it serves without waiting, so a consumer
relaying a burst of thousands stays fair to every other task.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Awaitable, Callable

import trio

from ...model import Event, event_from_dict
from ...stores import Store
from ._live import Live, LiveSubscribers

__all__ = ["REPLAY_PAGE", "YIELD_EVERY", "Subscription"]

REPLAY_PAGE = 500
YIELD_EVERY = 128
"""Events served from a buffer (live batch or store page) between two checkpoints.

More than a publisher's :data:`omnigent.core.bus._bus.YIELD_EVERY`: a consumer must be
able to outpace a producer sharing the loop with it, or it falls behind and is sent to
the store (reading back is far dearer than keeping up).
"""


_EMPTY: deque[Event] = deque(maxlen=0)  # shared, and never appended to


class Subscription:
    """An async iterator over a session's events, in order, each exactly once.

    Made by :meth:`EventBus.subscribe`; ``last_event_id`` is the id of the last event
    it yielded (or skipped as not for this viewer), where a reconnecting client resumes.

    Args:
        store: where it replays from.
        live: the bus's live fan-out, which it attaches to once caught up.
    """

    def __init__(
        self,
        store: Store,
        live: LiveSubscribers,
        session_id: str,
        after: int,
        *,
        admits: Callable[[Event], Awaitable[bool]] | None = None,
    ) -> None:
        self._store = store
        self._fanout = live
        self.session_id = session_id
        self.last_event_id = after
        self._admits = admits
        # The next event, held while ``admits`` decides (so a cancel there loses nothing).
        self._held: Event | None = None
        # A store page, and the live batch being served (the bus's tuple, read in place
        # by every subscriber). Both let go before waiting for the next batch: an idle
        # subscription (a thousand open streams) holds neither.
        self._replay: deque[Event] = _EMPTY
        self._batch: tuple[Event, ...] = ()
        self._at = 0  # the next event of ``_batch`` to serve
        self._unyielded = 0  # events served from those since the last checkpoint
        self._live: Live | None = None
        self._receive: trio.MemoryReceiveChannel[tuple[Event, ...]] | None = None
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
        event = await self._next_admitted(wait=True)
        assert event is not None
        return event

    async def next_ready(self) -> Event | None:
        """The next event if one is at hand, else ``None``: never waits for a new batch.

        At hand: the rest of the batch being served, a store page (a subscriber
        catching up reads the store), or a batch the bus has already delivered — what
        a consumer coalescing a burst into one write takes after its first event.

        Cancellation and errors: as :meth:`__anext__`; ``StopAsyncIteration`` at the end.
        """
        return await self._next_admitted(wait=False)

    async def _next_admitted(self, *, wait: bool) -> Event | None:
        while True:
            if self._held is None:
                self._held = await self._next_event(wait=wait)
                if self._held is None:
                    return None
            event = self._held
            admitted = self._admits is None or await self._admits(event)
            self._held = None
            self.last_event_id = event.event_id
            if admitted:
                return event

    async def _next_event(self, *, wait: bool) -> Event | None:
        """The next event after ``last_event_id``, from the store or live (``None``:
        ``wait`` is false and the next would have to be waited for)."""
        while True:
            if self._closed:
                raise trio.ClosedResourceError("this subscription was released")
            if self.ended:
                self._release()
                raise StopAsyncIteration
            batched = self._at < len(self._batch)
            if (self._replay or batched) and self._unyielded >= YIELD_EVERY:
                self._unyielded = 0
                await trio.lowlevel.checkpoint()  # before taking: a cancel loses nothing
                continue
            if self._replay:
                event = self._replay.popleft()
                if event.event_id > self.last_event_id:
                    self._unyielded += 1
                    return event
                continue
            if batched:
                event = self._batch[self._at]
                if event.event_id > self.last_event_id + 1:
                    # An id was skipped (written by another server and fed through the
                    # store, or before this process held the session): the store has it.
                    self._release()
                    continue
                self._at += 1
                if event.event_id > self.last_event_id:
                    self._unyielded += 1
                    return event
                continue
            if not self._caught_up:
                await self._catch_up_step()
                self._unyielded = 0
                continue
            assert self._receive is not None and self._live is not None
            # Nothing is kept while waiting: an idle stream holds no events or buffers.
            self._replay, self._batch, self._at = _EMPTY, (), 0
            try:
                batch = await self._receive.receive() if wait else self._receive.receive_nowait()
            except trio.WouldBlock:
                return None
            except (trio.EndOfChannel, trio.ClosedResourceError):
                if self._live is not None and self._live.lagging:
                    self._release()  # resume from the store where we stopped
                    continue
                raise StopAsyncIteration from None
            self._live.pending -= len(batch)
            if wait:  # a batch taken without waiting is no checkpoint
                self._unyielded = 0
            # Served in place (only an empty one is ever replaced): no copy per subscriber.
            self._batch, self._at = batch, 0

    async def _catch_up_step(self) -> None:
        """One read of the store towards the present.

        Reads a page after the last yielded id. A full page means more to read. A
        short one means the store is nearly caught up: attach for live delivery, then
        read once more — an event committed meanwhile is either in that read or
        delivered live (or both, and then skipped by id) — and go live.
        """
        page = await self._read_page(self.last_event_id)
        if self._replay is _EMPTY:
            if page:  # an empty page (an idle session) makes no deque: 760 bytes each
                self._replay = deque(page)
        else:
            self._replay.extend(page)
        if len(page) == REPLAY_PAGE:
            return
        if self._receive is None:
            read = self._replay[-1].event_id if self._replay else self.last_event_id
            self._live, self._receive = self._fanout.attach(self.session_id, read)
        else:
            self._caught_up = True

    async def _read_page(self, after: int) -> list[Event]:
        rows = await self._store.read_events(self.session_id, after, REPLAY_PAGE)
        return [event_from_dict(r) for r in rows]

    def go_live(self) -> None:
        """Attach for live delivery at once: nothing after ``last_event_id`` is stored
        yet (the bus calls this when ``after`` was the newest id it assigned)."""
        self._live, self._receive = self._fanout.attach(self.session_id, self.last_event_id)
        self._caught_up = True

    def attach_first(self) -> None:
        """Attach for live delivery before the first store read (the bus calls this
        when ``last_event_id`` is the newest id stored a moment ago): an event stored
        since is in that one read or delivered live (or both, and then skipped by id),
        so the read that would only find the present is saved."""
        self._live, self._receive = self._fanout.attach(self.session_id, self.last_event_id)

    def close(self) -> None:
        """End the subscription for good (its ``subscribe`` block exited)."""
        self._closed = True
        self._release()

    def _release(self) -> None:
        if self._live is not None:
            self._fanout.detach(self.session_id, self._live)
        if self._receive is not None:
            self._receive.close()
        self._batch, self._at = (), 0  # what is left of a batch comes from the store again
        self._live = None
        self._receive = None
        self._caught_up = False
