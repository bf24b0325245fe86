"""What a store shared by several servers offers them: liveness, leases, commands.

A store whose database several omnigent servers share (PostgreSQL) also implements
:class:`ClusterStore`; the core's shared-cluster ownership (``omnigent.core``) is
written against this protocol only, as the rest of the core is against ``Store``. A
store one process owns (SQLite) does not implement it: that process owns everything.

* **Servers** register under a name with a heartbeat; a server whose heartbeat
  expired is dead.
* **Leases**: one row per session *tree* (keyed by the root session id) names the
  server instance that runs the tree's live work, until when. The holder renews its
  leases with its heartbeat; an expired lease may be taken over, and whoever takes one
  over recovers what the dead holder left (``taken_from``). Event writes are fenced by
  leases (:class:`LeaseLost`).
* **Commands** are rows addressed to a server instance (a message to enqueue, an
  interrupt, an answer); posting one notifies the target. Replies are commands too.
* **Runner links**: which server a runner (``docs/runners.md``) is connected to now,
  one row per runner name, live while its server's heartbeat is.
* **Notifications** (:meth:`ClusterStore.open_listener`): new events of a session
  (``session:last_id:instance``) and new commands for an instance, pushed by the
  database on commit.

All times that servers compare are the database's clock.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Protocol

import attrs
import trio

__all__ = [
    "COMMANDS_CHANNEL",
    "EVENTS_CHANNEL",
    "Claim",
    "ClusterStore",
    "CommandRow",
    "LeaseLost",
    "Notification",
    "RunnerLinkRow",
    "ServerRow",
]

#: The channel event notifications go out on (payload ``SESSION:LAST_ID:INSTANCE``).
EVENTS_CHANNEL = "omnigent_events"
#: The channel command notifications go out on (payload: the target instance).
COMMANDS_CHANNEL = "omnigent_commands"


class LeaseLost(Exception):
    """Events of sessions whose tree this instance does not hold were not written.

    Raised by ``append_events`` of a fenced store after writing the batch's other
    sessions: the refused sessions' events are not stored and must not be delivered.
    """

    def __init__(self, session_ids: Sequence[str]) -> None:
        super().__init__(f"this server does not own {', '.join(session_ids)}")
        self.session_ids = tuple(session_ids)


@attrs.frozen
class ServerRow:
    """A live server: its name, when it started, how many sessions its leases cover."""

    name: str
    instance: str
    host: str
    pid: int
    started_at: float
    sessions: int


@attrs.frozen
class Claim:
    """Who holds a tree's lease (after an attempt to take it).

    ``instance``/``server`` hold the lease of the tree rooted at ``root_id`` (this
    instance's own key if a claim succeeded; ``""`` if nobody does). ``taken_from``
    is the instance whose *expired* lease the claim took over — the tree needs
    recovering — and ``None`` otherwise. ``sessions``: after a successful
    :meth:`ClusterStore.claim`, every session below the root (parents first), read
    once the lease was this instance's — what the holder must know of its tree, in
    the claim's own call rather than one more (issue 32). ``heads``: then too, each
    session of the tree (its root too) with its newest stored event id — what the
    holder's event counters start from, read once the lease holds every other writer
    off (as :meth:`~omnigent.stores.Store.max_event_id` answers it).
    """

    root_id: str
    instance: str
    server: str
    taken_from: str | None = None
    sessions: tuple[str, ...] = ()
    heads: tuple[tuple[str, int], ...] = ()


@attrs.frozen
class RunnerLinkRow:
    """A runner connected to a live server: which one (instance and name), since when."""

    runner_id: str
    instance: str
    server: str
    connected_at: float


@attrs.frozen
class CommandRow:
    """A request addressed to one server instance (or a reply to one)."""

    id: str
    target: str
    sender: str
    session_id: str
    kind: str
    payload: str
    reply_to: str | None = None


@attrs.frozen
class Notification:
    """One notification, or ``channel=""`` after a (re)connection: some may be lost."""

    channel: str
    payload: str = ""


class ClusterStore(Protocol):
    """The cluster half of a shared store (see the module docstring)."""

    @property
    def instance(self) -> str | None:
        """This process's instance key (``None``: the store was opened without one)."""
        ...

    async def register_server(self, name: str, host: str, pid: int, ttl: float) -> float | None:
        """Register this instance as ``name``.

        Returns ``None`` once registered; while a live server holds the name, the
        seconds until its heartbeat expires (and nothing is changed).
        """
        ...

    async def heartbeat(self, ttl: float) -> set[str] | None:
        """Extend this server's heartbeat and its live leases by ``ttl`` seconds.

        Returns the roots whose leases are still held (an expired one is never
        extended: it is lost), or ``None`` if another instance took the name.
        """
        ...

    async def unregister_server(self) -> None:
        """Release every live lease of this instance and remove its server row."""
        ...

    async def live_servers(self) -> list[ServerRow]: ...

    async def link_runner(self, runner_id: str, server: str, connected_at: float) -> str | None:
        """Record that ``runner_id`` is connected to this instance (``server``).

        Returns ``None`` once recorded; the name of the live server that has it
        connected already otherwise (and nothing is changed).
        """
        ...

    async def unlink_runner(self, runner_id: str) -> None:
        """Forget this instance's link of ``runner_id`` (no other's)."""
        ...

    async def runner_links(self) -> list[RunnerLinkRow]:
        """Every runner connected to a live server, by name."""
        ...

    async def claim(self, root_id: str, ttl: float) -> Claim:
        """Take the tree's lease if it is free, expired, or already this instance's
        (and then read the sessions below its root: ``Claim.sessions``)."""
        ...

    async def claim_all(self, root_ids: Collection[str], ttl: float) -> dict[str, Claim]:
        """:meth:`claim` for several trees in one call (a group of claims), each root's
        answer under its id."""
        ...

    async def release(self, *root_ids: str) -> None:
        """Give up live leases of this instance, in one statement (an expired one stays,
        to be recovered)."""
        ...

    async def lease_holder(self, root_id: str) -> Claim | None:
        """Who holds the tree's live lease, if anyone."""
        ...

    async def claim_expired(self, ttl: float, limit: int) -> list[Claim]:
        """Take over up to ``limit`` expired leases (``Claim.taken_from`` set)."""
        ...

    async def orphaned_roots(self, limit: int, min_age: float = 0.0) -> list[str]:
        """Trees with unfinished work in the store but no lease row at all.

        Unfinished: a session whose last status is launching, running or waiting, or
        (stored more than ``min_age`` seconds ago, so not one a live server is just
        handing over) a message no turn took, or a background task recorded running.
        """
        ...

    async def next_expiry(self) -> float | None:
        """Seconds until the first live lease of another instance expires."""
        ...

    async def post_command(self, command: CommandRow) -> None:
        """Store a command and notify its target (on commit)."""
        ...

    async def take_commands(self, limit: int) -> list[CommandRow]:
        """Remove and return up to ``limit`` commands for this instance, oldest first."""
        ...

    async def collect_garbage(self, max_age: float) -> None:
        """Forget servers dead for ``max_age`` seconds and commands no live server takes."""
        ...

    def open_listener(
        self, channels: Sequence[str]
    ) -> AbstractAsyncContextManager[trio.MemoryReceiveChannel[Notification]]:
        """Notifications on ``channels``, across reconnections, while the block runs."""
        ...
