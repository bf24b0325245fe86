"""The session trees a cluster member holds: tenures counted, the lease given back.

:class:`HeldTrees` is the local bookkeeping of a :class:`~._shared.SharedOwnership`,
apart from claiming leases and the background tasks that keep them: which trees are
held here and which sessions belong to each (so an actor can start without a store
read), how many tenures (:class:`~.._ownership.Tenure`) are out on each, the release of a
tree's lease row after the last one is given back (in a task of the ownership's
nursery, since ``Tenure.release`` is synchronous; in one statement with every release
then waiting), and forgetting a tree — telling its owner through the callbacks it was
made with — when it is let go or lost. A claim's reading of each session's newest
stored event id is kept with its tree until the bus takes it.

One lock per root (:meth:`HeldTrees.lock`) orders what changes a tree's lease: the
claim, the release after the last tenure and a takeover never interleave.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Collection, Iterable
from contextlib import asynccontextmanager
from typing import Protocol

import attrs
import trio

from ...._grouped import Grouped
from ....stores import ClusterStore, Store
from .._ownership import Tenure

__all__ = ["HeldTree", "HeldTrees", "SharedStore"]

# One log for the cluster member, whichever module of it writes.
log = logging.getLogger("omnigent.core.cluster")


class SharedStore(Store, ClusterStore, Protocol):
    """A store that is also a cluster store (PostgreSQL)."""


@attrs.define(eq=False)
class HeldTree:
    """One tree held here: since when, how many tenures are out, its sessions."""

    root_id: str
    since: float  # trio time of the claim: a renewal older than it may not list it
    refs: int = 0
    sessions: set[str] = attrs.field(factory=set)
    # Each session's newest stored event id as the claim read it, until the bus takes
    # it (:meth:`HeldTrees.claimed_head`).
    heads: dict[str, int] = attrs.field(factory=dict)


class _KeyedLocks:
    """One ``trio.Lock`` per key, kept only while someone holds or waits for it."""

    def __init__(self) -> None:
        self._locks: dict[str, tuple[trio.Lock, list[int]]] = {}

    @asynccontextmanager
    async def __call__(self, key: str) -> AsyncIterator[None]:
        lock, users = self._locks.setdefault(key, (trio.Lock(), [0]))
        users[0] += 1
        try:
            async with lock:
                yield
        finally:
            users[0] -= 1
            if not users[0]:
                del self._locks[key]


class HeldTrees:
    """The trees held here and their tenures (see the module docstring).

    Args:
        store: where a tree's sessions are read, and its lease released.
        nursery: where a let-go runs (the ownership's).
        released: told the sessions of a tree forgotten here (let go, or lost).
        lost: told the sessions of a tree lost (after ``released``): stop their work.
    """

    def __init__(
        self,
        store: SharedStore,
        nursery: trio.Nursery,
        *,
        released: Callable[[set[str]], None],
        lost: Callable[[set[str]], None],
    ) -> None:
        self._store = store
        self._nursery = nursery
        self._released = released
        self._lost = lost
        self._trees: dict[str, HeldTree] = {}
        self._roots: dict[str, str] = {}  # session id -> root, for sessions of held trees
        self._letting_go: dict[str, trio.Event] = {}  # root -> set once its let-go ends
        self._releases: Grouped[str, None] = Grouped(self._release_leases)
        self.lock = _KeyedLocks()

    def __contains__(self, root_id: str) -> bool:
        return root_id in self._trees

    def roots(self) -> set[str]:
        """The roots of every tree held here."""
        return set(self._trees)

    def hold(self, root_id: str, since: float) -> HeldTree:
        """Hold a tree whose lease was just claimed (under :attr:`lock`)."""
        tree = self._trees[root_id] = HeldTree(root_id, since)
        return tree

    def take(self, session_id: str, root_id: str) -> Tenure | None:
        """Another tenure on ``root_id``'s tree if it is held here, else ``None``."""
        tree = self._trees.get(root_id)
        if tree is None:
            return None
        tree.refs += 1
        if session_id not in tree.sessions:
            tree.sessions.add(session_id)
            self._roots[session_id] = root_id
        return Tenure(root_id, self._release)

    async def register(self, tree: HeldTree) -> None:
        """Know every session of a tree just claimed, so its work can start without a
        store read (a sub-agent's child included)."""
        self.register_sessions(tree, await self._store.descendant_ids(tree.root_id))

    def register_sessions(
        self, tree: HeldTree, session_ids: Iterable[str], heads: Iterable[tuple[str, int]] = ()
    ) -> None:
        """Know these sessions of a tree just claimed, and their newest stored event ids
        (its claim read them)."""
        for session_id in session_ids:
            self.note(session_id, tree.root_id, tree)
        tree.heads.update(heads)

    def claimed_head(self, session_id: str) -> int | None:
        """The session's newest stored event id as its tree's claim read it — once:
        taken, it is gone (the bus counts from it; after the bus has let the counter go,
        events may have followed it). ``None``: taken already, or not read."""
        tree = self._trees.get(self._roots.get(session_id, ""))
        return None if tree is None else tree.heads.pop(session_id, None)

    def note(self, session_id: str, root_id: str, tree: HeldTree | None = None) -> bool:
        """A session of ``root_id``'s tree: known here if the tree is held (``tree``:
        the very tree it must be). Whether it was."""
        held = self._trees.get(root_id)
        if held is None or (tree is not None and held is not tree):
            return False
        held.sessions.add(session_id)
        self._roots[session_id] = root_id
        return True

    def retain(self, session_id: str) -> Tenure | None:
        root = self._roots.get(session_id)
        return None if root is None else self.take(session_id, root)

    def owns(self, session_id: str) -> bool:
        root = self._roots.get(session_id)
        return root is not None and root in self._trees

    def roots_of(self, session_ids: Iterable[str]) -> set[str]:
        """The roots of the held trees these sessions belong to."""
        return {self._roots[s] for s in session_ids if s in self._roots}

    def _release(self, tenure: Tenure) -> None:
        tree = self._trees.get(tenure.root_id)
        if tree is None:
            return  # lost meanwhile
        tree.refs -= 1
        if tree.refs == 0:
            done = self._letting_go.setdefault(tree.root_id, trio.Event())
            self._nursery.start_soon(self._let_go, tree, done)

    async def _let_go(self, tree: HeldTree, done: trio.Event) -> None:
        try:
            async with self.lock(tree.root_id):
                if tree.refs or self._trees.get(tree.root_id) is not tree:
                    return
                self._forget(tree)
                try:
                    await self._releases(tree.root_id)
                except Exception:
                    log.warning("could not release %s (it expires)", tree.root_id, exc_info=True)
        finally:
            if self._letting_go.get(tree.root_id) is done:
                del self._letting_go[tree.root_id]
            done.set()

    async def _release_leases(self, root_ids: Collection[str]) -> dict[str, None]:
        """Release these trees' lease rows: one statement for every let-go waiting
        (:class:`~omnigent._grouped.Grouped`; issue 32: 200 turns ending together sent 200)."""
        await self._store.release(*root_ids)
        return dict.fromkeys(root_ids)

    async def settled(self, root_id: str) -> None:
        """See :meth:`~.._ownership.Ownership.settled`."""
        done = self._letting_go.get(root_id)
        if done is not None:
            await done.wait()

    def _forget(self, tree: HeldTree) -> None:
        del self._trees[tree.root_id]
        for session_id in tree.sessions:
            self._roots.pop(session_id, None)
        self._released(tree.sessions)

    def lose(self, roots: set[str], why: str) -> None:
        """These trees are not ours any more: forget them, and stop their work."""
        sessions: set[str] = set()
        for root in roots:
            tree = self._trees.get(root)
            if tree is None:
                continue
            log.error("lost the lease of %s (%s): stopping its work", root, why)
            sessions |= tree.sessions
            self._forget(tree)
        if sessions:
            self._lost(sessions)

    def expired(self, renewed: set[str], started: float) -> set[str]:
        """Roots held here since before ``started`` that a renewal then did not list."""
        return {r for r, t in self._trees.items() if r not in renewed and t.since < started}
