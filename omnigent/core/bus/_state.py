"""What the event bus keeps for each session, and for how long.

:class:`BusState` is the ground the :class:`~._bus.EventBus` mixins stand on: it
declares the parts they share (set by ``EventBus.__init__``) and owns the per-session
state — a session's event counter (``last_id``), its latest status, the events it has
on their way to the store, and who is using it. The publishing side stamps with that
state (:mod:`._bus`), the writer (:mod:`._writer`) settles it once a batch is
written, and subscriptions (:mod:`._subscribe`) keep it alive while they are open.

Resource handling: per-session state lives only while the session is in use — held by
an actor (:meth:`BusState.hold`), subscribed to, or with events on their way to the
store — and is read again from the session's row when it is needed next, so memory
stays flat however many sessions a process touches (:meth:`BusState._maybe_drop`).

With several servers on one database (:mod:`omnigent.core.cluster._ownership`), only the
server holding a session's tree keeps its counter: one this process no longer holds is
forgotten (:meth:`BusState.disown`, or :meth:`BusState._lost` when the store refused its
events because the lease is gone), and read from the store again the next time it is
held. A session being deleted is sealed, and a deleted one has no row to count from, so
nothing is published into either (``SessionNotFound``).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

import attrs
import trio

from ...errors import SessionElsewhere, SessionNotFound
from ...model import Event
from ...stores import Store, StoredEvent
from ..cluster import Ownership, Tenure
from ._live import LiveSubscribers
from ._persist import Persister
from ._session_changes import SessionChanges
from ._subscription import Subscription

__all__ = ["BusState", "Flush", "Queued", "SessionHold", "SessionLog"]


@attrs.define(eq=False)
class SessionLog:
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
    log: SessionLog


@attrs.define(eq=False)
class Queued:
    """A stamped event in the writer's queue, with its row and its session's state."""

    event: Event
    row: StoredEvent
    log: SessionLog


@attrs.define(eq=False)
class Flush:
    """A marker in the queue: set once everything queued before it is published."""

    done: trio.Event = attrs.field(factory=trio.Event)


class BusState:
    """The parts of an event bus its mixins share, and its per-session state."""

    # Set by ``EventBus.__init__``, which says what each holds.
    _store: Store
    _owners: Ownership
    _records_only: bool
    _send: trio.MemorySendChannel[Queued | Flush]
    _receive: trio.MemoryReceiveChannel[Queued | Flush]
    _depth: int
    _unyielded: int
    _room: trio.lowlevel.ParkingLot
    _logs: dict[str, SessionLog]
    _live: LiveSubscribers
    _open: defaultdict[str, set[Subscription]]
    _sealed: set[str]
    _closed: bool
    _persister: Persister
    _changes: SessionChanges
    drained: trio.Event

    async def _loaded(self, session_id: str) -> SessionLog:
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
            entry = self._logs[session_id] = SessionLog()
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
            entry = self._logs[session_id] = SessionLog()
        entry.holds += 1
        return SessionHold(session_id, entry)

    def release(self, hold: SessionHold) -> None:
        hold.log.holds -= 1
        if self._logs.get(hold.session_id) is hold.log:
            self._maybe_drop(hold.session_id)

    def status_of(self, session_id: str) -> str | None:
        """The latest status published in this process and not yet known to the store."""
        entry = self._logs.get(session_id)
        return None if entry is None else entry.status

    def known_last_id(self, session_id: str) -> int:
        """The newest event id this process assigned for the session (0 if none)."""
        entry = self._logs.get(session_id)
        return 0 if entry is None or entry.last_id is None else entry.last_id

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
