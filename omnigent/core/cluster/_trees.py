"""The session trees a cluster member holds: tenures counted, the lease given back.

:class:`HeldTrees` is the base of :class:`~._shared.SharedOwnership`: its local
bookkeeping, apart from claiming leases and the background tasks that keep them. It
knows which trees are held here and which sessions belong to each (so an actor can
start without a store read), counts the tenures (:class:`~._ownership.Tenure`) out
on each tree, releases a tree's lease row after the last one is given back (in a
task of the ownership's nursery, since ``Tenure.release`` is synchronous), and
forgets a tree — telling the runtime through its hooks — when it is let go or lost.

One :class:`_KeyedLocks` lock per root orders what changes a tree's lease: the
claim, the release after the last tenure and a takeover never interleave.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Protocol

import attrs
import trio

from ...stores import ClusterStore, Store
from ._ownership import Tenure

if TYPE_CHECKING:
    from ._shared import Hooks

__all__ = ["HeldTree", "HeldTrees", "SharedStore"]

# One log for the cluster member, whichever module of it writes.
log = logging.getLogger("omnigent.core.cluster")


class SharedStore(Store, ClusterStore, Protocol):
    """A store that is also a cluster store (PostgreSQL)."""


@attrs.define(eq=False)
class HeldTree:
    root_id: str
    since: float  # trio time of the claim: a renewal older than it may not list it
    refs: int = 0
    sessions: set[str] = attrs.field(factory=set)


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
    """The trees held here and their tenures (see the module docstring)."""

    hooks: Hooks  # set by SharedOwnership

    def __init__(self, store: SharedStore, nursery: trio.Nursery) -> None:
        self._store = store
        self._nursery = nursery
        self._trees: dict[str, HeldTree] = {}
        self._roots: dict[str, str] = {}  # session id -> root, for sessions of held trees
        self._locks = _KeyedLocks()
        self._letting_go: dict[str, trio.Event] = {}  # root -> set once its let-go ends

    def _take(self, session_id: str, root_id: str) -> Tenure | None:
        tree = self._trees.get(root_id)
        if tree is None:
            return None
        tree.refs += 1
        if session_id not in tree.sessions:
            tree.sessions.add(session_id)
            self._roots[session_id] = root_id
        return Tenure(root_id, self._release)

    async def _register(self, tree: HeldTree) -> None:
        """Know every session of a tree just claimed, so its work can start without a
        store read (a sub-agent's child included)."""
        for session_id in await self._store.descendant_ids(tree.root_id):
            if self._trees.get(tree.root_id) is tree and session_id not in tree.sessions:
                tree.sessions.add(session_id)
                self._roots[session_id] = tree.root_id

    def note(self, session_id: str, root_id: str) -> None:
        """A session was just created in ``root_id``'s tree: known if the tree is held."""
        tree = self._trees.get(root_id)
        if tree is not None:
            tree.sessions.add(session_id)
            self._roots[session_id] = root_id

    def retain(self, session_id: str) -> Tenure | None:
        root = self._roots.get(session_id)
        return None if root is None else self._take(session_id, root)

    def owns(self, session_id: str) -> bool:
        root = self._roots.get(session_id)
        return root is not None and root in self._trees

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
            async with self._locks(tree.root_id):
                if tree.refs or self._trees.get(tree.root_id) is not tree:
                    return
                self._forget(tree)
                try:
                    await self._store.release(tree.root_id)
                except Exception:
                    log.warning("could not release %s (it expires)", tree.root_id, exc_info=True)
        finally:
            if self._letting_go.get(tree.root_id) is done:
                del self._letting_go[tree.root_id]
            done.set()

    async def settled(self, root_id: str) -> None:
        """See :meth:`Ownership.settled`."""
        done = self._letting_go.get(root_id)
        if done is not None:
            await done.wait()

    def _forget(self, tree: HeldTree) -> None:
        del self._trees[tree.root_id]
        for session_id in tree.sessions:
            self._roots.pop(session_id, None)
        self.hooks.released(tree.sessions)

    def _lose(self, roots: set[str], why: str) -> None:
        sessions: set[str] = set()
        for root in roots:
            tree = self._trees.get(root)
            if tree is None:
                continue
            log.error("lost the lease of %s (%s): stopping its work", root, why)
            sessions |= tree.sessions
            self._forget(tree)
        if sessions:
            self.hooks.lost(sessions)
