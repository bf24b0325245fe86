"""Ownership: which process runs a session's live work, and how to reach it.

The core is written against :class:`Ownership`, a small seam with two
implementations:

* :class:`SoloOwnership` — one process owns its database (SQLite, or memory): it
  owns every session, always. Every call is trivial and nothing is ever forwarded.
* :class:`~.shared.SharedOwnership` — several servers share one database
  (PostgreSQL): a session *tree* (a root session and its descendants) runs on exactly
  one server at a time, under a lease row in the database.

Why a tree and not each session: a session's work publishes on its ancestors
(elicitations are mirrored up, a child's state is announced to its parent) and a
parent's turn drives its children. With one owner per tree all of that stays inside
one process, and only two things ever cross servers: requests posted to a server that
does not own the tree (forwarded to the owner, :meth:`Ownership.forward`), and events
read by subscribers on other servers (fanned out through the database).

The runtime routes every call that touches live work the same way (the
:class:`~._routing.Router` does it, for typed calls, :class:`~._calls.Call`)::

    try:
        tenure = await ownership.enter(session_id, root_id)   # may claim the lease
    except Elsewhere as where:
        return await ownership.forward(where, Interrupt())    # the holder runs it
    ...                                                       # run it here
    tenure.release()

A :class:`Tenure` is a reference on the local hold of a tree: the lease is kept
while any tenure is out (an actor keeps one for its life, the bus one while a
session's events are on their way to the store) and given up when the last is
released.
"""

from __future__ import annotations

import os
import socket
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import attrs

if TYPE_CHECKING:
    from ._calls import Call

__all__ = [
    "DEFAULT_LEASE_TTL",
    "Elsewhere",
    "Moved",
    "Ownership",
    "SoloOwnership",
    "Tenure",
    "default_server_name",
]


T = TypeVar("T")

DEFAULT_LEASE_TTL = 10.0
"""Seconds a lease lasts unrenewed when servers share a database (``open_runtime(lease_ttl=)``)."""


def default_server_name() -> str:
    """``HOST:PID``: what ``serve`` calls itself without ``--server-id``."""
    return f"{socket.gethostname()}:{os.getpid()}"


class Elsewhere(Exception):
    """The session's tree is held by another server (raised by :meth:`Ownership.enter`)."""

    def __init__(self, session_id: str, root_id: str, instance: str, server: str) -> None:
        super().__init__(f"session {session_id} runs on {server}")
        self.session_id = session_id
        self.root_id = root_id
        self.instance = instance
        self.server = server


class Moved(Exception):
    """The owner a request was forwarded to does not own the tree (any more): re-place it."""


@attrs.define(eq=False)
class Tenure:
    """One reference on this process's hold of a session tree; release it once."""

    root_id: str
    _release: Any = None  # the owner's release callback (None: nothing to do)
    released: bool = False

    def release(self) -> None:
        """Give the reference back (idempotent); the last one lets the lease go."""
        if self.released:
            return
        self.released = True
        if self._release is not None:
            self._release(self)


class Ownership(Protocol):
    """Where sessions' live work runs (see the module docstring)."""

    @property
    def server_name(self) -> str:
        """This server's name (``serve --server-id``), as ``GET /v1/servers`` lists it."""
        ...

    @property
    def shared(self) -> bool:
        """Whether other servers share the database."""
        ...

    async def enter(self, session_id: str, root_id: str, *, claim: bool = True) -> Tenure | None:
        """Hold the session's tree here, for as long as the returned tenure is out.

        Args:
            claim: take the lease when nobody holds it (a message starts work here);
                with ``False`` a free tree gives ``None`` (nothing runs anywhere).

        Raises:
            Elsewhere: another server holds the tree.
        """
        ...

    def retain(self, session_id: str) -> Tenure | None:
        """Another tenure on the session's tree if it is held here right now, else ``None``."""
        ...

    def note(self, session_id: str, root_id: str) -> None:
        """A session was just created in the tree rooted at ``root_id``."""
        ...

    async def admit(self, session_id: str) -> bool:
        """Whether this process may publish on the session now (its tree is held here)."""
        ...

    def owns(self, session_id: str) -> bool:
        """Whether the session is known to be held here (no store read; may say False
        for a session of a held tree never looked up)."""
        ...

    def claimed_head(self, session_id: str) -> int | None:
        """The session's newest stored event id, if the claim of its tree held here
        read it and nobody took it yet: the bus's counter starts from it without a
        store read. Taken once (``None`` after; ``None`` when nothing was claimed)."""
        ...

    async def forward(self, where: Elsewhere, call: Call[Any, T]) -> T:
        """Run ``call`` on the owner ``where`` names; returns its answer.

        The call's class bounds the wait for the answer (``Call.timeout``; ``None``:
        as long as the owner lives — a call that waits on a person).

        Raises:
            Moved: the owner no longer holds the tree (the caller places it again).
            OwnerUnavailable: the owner did not answer in time.
            OmnigentError: whatever the owner's call raised, as itself.

        Cancellation: the owner is told to cancel its call too.
        """
        ...

    async def settled(self, root_id: str) -> None:
        """Return once a let-go of ``root_id``'s tree begun here (its last tenure was
        released) has given the lease back, so another server may take it at once."""
        ...

    def lost(self, session_ids: tuple[str, ...]) -> None:
        """The store refused writes for these sessions: their trees are not ours any more."""
        ...

    def close(self) -> None:
        """The runtime is shutting down: take no tree any more (calls go elsewhere)."""
        ...


class SoloOwnership:
    """This process owns everything (SQLite, memory): no leases, nothing forwarded."""

    shared = False

    def __init__(self, server_name: str = "local") -> None:
        self.server_name = server_name

    async def enter(self, session_id: str, root_id: str, *, claim: bool = True) -> Tenure | None:
        return Tenure(root_id)

    def retain(self, session_id: str) -> Tenure | None:
        return Tenure(session_id)

    def note(self, session_id: str, root_id: str) -> None:
        return None

    async def admit(self, session_id: str) -> bool:
        return True

    def owns(self, session_id: str) -> bool:
        return True

    def claimed_head(self, session_id: str) -> int | None:
        return None

    async def forward(self, where: Elsewhere, call: Call[Any, T]) -> T:
        raise AssertionError("a process that owns its database forwards nothing")

    async def settled(self, root_id: str) -> None:
        return None

    def lost(self, session_ids: tuple[str, ...]) -> None:
        return None

    def close(self) -> None:
        return None
