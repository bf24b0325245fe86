"""The event writer: a bounded queue, and one task that persists each batch, then delivers it.

:class:`EventWriter` owns the queue between publishers and the store. Publishers put
stamped events in it (:meth:`EventWriter.put`); one writer task
(:meth:`EventWriter.run`, in the runtime's service nursery) takes whatever is queued,
writes it to the store in one transaction (:mod:`._persist`), and only then fans it
out to live subscribers (:mod:`._live`) and the sessions feed. So every event a
subscriber sees is already durable, and a turn streaming thousands of deltas pays one
thread hop per batch, not per delta. Each subscriber gets its session's share of a
batch at once (one wake-up per batch, not per event), and each event's JSON text,
encoded once by the publisher, is what the store and every subscriber's transport use.

The bound is real: the queue is a memory channel of :data:`QUEUE_SIZE` +
:data:`RESERVE` items, and nothing is ever put past it. Ordinary publishers wait for room below
:data:`QUEUE_SIZE` (back-pressure); the last :data:`RESERVE` places are kept for what
must not wait — a turn's terminal events — and once those are gone too a put is
refused with :class:`~omnigent.errors.EventLogFull`, never dropped in silence.

Nothing lost: a batch the store refuses is retried, then written row by row
(:mod:`._persist`): only the offending row is refused (logged with its session and
type), and every other session's log stays complete and gap-free. A write the store
refused because this server's lease is gone is dropped — never delivered — and the
tree given up. Events other servers write reach this bus's subscribers through
:meth:`EventWriter.deliver` too (the remote feed, :mod:`omnigent.core.cluster`).

Resource handling: the writer is shielded, so that turns cancelled with the runtime
can still publish their terminal events; it returns after :meth:`EventWriter.close`
once the queue is empty. A shutdown past its grace abandons it
(:meth:`EventWriter.abandon`): retries stop, and what the store has not taken is
dropped with a log line; a writer still stuck after that is cancelled
(:meth:`EventWriter.cancel`).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import attrs
import trio

from ...errors import EventLogFull
from ...model import Event
from ._live import LiveSubscribers
from ._logs import Queued, SessionLogs
from ._persist import Persister
from ._session_changes import SessionChanges

__all__ = ["QUEUE_SIZE", "RESERVE", "EventWriter", "Flush"]

log = logging.getLogger("omnigent.core.bus")

QUEUE_SIZE = 8192
"""Queued items past which an ordinary publisher waits for room."""
RESERVE = 1024
"""Places past :data:`QUEUE_SIZE` only what must not wait may take (a turn's end):
the queue's bound is the two together, and nothing is ever queued past it."""
_BATCH_MAX = 1024


@attrs.define(eq=False)
class Flush:
    """A marker in the queue: set once everything queued before it is published."""

    done: trio.Event = attrs.field(factory=trio.Event)


class EventWriter:
    """The bus's queue and its writer task (see the module docstring).

    Args:
        persister: writes a batch to the store.
        logs: told of every event that left the queue (stored or refused).
        live: the live subscribers stored batches are delivered to.
        changes: the sessions feed, told of every stored batch.
    """

    def __init__(
        self,
        persister: Persister,
        logs: SessionLogs,
        live: LiveSubscribers,
        changes: SessionChanges,
    ) -> None:
        self._persister = persister
        self._logs = logs
        self._live = live
        self._changes = changes
        # Read here, not at each use, so a test can make them small.
        self.queue_size = QUEUE_SIZE
        self.capacity = QUEUE_SIZE + RESERVE
        self._send, self._receive = trio.open_memory_channel[Queued | Flush](self.capacity)
        # What is in the channel: read on every publish (its statistics() would cost
        # an allocation each time). Publishers read it; only this object changes it.
        self.queued = 0
        self.room = trio.lowlevel.ParkingLot()  # publishers waiting for room
        self.drained = trio.Event()  # the writer task has returned
        self._scope: trio.CancelScope | None = None

    # -- the queue -------------------------------------------------------------------

    def check_room(self, count: int, *, reserve: bool = False) -> None:
        """Refuse ``count`` more items unless there is room for them now (:meth:`put`).

        ``reserve``: they may take the places past :data:`QUEUE_SIZE` (an ordinary
        publisher waits on :attr:`room` for the queue to drop below it first).
        Synchronous: the caller stamps and puts them before anything else runs.

        Raises:
            EventLogFull: no room for all of them.
        """
        if self.queued + count > (self.capacity if reserve else self.queue_size):
            raise EventLogFull(count, self.queued, self.capacity)

    def put(self, items: Sequence[Queued | Flush]) -> None:
        """Queue ``items``, after :meth:`check_room` said there is room for them.

        Raises:
            trio.ClosedResourceError: the writer is closed.
        """
        send = self._send.send_nowait
        for item in items:
            send(item)  # past the capacity it raises WouldBlock: the bound holds regardless
            self.queued += 1

    async def flush(self) -> None:
        """Wait until everything queued before this call is persisted and delivered."""
        marker = Flush()
        while self.queued >= self.queue_size:
            await self.room.park()
        self.check_room(1)
        self.put((marker,))
        await marker.done.wait()

    # -- the writer task ---------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Persist each batch, then fan it out. Returns after :meth:`close`.

        Cancellation: shielded. The writer must outlive every turn that may still
        publish its terminal events while the runtime is being cancelled; it ends
        when :meth:`close` is called (the runtime does, last), quickly after
        :meth:`abandon`, and at once after :meth:`cancel`.
        """
        task_status.started()
        taken: list[Queued | Flush] = []  # the batch being written
        try:
            with trio.CancelScope(shield=True) as self._scope:
                async for first in self._receive:
                    # No wait for more to arrive: what a streaming session publishes
                    # while a batch is being written is the next batch. Under load (two
                    # hundred subscribers to serve) a scheduler round is long, and every
                    # stage of persist-then-publish that waits one adds to every
                    # subscriber's delay.
                    taken = [first]
                    while len(taken) < _BATCH_MAX:
                        try:
                            taken.append(self._receive.receive_nowait())
                        except (trio.WouldBlock, trio.EndOfChannel):
                            break
                    self.queued -= len(taken)
                    self.room.unpark_all()
                    await self._write(taken)
                    taken = []
                    self.room.unpark_all()  # sessions below their in-flight bound
            if self._scope.cancelled_caught:
                self._drop(taken)
        finally:
            self._receive.close()
            self._live.close_all()
            self.drained.set()

    async def _write(self, batch: list[Queued | Flush]) -> None:
        queued = [q for q in batch if isinstance(q, Queued)]
        settled = False

        def settle(written: Sequence[bool]) -> None:
            nonlocal settled
            if not settled:  # once: a store may call on_stored, then be retried
                settled = True
                self._settle(batch, queued, written)

        if queued:
            # The whole batch stored by one write (the common case) is delivered from
            # the store's commit completion: a scheduler round sooner than this task
            # resumes, and under load every round is every subscriber's delay.
            rows = [q.row for q in queued]
            written = await self._persister.persist(
                rows, on_stored=lambda: settle([True] * len(rows))
            )
        else:
            written = []
        settle(written)

    def _settle(
        self, batch: list[Queued | Flush], queued: list[Queued], written: Sequence[bool]
    ) -> None:
        """The batch left the writer: its sessions settled, what was stored delivered,
        its flush markers set. Synchronous: it may run in the store's commit callback."""
        self._logs.written(queued)
        # Stored events by session, in order: each subscriber gets its session's share
        # of the batch as one tuple (one wake-up), shared by all of them.
        stored: dict[str, list[Event]] = {}
        for item, ok in zip(queued, written, strict=True):
            if ok:
                stored.setdefault(item.row.session_id, []).append(item.event)
        for session_id, events in stored.items():
            self.deliver(session_id, tuple(events))
        for marker in batch:
            if isinstance(marker, Flush):
                marker.done.set()
        batch.clear()  # settled: a cancel of the writer from here on drops none of it

    def deliver(self, session_id: str, events: tuple[Event, ...]) -> None:
        """Hand stored ``events`` (one session's, in order) to whoever follows it.

        The writer's own batches, and events another server wrote (already durable).
        """
        self._live.deliver(session_id, events)
        self._changes.events(session_id, events)  # the sessions feed

    # -- closing -----------------------------------------------------------------------

    async def close(self) -> None:
        """Take nothing more; the writer persists what is queued, then returns."""
        self.room.unpark_all()
        await self._send.aclose()

    def abandon(self) -> None:
        """Stop retrying: what the store has not taken yet is dropped (and logged).

        For a shutdown past its grace, with the store abandoned too.
        """
        self._persister.abandon()

    def cancel(self) -> None:
        """Cancel the writer wherever it waits; what is still queued is dropped (and
        logged). The last resort of a shutdown whose writer did not end when abandoned."""
        if self._scope is not None:
            self._scope.shield = False
            self._scope.cancel()

    def _drop(self, taken: list[Queued | Flush]) -> None:
        """The writer was cancelled: settle and log what it will never write."""
        while True:
            try:
                taken.append(self._receive.receive_nowait())
            except (trio.WouldBlock, trio.EndOfChannel):
                break
        self.queued = 0
        left = [item for item in taken if isinstance(item, Queued)]
        for item in taken:
            if isinstance(item, Flush):
                item.done.set()
        self._logs.written(left)
        sessions = sorted({q.row.session_id for q in left})
        named = ", ".join(sessions[:10]) + (" …" if len(sessions) > 10 else "")
        log.error(
            "abandoning the event writer: %d events not written (sessions: %s)",
            len(left),
            named or "none",
        )
