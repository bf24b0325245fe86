"""Shared ownership: several servers on one database, each session tree on one of them.

:class:`SharedOwnership` implements :class:`~.._ownership.Ownership` over a
:class:`~omnigent.stores.ClusterStore`. A tree is held here while any
:class:`~.._ownership.Tenure` on it is out; the lease row is claimed on the first and
released after the last. It is composed of parts with one job each, made in its
constructor: :class:`~._trees.HeldTrees` (which trees are held here, their tenures, the
let-go after the last) and :class:`~._command_rows.CommandChannel` (calls forwarded to
other servers, and theirs run here); this module claims and takes over leases, keeps
them, and runs the background tasks, all in the nursery of
:func:`open_shared_ownership`:

* **renewer** — every ``ttl / 3`` extends the heartbeat and every live lease in one
  statement. A tree whose lease is gone is *lost*: the runtime stops its work (events
  it still publishes are refused by the store's fencing). If renewals keep failing for
  ``ttl``, every tree is given up locally, since another server may hold it by now.
* **listener** — LISTEN for commands addressed here and for other servers' events
  (handed to the runtime's remote feed).
* **janitor** — at the first expiry of another server's lease (or every ``ttl / 2``)
  takes over expired leases, and trees with unfinished work and no lease at all, and
  has the runtime recover each (running turns end ``failed`` with
  ``runtime_restarted``, as a restart does).
* **commands** — runs the calls other servers forward here and takes the replies to
  the calls this server forwarded (:mod:`._command_rows`).

The runtime and the ownership need each other: the runtime is built on the
ownership, and the ownership calls the runtime back — a tree let go or lost, a tree
taken over to recover, a call from another server, events another server wrote.
:meth:`SharedOwnership.join` is that one seam: the runtime hands over a
:class:`Member` once it is built, and only then do the janitor and the command runner
start (before it, no tree can be held and no call served).

Resource handling: every task lives in the block of :func:`open_shared_ownership`;
leaving it releases this server's leases and removes its server row (bounded).
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import AsyncIterator, Awaitable, Callable, Collection
from contextlib import asynccontextmanager
from typing import Any, TypeVar

import attrs
import trio

from ...._grouped import Grouped
from ....errors import Conflict
from ....stores import (
    COMMANDS_CHANNEL,
    EVENTS_CHANNEL,
    Claim,
    ServerRow,
)
from .._calls import Call, CallWire
from .._ownership import DEFAULT_LEASE_TTL, Elsewhere, Moved, Tenure, default_server_name
from ._command_rows import CommandChannel
from ._trees import HeldTree, HeldTrees, SharedStore

__all__ = [
    "Member",
    "SharedOwnership",
    "SharedStore",
    "open_shared_ownership",
]

log = logging.getLogger(__name__)

_GC_EVERY = 300.0
_GC_AGE = 3600.0

T = TypeVar("T")


@attrs.frozen
class Member:
    """What a runtime does for the cluster it joins (:meth:`SharedOwnership.join`)."""

    serve: Callable[[Call[Any, Any], str, str], Awaitable[Any]]
    """Run a call another server forwarded: ``(call, session_id, root_id)``; raises
    ``Moved`` if the tree is not held here."""
    recover: Callable[[str], Awaitable[None]]
    """Recover a tree taken over from a dead server (its sessions' unfinished work)."""
    lost: Callable[[set[str]], None]
    """Stop the work of sessions whose trees were lost."""
    released: Callable[[set[str]], None]
    """Forget what is cached for sessions whose trees are no longer held here."""
    events: Callable[[str], None]
    """Another server wrote events: ``session:last_id:instance``, or "" to re-read all."""


class SharedOwnership:
    """Ownership of session trees under leases (see the module docstring).

    Made by :func:`open_shared_ownership`.
    """

    shared = True

    def __init__(
        self, store: SharedStore, name: str, nursery: trio.Nursery, ttl: float, wire: CallWire
    ) -> None:
        assert store.instance is not None
        self.instance = store.instance
        self.server_name = name
        self.ttl = ttl
        self.closing = False
        self._store = store
        self._nursery = nursery
        self._member: Member | None = None  # the runtime, once it joined
        self._trees = HeldTrees(store, nursery, released=self._released, lost=self._lost)
        # Claims waiting while one is sent go together (issue 32: a burst of turns).
        self._claims: Grouped[str, Claim] = Grouped(self._claim_all)
        self._commands = CommandChannel(
            store, self.instance, nursery, ttl, wire, serve=self._serve, closing=self._closing
        )
        self._last_renewal = trio.current_time()

    # -- Ownership ---------------------------------------------------------------------

    async def enter(self, session_id: str, root_id: str, *, claim: bool = True) -> Tenure | None:
        """See :meth:`Ownership.enter`; a takeover of an expired lease recovers first."""
        tenure = self._trees.take(session_id, root_id)
        if tenure is not None:
            return tenure
        async with self._trees.lock(root_id):
            tenure = self._trees.take(session_id, root_id)
            if tenure is not None:
                return tenure
            if not claim:
                holder = await self._store.lease_holder(root_id)
                if holder is None:
                    return None
                if holder.instance != self.instance:
                    raise Elsewhere(session_id, root_id, holder.instance, holder.server)
            if self.closing or self._member is None:
                raise Moved()
            since = trio.current_time()
            result = await self._claims(root_id)
            if result.instance == "":  # released between its two statements: once more
                result = await self._claims(root_id)
            if result.instance != self.instance:
                if not result.instance:
                    raise Moved()
                raise Elsewhere(session_id, root_id, result.instance, result.server)
            tree = self._trees.hold(root_id, since)
            tenure = self._trees.take(session_id, root_id)
            assert tenure is not None
            self._trees.register_sessions(tree, result.sessions, result.heads)  # the claim's
            if result.taken_from is not None:
                log.warning("took over %s from %s: recovering it", root_id, result.taken_from)
                await self._recover(tree)
            return tenure

    async def _claim_all(self, root_ids: Collection[str]) -> dict[str, Claim]:
        return await self._store.claim_all(root_ids, self.ttl)

    def retain(self, session_id: str) -> Tenure | None:
        return self._trees.retain(session_id)

    def note(self, session_id: str, root_id: str) -> None:
        """A session was just created in ``root_id``'s tree: known if the tree is held."""
        self._trees.note(session_id, root_id)

    def owns(self, session_id: str) -> bool:
        return self._trees.owns(session_id)

    def claimed_head(self, session_id: str) -> int | None:
        return self._trees.claimed_head(session_id)

    async def admit(self, session_id: str) -> bool:
        if self._trees.owns(session_id):
            return True
        row = await self._store.get_session(session_id)
        return row is not None and self._trees.note(session_id, row.root_session_id)

    async def settled(self, root_id: str) -> None:
        await self._trees.settled(root_id)

    def lost(self, session_ids: tuple[str, ...]) -> None:
        self._trees.lose(self._trees.roots_of(session_ids), "the store refused its events")

    def close(self) -> None:
        """Take no tree any more; forwarded calls are answered "moved"."""
        self.closing = True

    async def forward(self, where: Elsewhere, call: Call[Any, T]) -> T:
        """See :meth:`Ownership.forward`."""
        return await self._commands.forward(where, call)

    # -- the runtime's side --------------------------------------------------------------

    async def join(self, member: Member) -> None:
        """Start answering other servers and recovering dead ones' trees, for ``member``.

        Runs one recovery sweep before returning, as a restart of a lone process
        recovers before it serves.

        Raises:
            RuntimeError: a runtime joined already.
        """
        if self._member is not None:
            raise RuntimeError("a runtime joined this cluster member already")
        self._member = member
        await self._sweep()
        self._nursery.start_soon(self._commands.run)
        self._nursery.start_soon(self._janitor)

    def _released(self, sessions: set[str]) -> None:
        if self._member is not None:
            self._member.released(sessions)

    def _lost(self, sessions: set[str]) -> None:
        if self._member is not None:
            self._member.lost(sessions)

    async def _serve(self, call: Call[Any, Any], session_id: str, root_id: str) -> Any:
        if self._member is None:
            raise Moved()
        return await self._member.serve(call, session_id, root_id)

    def _closing(self) -> bool:
        return self.closing

    async def _recover(self, tree: HeldTree) -> None:
        if self._member is None:
            return
        try:
            await self._member.recover(tree.root_id)
        except Exception:
            log.exception("recovering %s failed", tree.root_id)

    # -- background ----------------------------------------------------------------------

    async def _listen(
        self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        async with self._store.open_listener([COMMANDS_CHANNEL, EVENTS_CHANNEL]) as notes:
            task_status.started()
            async for note in notes:
                if note.channel == COMMANDS_CHANNEL:
                    if note.payload == self.instance:
                        self._commands.wake()
                elif note.channel == EVENTS_CHANNEL:
                    if self._member is not None:
                        self._member.events(note.payload)
                else:  # reconnected: what was said meanwhile is lost
                    self._commands.wake()
                    if self._member is not None:
                        self._member.events("")

    async def _renewer(self) -> None:
        while True:
            await trio.sleep(self.ttl / 3)
            started = trio.current_time()
            answered, held = await self._renew()
            if not answered:
                if trio.current_time() - self._last_renewal > self.ttl * 0.8:
                    # Another server may hold these trees by now: stop their work here.
                    self._trees.lose(self._trees.roots(), "renewals failed for most of the lease")
                continue
            self._last_renewal = started
            if held is None:
                log.error("another process registered as %r: giving up", self.server_name)
                self._trees.lose(self._trees.roots(), "the server name was taken over")
                continue
            self._trees.lose(self._trees.expired(held, started), "its lease expired")

    async def _renew(self) -> tuple[bool, set[str] | None]:
        """``(answered, the roots still held)``; held is ``None`` if the name was taken."""
        try:
            with trio.move_on_after(self.ttl / 3):
                return True, await self._store.heartbeat(self.ttl)
        except Exception:
            log.warning("lease renewal failed", exc_info=True)
        return False, None

    async def _janitor(self) -> None:
        last_gc = trio.current_time()
        while True:
            wait = self.ttl / 2
            try:
                first = await self._store.next_expiry()
            except Exception:
                log.warning("could not read lease expiries", exc_info=True)
                first = None
            if first is not None:
                wait = min(wait, first + 0.05)
            await trio.sleep(wait)
            if self.closing:
                continue
            try:
                await self._sweep()
                if trio.current_time() - last_gc > _GC_EVERY:
                    last_gc = trio.current_time()
                    await self._store.collect_garbage(_GC_AGE)
            except Exception:
                log.warning("the recovery sweep failed", exc_info=True)

    async def _sweep(self) -> None:
        """Take over expired leases and orphaned trees, and recover each."""
        since = trio.current_time()
        for claim in await self._store.claim_expired(self.ttl, limit=32):
            log.warning("took over %s from %s: recovering it", claim.root_id, claim.taken_from)
            await self._adopt(claim.root_id, since, claimed=True)
        for root in await self._store.orphaned_roots(limit=32, min_age=self.ttl):
            await self._adopt(root, since, claimed=False)

    async def _adopt(self, root_id: str, since: float, *, claimed: bool) -> None:
        async with self._trees.lock(root_id):
            if root_id in self._trees:
                return
            if not claimed:
                result = await self._store.claim(root_id, self.ttl)
                if result.instance != self.instance:
                    return
                log.warning("adopting %s (unfinished work, no lease): recovering it", root_id)
            tree = self._trees.hold(root_id, since)
            tenure = self._trees.take(root_id, root_id)
            assert tenure is not None
            await self._trees.register(tree)
        try:
            await self._recover(tree)
        finally:
            tenure.release()

    async def servers(self) -> list[ServerRow]:
        """The live servers sharing the database (``GET /v1/servers``)."""
        return await self._store.live_servers()


@asynccontextmanager
async def open_shared_ownership(
    store: SharedStore,
    wire: CallWire,
    name: str | None = None,
    *,
    ttl: float = DEFAULT_LEASE_TTL,
) -> AsyncIterator[SharedOwnership]:
    """Join the servers sharing ``store`` as ``name`` while the block runs.

    ``wire`` carries the calls forwarded between servers. The runtime built on the
    ownership then joins it (:meth:`~SharedOwnership.join`).

    Waits (up to the lease time) for a previous process of the same name whose
    heartbeat has not expired yet — a restart after ``kill -9``.

    Raises:
        Conflict: a live server keeps the name.

    Resource handling: leaving the block stops every background task, releases the
    leases and removes the server row (shielded, bounded).
    """
    name = name or default_server_name()
    host, pid = socket.gethostname(), os.getpid()
    left = await store.register_server(name, host, pid, ttl)
    if left is not None and left <= ttl + 1:
        # A previous process of this name, killed before it could unregister.
        log.warning("waiting %.1f s for the previous %r to expire", left, name)
        await trio.sleep(left + 0.05)
        left = await store.register_server(name, host, pid, ttl)
    if left is not None:
        raise Conflict(f"another live server is registered as {name!r}; choose another --server-id")
    try:
        async with trio.open_nursery() as nursery:
            ownership = SharedOwnership(store, name, nursery, ttl, wire)
            await nursery.start(ownership._listen)
            nursery.start_soon(ownership._renewer)
            try:
                yield ownership
            finally:
                ownership.closing = True
                nursery.cancel_scope.cancel()
    finally:
        with trio.move_on_after(5, shield=True):
            try:
                await store.unregister_server()
            except Exception:
                log.warning("could not unregister %r (its rows expire)", name, exc_info=True)
