"""Each session's event log as the bus keeps it: its counter, its status, who uses it.

:class:`SessionLogs` owns the per-session state of an :class:`~._bus.EventBus` — a
session's event counter (``last_id``), its latest status, the events it has on their
way to the store, and who is using it — and the rules for stamping an event with the
next id. The bus stamps through it (:meth:`SessionLogs.stamp`), the writer settles what
it wrote (:meth:`SessionLogs.written`), and actors and subscriptions keep a session's
state warm while they run (:meth:`SessionLogs.hold`).

Resource handling: a session's state lives only while the session is in use — held (an
actor, an open subscription), or with events on their way to the store, or with a
publisher between an await and its stamp — and is read again from the session's row
when it is needed next, so memory stays flat however many sessions a process touches
(:meth:`SessionLogs.drop_if_unused`).

With several servers on one database (:mod:`omnigent.core.cluster`), only the server
holding a session's tree keeps its counter: one this process no longer holds is
forgotten (:meth:`SessionLogs.disown`, or :meth:`SessionLogs.lost` when the store refused
its events because the lease is gone) and read from the store again the next time it is
held. A session being deleted is sealed, and a deleted one has no row to count from, so
nothing is published into either (``SessionNotFound``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import attrs

from ..._ids import now
from ...errors import InvalidInput, SessionElsewhere, SessionNotFound
from ...model import Event, SessionStatusChanged
from ...stores import Store, StoredEvent
from ..cluster import Ownership, Tenure

__all__ = ["Queued", "SessionHold", "SessionLog", "SessionLogs", "encode_event"]


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
class SessionLog:
    """What the bus keeps for one session while it is in use."""

    last_id: int | None = None  # None until read from the store
    status: str | None = None
    in_flight: int = 0  # queued, not yet written
    users: int = 0  # publishers between an await and their stamp
    holds: int = 0  # actors and open subscriptions keeping it warm
    gone: bool = False  # the session was deleted
    tenure: Tenure | None = None  # the tree held here while events are in flight


@attrs.frozen(eq=False)
class SessionHold:
    """A token from :meth:`SessionLogs.hold`; give it back with :meth:`SessionLogs.release`."""

    session_id: str
    log: SessionLog


@attrs.define(eq=False)
class Queued:
    """A stamped event on its way to the store, with its row and its session's state."""

    event: Event
    row: StoredEvent
    log: SessionLog


class SessionLogs:
    """The per-session state of an event bus (see the module docstring).

    Args:
        store: where a counter is read from when a session is first used.
        ownership: which sessions' trees this process holds (it counts only those).
    """

    def __init__(self, store: Store, ownership: Ownership) -> None:
        self._store = store
        self._owners = ownership
        self._logs: dict[str, SessionLog] = {}
        self._sealed: set[str] = set()  # sessions being deleted

    def __len__(self) -> int:
        return len(self._logs)

    def ready(self, session_id: str) -> SessionLog | None:
        """The session's state if an event can be stamped on it without an await:
        its counter is known, its tree held here and it is not sealed. The hot path."""
        log = self._logs.get(session_id)
        if (
            log is None
            or log.last_id is None
            or session_id in self._sealed
            or not self._owners.owns(session_id)
        ):
            return None
        return log

    async def load(self, session_id: str) -> SessionLog:
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
        log = self._logs.get(session_id)
        if log is None:
            log = self._logs[session_id] = SessionLog()
        if log.last_id is None:
            # The claim of its tree just read it (PostgreSQL): no read of the store.
            claimed = self._owners.claimed_head(session_id)
            if claimed is not None:
                log.last_id = claimed
                return log
            log.users += 1
            try:
                stored = await self._store.max_event_id(session_id)
            finally:
                log.users -= 1
            if stored is None:
                self.drop_if_unused(session_id)
                raise SessionNotFound(session_id)
            if log.last_id is None:
                log.last_id = stored
        return log

    def stamp(self, session_id: str, log: SessionLog, events: Sequence[Event]) -> list[Queued]:
        """Give ``events`` the session's next ids, as rows ready for the store.

        Synchronous: the caller queues them before anything else can run, so an id
        taken is always an id written. All are encoded first, so either every event
        is stamped or none.

        Raises:
            SessionNotFound: deleted, or being deleted. SessionElsewhere: the tree was
            given up while the publisher waited. InvalidInput: a payload cannot be
            encoded.
        """
        if log.gone or session_id in self._sealed or self._logs.get(session_id) is not log:
            raise SessionNotFound(session_id)
        if log.last_id is None:
            raise SessionElsewhere(session_id, "another server")
        created = now()
        ready: list[Queued] = []
        for offset, event in enumerate(events, start=1):
            stamped: Event = event.stamped(
                session_id=session_id, event_id=log.last_id + offset, created_at=created
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
            ready.append(Queued(stamped, row, log))
        if not log.in_flight:
            # The tree stays held here until these events are written (or refused).
            log.tenure = self._owners.retain(session_id)
        for queued in ready:
            log.last_id = queued.event.event_id
            log.in_flight += 1
            if queued.row.status is not None:
                log.status = queued.row.status
        return ready

    def written(self, queued: Iterable[Queued]) -> None:
        """These events left the writer (stored or refused): settle their sessions."""
        sessions: set[str] = set()
        for item in queued:
            log = item.log
            log.in_flight -= 1
            if not log.in_flight and log.tenure is not None:
                log.tenure.release()
                log.tenure = None
            sessions.add(item.row.session_id)
        for session_id in sessions:
            self.drop_if_unused(session_id)

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
        log = await self.load(session_id)
        assert log.last_id is not None
        value = log.last_id
        self.drop_if_unused(session_id)
        return value

    def drop_if_unused(self, session_id: str) -> None:
        """Forget a session's state once nothing needs it (its row has it all)."""
        log = self._logs.get(session_id)
        if log is not None and not (log.users or log.holds or log.in_flight):
            del self._logs[session_id]

    def hold(self, session_id: str) -> SessionHold:
        """Keep the session's state in memory until :meth:`release` (an actor's life,
        an open subscription's)."""
        log = self._logs.get(session_id)
        if log is None:
            log = self._logs[session_id] = SessionLog()
        log.holds += 1
        return SessionHold(session_id, log)

    def release(self, hold: SessionHold) -> None:
        hold.log.holds -= 1
        if self._logs.get(hold.session_id) is hold.log:
            self.drop_if_unused(hold.session_id)

    def status_of(self, session_id: str) -> str | None:
        """The latest status published in this process and not yet known to the store."""
        log = self._logs.get(session_id)
        return None if log is None else log.status

    def known_last_id(self, session_id: str) -> int:
        """The newest event id this process assigned for the session (0 if none)."""
        log = self._logs.get(session_id)
        return 0 if log is None or log.last_id is None else log.last_id

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
            log = self._logs.get(session_id)
            if log is not None:
                log.last_id = None
                log.status = None

    def lost(self, session_ids: tuple[str, ...]) -> None:
        """The store refused these sessions' events: their tree is not held here."""
        self._owners.lost(session_ids)
        self.disown(set(session_ids))

    def forget(self, session_id: str) -> None:
        """The session was deleted: drop its state (a holder's token goes stale)."""
        log = self._logs.pop(session_id, None)
        if log is not None:
            log.gone = True
        self._sealed.discard(session_id)
