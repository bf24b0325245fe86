"""Routing: run a call that touches live work where the session's tree is held.

:class:`Router` is the one place the runtime asks the :class:`~._ownership.Ownership`
seam where to run something. :meth:`Router.call` holds the tree here (claiming its
lease if free, when the call starts work) and runs the local half, or forwards the
call to the server that holds the tree, where :meth:`Router.serve` runs the same local
half for it. A forward answered with "moved" (the owner let the tree go meanwhile, or
is shutting down), or whose owner died (its lease changed), is placed again, with a
short backoff, until it runs or :data:`PLACE_TIMEOUT` passes.

With one process on its database every call runs here at once: the solo ownership
always answers "here".
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import trio

from ...errors import OwnerUnavailable
from ._ownership import Elsewhere, Moved, Ownership, Tenure

__all__ = ["PLACE_TIMEOUT", "LocalCall", "Router"]

log = logging.getLogger(__name__)

T = TypeVar("T")

#: The longest a call keeps looking for the server that holds its tree (a dead owner's
#: lease must expire first: keep it above the lease time).
PLACE_TIMEOUT = 60.0
_FIRST_BACKOFF = 0.02
_MAX_BACKOFF = 0.5

#: The local half of a routed call: ``(session_id, payload) -> JSON-ready answer``.
LocalCall = Callable[[str, dict[str, Any]], Awaitable[Any]]


class Router:
    """Places calls on the server that holds their session's tree. Owned by the runtime."""

    def __init__(self, ownership: Ownership) -> None:
        self.ownership = ownership
        self._calls: dict[str, tuple[LocalCall, bool]] = {}
        self._settling: set[str] = set()

    def register(self, kind: str, local: LocalCall, *, claim: bool, settle: bool = False) -> None:
        """Make ``kind`` routable; ``claim``: it starts work (takes a free tree here).

        ``settle``: the call ends work (a stop), so it returns only once the hold it
        may have left without a user is given back (:meth:`Ownership.settled`) — the
        caller may then start the session's work anywhere.
        """
        self._calls[kind] = (local, claim)
        if settle:
            self._settling.add(kind)

    async def call(
        self,
        kind: str,
        session_id: str,
        root_id: str,
        payload: dict[str, Any],
        *,
        idle: Any = None,
        timeout: float | None = 30.0,
    ) -> Any:
        """Run ``kind`` where the tree is held; ``idle`` if nobody holds it and the
        call starts no work.

        Args:
            timeout: how long a forwarded call may wait for its answer (``None``: as
                long as the owner lives, for a call that waits on a person).

        Raises:
            OwnerUnavailable: no server could be found to run it in time. Whatever
            the call raises, wherever it ran.
        """
        local, claim = self._calls[kind]
        deadline = trio.current_time() + PLACE_TIMEOUT
        backoff = _FIRST_BACKOFF
        owner = "?"
        while True:
            try:
                tenure = await self.ownership.enter(session_id, root_id, claim=claim)
            except Elsewhere as where:
                owner = where.server
                body = {"root": root_id, "args": payload}
                try:
                    return await self.ownership.forward(where, kind, body, timeout=timeout)
                except Moved:
                    pass
            except Moved:
                pass
            else:
                if tenure is None:
                    return idle
                return await self._run(kind, local, session_id, root_id, payload, tenure)
            if trio.current_time() + backoff > deadline:
                raise OwnerUnavailable(session_id, owner)
            await trio.sleep(backoff)
            backoff = min(backoff * 2, _MAX_BACKOFF)

    def handlers(self) -> dict[str, LocalCall]:
        """What the ownership runs for other servers: every routable call, by kind."""
        return {kind: self._server_for(kind) for kind in self._calls}

    def _server_for(self, kind: str) -> LocalCall:
        async def serve(session_id: str, body: dict[str, Any]) -> Any:
            return await self.serve(kind, session_id, body["root"], body["args"])

        return serve

    async def serve(self, kind: str, session_id: str, root_id: str, payload: dict[str, Any]) -> Any:
        """Run a call another server forwarded here, if the tree is held here.

        Raises:
            Moved: the tree is not held here (the caller places it again).
        """
        local, _ = self._calls[kind]
        tenure = await self.ownership.enter(session_id, root_id, claim=False)
        if tenure is None:
            raise Moved()
        return await self._run(kind, local, session_id, root_id, payload, tenure)

    async def _run(
        self,
        kind: str,
        local: LocalCall,
        session_id: str,
        root_id: str,
        payload: dict[str, Any],
        tenure: Tenure,
    ) -> Any:
        """Run a call here under ``tenure``; a settling call waits for the let-go too."""
        try:
            result = await local(session_id, payload)
        finally:
            tenure.release()
        if kind in self._settling:
            await self.ownership.settled(root_id)
        return result
