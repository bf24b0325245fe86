"""Where each runner is connected, and where a runner-bound tree's work should run.

A runner (``docs/runners.md``) keeps one link to one server. The server's runner hub
knows its own links (:class:`RunnerLinks`); :class:`RunnerDirectory` adds the other
servers' when several share a PostgreSQL database: it publishes this server's links in
the store's ``runner_links`` rows (kept in step by :meth:`RunnerDirectory.run`, live
while this server's heartbeat is) and reads everyone's.

It is also the runtime's :class:`Placement`: a call that starts work on a session tree
nobody holds (a message) is taken by the server the session's runner is connected to,
so its turn runs where it can reach the runner. A call posted to another server is
forwarded there through the cluster's commands, as any call on live work is (see
:mod:`._routing`). With one process on its database, every runner is this process's.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Awaitable, Callable, Collection
from typing import Final, Protocol

import attrs
import trio

from ...stores import ClusterStore, RunnerLinkRow
from ._ownership import Elsewhere

__all__ = ["UNREAD", "Placement", "RunnerDirectory", "RunnerLink", "RunnerLinks", "Unread"]

log = logging.getLogger("omnigent.core.cluster")

_RETRY = 1.0


class RunnerLinks(Protocol):
    """What a server's runner hub tells the core about its own links."""

    @property
    def version(self) -> int:
        """A number that changes whenever :meth:`linked` does."""
        ...

    def linked(self) -> dict[str, float]:
        """The runners with a live link to this server, and when each connected."""
        ...

    async def wait_changed(self, since: int) -> None:
        """Return once :attr:`version` is not ``since`` any more."""
        ...

    def drop(self, runner_id: str, reason: str) -> None:
        """End this server's link of ``runner_id`` (another server has it)."""
        ...


class Unread(enum.Enum):
    """A value the caller has not read (:data:`UNREAD`)."""

    UNREAD = enum.auto()


#: The session's runner binding is not known to the caller: the placement reads it.
UNREAD: Final = Unread.UNREAD


class Placement(Protocol):
    """Where a call that starts work on a tree nobody holds should run."""

    async def elsewhere(
        self, session_id: str, root_id: str, runner_id: str | Unread | None = UNREAD
    ) -> Elsewhere | None:
        """The server that should take the tree instead of this one, or ``None``.

        ``runner_id``: the runner the session is bound to, if the caller has its row
        (a session's binding never changes); otherwise it is read.
        """
        ...

    async def claims_here(self, session_id: str) -> bool:
        """Whether this server should take the tree of a call forwarded to it."""
        ...


@attrs.frozen
class RunnerLink:
    """A runner connected to a server now: which (``here``: this one), since when.

    ``instance`` is that server's instance key (``None`` without a shared store).
    """

    runner_id: str
    server: str
    connected_at: float
    here: bool
    instance: str | None = None


class RunnerDirectory:
    """Where runners are connected (see the module docstring). Owned by the runtime.

    Args:
        links: this server's runner hub (``None``: a runtime that takes no runners).
        server: this server's name.
        store: the cluster half of a shared store (``None``: one process owns the
            database, and every runner is its own).
        runner_of: a session's runner (``None``: it runs on the server).
    """

    def __init__(
        self,
        *,
        links: RunnerLinks | None,
        server: str,
        store: ClusterStore | None,
        runner_of: Callable[[str], Awaitable[str | None]],
    ) -> None:
        self._links = links
        self._server = server
        self._store = store
        self._runner_of = runner_of

    @property
    def instance(self) -> str | None:
        return None if self._store is None else self._store.instance

    async def links(self) -> list[RunnerLink]:
        """Every runner connected now (to any server), by name."""
        if self._store is None:
            linked = self._links.linked() if self._links is not None else {}
            return [RunnerLink(r, self._server, at, True) for r, at in sorted(linked.items())]
        return [self._link(row) for row in await self._store.runner_links()]

    def _link(self, row: RunnerLinkRow) -> RunnerLink:
        here = row.instance == self.instance
        return RunnerLink(row.runner_id, row.server, row.connected_at, here, row.instance)

    async def where(self, runner_id: str) -> RunnerLink | None:
        """Where ``runner_id`` is connected now, or ``None``."""
        if self._links is not None and (at := self._links.linked().get(runner_id)) is not None:
            return RunnerLink(runner_id, self._server, at, True, self.instance)
        if self._store is None:
            return None
        for row in await self._store.runner_links():
            if row.runner_id == runner_id:
                return self._link(row)
        return None

    async def online(self, runner_ids: Collection[str]) -> dict[str, bool]:
        """Whether each runner is connected now (one lookup for them all)."""
        if not runner_ids:
            return {}
        connected = {link.runner_id for link in await self.links()}
        return {runner_id: runner_id in connected for runner_id in runner_ids}

    # -- Placement -------------------------------------------------------------------------

    async def elsewhere(
        self, session_id: str, root_id: str, runner_id: str | Unread | None = UNREAD
    ) -> Elsewhere | None:
        if self._store is None:
            return None
        if runner_id is UNREAD:
            runner_id = await self._runner_of(session_id)
        if runner_id is None:
            return None
        link = await self.where(runner_id)
        if link is None or link.here or link.instance is None:
            return None
        return Elsewhere(session_id, root_id, link.instance, link.server)

    async def claims_here(self, session_id: str) -> bool:
        if self._store is None:
            return True
        runner_id = await self._runner_of(session_id)
        if runner_id is None:
            return False
        link = await self.where(runner_id)
        return link is not None and link.here

    # -- keeping the store's rows in step ------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Publish this server's runner links in the store for as long as it runs.

        A runner another live server has already is dropped here (its newcomer loses).
        A store that fails is tried again a second later. Returns at once without a
        shared store or a hub.

        Cancellation: stops publishing (the rows go with this server's heartbeat, or at
        once with a clean shutdown).
        """
        task_status.started()
        store, links = self._store, self._links
        if store is None or links is None:
            return
        published: dict[str, float] = {}
        while True:
            version, current = links.version, links.linked()
            try:
                for runner_id in sorted(set(published) - set(current)):
                    await store.unlink_runner(runner_id)
                    del published[runner_id]
                for runner_id, at in sorted(current.items()):
                    if published.get(runner_id) == at:
                        continue
                    holder = await store.link_runner(runner_id, self._server, at)
                    if holder is None:
                        published[runner_id] = at
                    else:
                        links.drop(runner_id, f"it is connected to server {holder!r}")
            except Exception:
                log.warning(
                    "could not record the runners' links; again in %s s", _RETRY, exc_info=True
                )
                await trio.sleep(_RETRY)
                continue
            await links.wait_changed(version)
