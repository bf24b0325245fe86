"""The event bus's writer: persist each batch, then deliver it.

One writer task (:meth:`BusWriter.run`, in the runtime's service nursery) takes
whatever :meth:`~._bus.EventBus.publish` has queued, writes it to the store in one
transaction (:mod:`._persist`), and only then fans it out to live subscribers
(:mod:`._live`). So every event a subscriber sees is already durable, and a turn
streaming thousands of deltas pays one thread hop per batch, not per delta. The writer
hands each subscriber its session's share of a batch at once (one wake-up per batch,
not per event), and each event's JSON text, encoded once by the publisher, is what
the store and every subscriber's transport use.

Nothing lost: a batch the store refuses is retried, then written row by row
(:mod:`._persist`): only the offending row is refused (logged with its session and
type), and every other session's log stays complete and gap-free. With several servers
on one database (:mod:`omnigent.core.cluster._ownership`), the bus keeps a tenure on a
session's tree while the session has events on their way to the store (the store fences
writes by lease), and a write the store refused because the lease is gone is dropped —
never delivered — and the tree given up. Events other servers write reach this bus's
subscribers through :meth:`BusWriter.deliver_remote` (the remote feed,
:mod:`omnigent.core.cluster._remote_feed`).
"""

from __future__ import annotations

import trio

from ...model import Event
from ._state import BusState, Flush, Queued

__all__ = ["BusWriter"]

_BATCH_MAX = 1024


class BusWriter(BusState):
    """The writer half of an :class:`~._bus.EventBus`: persist, deliver, close."""

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

    async def _write(self, batch: list[Queued | Flush]) -> None:
        queued = [q for q in batch if isinstance(q, Queued)]
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
            if isinstance(marker, Flush):
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
        self._changes.events(session_id, events)  # the sessions feed

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
