"""The sessions feed: which sessions changed, across every session, for many watchers.

A client that shows *all* of its sessions live (the web console's Sessions view) cannot
hold one event stream per session (a browser opens at most six HTTP/1.1 connections to
a host). :class:`SessionChanges` is the runtime's one notice board of sessions that
changed — created, a new status, a pending elicitation asked or answered, a terminal
opened or closed, a title or labels changed, deleted — and :class:`SessionWatch` is one
watcher's view of it: first every session the viewer may read (a *snapshot*), then, as
sessions change, their current snapshot (or their deletion).

The feed carries **state, not events**: a watcher is told *that* a session changed and
reads its snapshot when it gets to it, so however often a session changes while a
watcher is busy, the watcher reads it once (changes are coalesced per session) and the
last thing it shows is the session as it is now. Nothing is lost between the snapshot
and the tail: a watch collects changes from the moment it opens, before the snapshot
is read.

Sharing: a watch reads each session as its viewer may see it (the snapshot of a
session the viewer may not read is never sent), and tells a deletion only of a session
it has shown (so the id of someone else's session is never told). A session that
becomes unreadable to the viewer (a grant revoked) is told as deleted. A change of
grants makes every watch take a fresh snapshot (grants inherit down a tree: a grant
makes a whole subtree readable at once).

Where notices come from: the event bus, for each stored batch (:meth:`SessionChanges.events`:
``session.status``, elicitation requests and answers, resources, and the child a
``session.child_session.updated`` names), and the runtime's record calls (a session
created, updated, deleted; grants changed). With several servers on one database, a
server's feed carries the changes made through it and the events it relays (sessions
its clients follow); changes made through another server to a session nobody here
follows are seen on the next snapshot (a reconnect).

Resource handling: each watch's pending set is bounded (:data:`PENDING_LIMIT`); one
that overflows drops it and takes a fresh snapshot instead. A watch is registered only
while its ``listen`` block is open; the notice board keeps nothing per session.
"""

from __future__ import annotations

import enum
from collections import deque
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any, Final, Protocol

import attrs
import trio

from ...errors import InvalidInput
from ...model import ChildSessionUpdated, Event, SessionPage, SessionSnapshot

__all__ = [
    "PENDING_LIMIT",
    "SNAPSHOT_PAGE",
    "ChangeKind",
    "SessionChange",
    "SessionChanges",
    "SessionReads",
    "SessionWatch",
]

PENDING_LIMIT: Final = 4096
"""Sessions one watch may have waiting to be read before it takes a fresh snapshot."""
SNAPSHOT_PAGE: Final = 100
"""Sessions read per page of a snapshot."""

# The events that change what a session's snapshot shows (its status, its pending
# elicitations, its resources). Deltas and items do not: they are the session's own
# stream's business.
_SNAPSHOT_EVENTS: Final = frozenset(
    {
        "session.status",
        "response.elicitation_request",
        "response.elicitation_resolved",
        "session.resource.created",
        "session.resource.deleted",
    }
)


class ChangeKind(enum.Enum):
    """What one entry of a watch says. The values are the wire's frame types."""

    SNAPSHOT = "feed.snapshot"
    """A snapshot begins: every readable session follows, then :attr:`SYNCED`."""
    UPDATED = "session.updated"
    """A session as it is now (created or changed)."""
    SYNCED = "feed.synced"
    """The snapshot is complete: a client drops the sessions it did not get since
    :attr:`SNAPSHOT`; what follows are changes."""
    DELETED = "session.deleted"
    """A session shown before is gone (deleted, or no longer readable)."""


@attrs.frozen
class SessionChange:
    """One entry of a :class:`SessionWatch`."""

    kind: ChangeKind
    session: SessionSnapshot | None = None
    session_id: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The wire form: ``{"type": …}`` with ``session`` or ``session_id``."""
        out: dict[str, Any] = {"type": self.kind.value}
        if self.session is not None:
            out["session"] = self.session.to_dict()
        if self.session_id is not None:
            out["session_id"] = self.session_id
        return out


class _Pending:
    """One watch's sessions waiting to be read, and its wake-up.

    Each entry is ``(notice number, deleted)``: a watch that read a session while a
    newer notice came keeps it pending (what it read may predate that change).
    """

    def __init__(self) -> None:
        self.sessions: dict[str, tuple[int, bool]] = {}
        self.resync = True  # a new watch starts with a snapshot
        self.wake = trio.Event()
        self._count = 0

    def add(self, session_id: str, deleted: bool) -> None:
        known = self.sessions.get(session_id)
        if known is None and len(self.sessions) >= PENDING_LIMIT:
            self.sessions.clear()  # too many to read one by one: read them all
            self.resync = True
        else:
            self._count += 1
            self.sessions[session_id] = (self._count, deleted or (known is not None and known[1]))
        self.wake.set()

    def refresh(self) -> None:
        self.resync = True
        self.wake.set()


class SessionChanges:
    """The runtime's notice board of changed sessions. Every method is synchronous and
    cheap when nobody watches (the bus calls :meth:`events` for every stored batch)."""

    def __init__(self) -> None:
        self._watchers: set[_Pending] = set()

    def watching(self) -> int:
        """How many watches are open."""
        return len(self._watchers)

    def touched(self, session_ids: Iterable[str], *, deleted: bool = False) -> None:
        """Note that these sessions were created or changed (or ``deleted``)."""
        if not self._watchers:
            return
        for session_id in session_ids:
            for pending in self._watchers:
                pending.add(session_id, deleted)

    def events(self, session_id: str, events: tuple[Event, ...]) -> None:
        """Note the sessions a stored batch of ``session_id``'s events changed."""
        if not self._watchers:
            return
        changed: set[str] = set()
        for event in events:
            if event.type in _SNAPSHOT_EVENTS:
                changed.add(session_id)
            elif isinstance(event, ChildSessionUpdated):
                changed.add(event.child.id)  # a child created or changed
        if changed:
            self.touched(changed)

    def grants_changed(self) -> None:
        """Who may read what changed: every watch takes a fresh snapshot."""
        for pending in self._watchers:
            pending.refresh()

    @contextmanager
    def listen(self) -> Iterator[_Pending]:
        """Collect notices for one watch while the block is open."""
        pending = _Pending()
        self._watchers.add(pending)
        try:
            yield pending
        finally:
            self._watchers.discard(pending)


class SessionReads(Protocol):
    """How a watch reads sessions, as its viewer may see them."""

    async def page(self, after: str | None, limit: int) -> SessionPage:
        """Readable sessions, newest first, after ``after`` (a session id).

        Raises:
            InvalidInput: ``after`` names no readable session any more.
        """
        ...

    async def read(self, session_id: str) -> SessionSnapshot | None:
        """The session's snapshot, or ``None`` when it is gone or not readable."""
        ...


class SessionWatch:
    """One watcher's feed: a snapshot of every readable session, then the changes.

    Made by :meth:`~omnigent.Runtime.watch_sessions`. Iterate it (``async for change
    in watch``) or pull it with :meth:`next`; it never ends by itself.

    Cancellation: safe — :meth:`next` takes nothing off its queues until what it
    read is in hand, so a cancelled call loses nothing and the next one resumes.
    """

    def __init__(self, pending: _Pending, reads: SessionReads) -> None:
        self._pending = pending
        self._reads = reads
        self._ready: deque[SessionChange] = deque()
        self._shown: set[str] = set()  # ids sent since the last snapshot began
        self._cursor: str | None = None  # the snapshot's place while one is read
        self._snapshotting = False

    def __aiter__(self) -> SessionWatch:
        return self

    async def __anext__(self) -> SessionChange:
        change = await self.next(wait=True)
        assert change is not None
        return change

    async def next(self, *, wait: bool) -> SessionChange | None:
        """The next change; ``wait=False``: ``None`` unless one is at hand.

        "At hand" includes reading the next snapshot page or changed session from
        the store: what waits is only the wait for a new notice.
        """
        while not self._ready:
            if self._pending.resync:
                self._begin_snapshot()
            elif self._snapshotting:
                await self._read_page()
            elif self._pending.sessions:
                await self._read_changed()
            elif not wait:
                return None
            else:
                await self._pending.wake.wait()
                if not (self._pending.sessions or self._pending.resync):
                    self._pending.wake = trio.Event()
        return self._ready.popleft()

    def _begin_snapshot(self) -> None:
        self._pending.resync = False
        self._snapshotting = True
        self._cursor = None
        self._shown = set()  # the client forgets what the snapshot does not resend
        self._ready.append(SessionChange(ChangeKind.SNAPSHOT))

    async def _read_page(self) -> None:
        try:
            page = await self._reads.page(self._cursor, SNAPSHOT_PAGE)
        except InvalidInput:
            # The session the page would continue after was deleted (or hidden)
            # meanwhile: start again; what was sent is sent again, harmlessly.
            self._cursor = None
            return
        for snapshot in page.data:
            self._ready.append(SessionChange(ChangeKind.UPDATED, snapshot))
            self._shown.add(snapshot.id)
            self._pending.sessions.pop(snapshot.id, None)  # it is as it is now
        if page.data:
            self._cursor = page.data[-1].id
        if not page.has_more:
            self._snapshotting = False
            self._ready.append(SessionChange(ChangeKind.SYNCED))

    async def _read_changed(self) -> None:
        session_id, notice = next(iter(self._pending.sessions.items()))
        snapshot = None if notice[1] else await self._reads.read(session_id)
        if self._pending.sessions.get(session_id) == notice:
            del self._pending.sessions[session_id]  # no newer notice came meanwhile
        else:
            newer = self._pending.sessions.pop(session_id, notice)  # read it again, last
            self._pending.add(session_id, newer[1])
        if snapshot is not None:
            self._shown.add(session_id)
            self._ready.append(SessionChange(ChangeKind.UPDATED, snapshot))
        elif session_id in self._shown:
            self._shown.discard(session_id)
            self._ready.append(SessionChange(ChangeKind.DELETED, session_id=session_id))
