"""Routing: run a call that touches live work where the session's tree is held.

:class:`Router` is the one place the runtime asks the :class:`~._ownership.Ownership`
seam where to run something. :meth:`Router.call` holds the tree here (claiming its
lease if free, when the call starts work) and runs the call — a typed
:class:`~._calls.Call`, awaited as it is — or forwards it to the server that holds
the tree, where :meth:`Router.serve` runs the same call for it. Only a forwarded call
is serialised (by the ownership's :class:`~._calls.CallWire`). A forward answered with
"moved" (the owner let the tree go meanwhile, or is shutting down), or whose owner died
(its lease changed), is placed again, with a short backoff, until it runs or
:data:`PLACE_TIMEOUT` passes.

With one process on its database every call runs here at once: the solo ownership
always answers "here".
"""

from __future__ import annotations

import logging
from typing import Any, Generic, TypeVar

import trio

from ...errors import OwnerUnavailable
from ._calls import Call
from ._ownership import Elsewhere, Moved, Ownership, Tenure
from ._runner_directory import UNREAD, Placement, Unread

__all__ = ["PLACE_TIMEOUT", "Router"]

log = logging.getLogger(__name__)

W = TypeVar("W")
T = TypeVar("T")

#: The longest a call keeps looking for the server that holds its tree (a dead owner's
#: lease must expire first: keep it above the lease time).
PLACE_TIMEOUT = 60.0
_FIRST_BACKOFF = 0.02
_MAX_BACKOFF = 0.5


class Router(Generic[W]):
    """Places calls on the server that holds their session's tree. Owned by the runtime.

    Args:
        ownership: where trees are held.
        here: what calls run against on this server (their :meth:`Call.run`).
        placement: where a call that starts work on a tree nobody holds should run
            (``None``: wherever it was made) — the server a runner-bound session's
            runner is connected to (:mod:`._runner_directory`).
    """

    def __init__(self, ownership: Ownership, here: W, placement: Placement | None = None) -> None:
        self.ownership = ownership
        self._here = here
        self._placement = placement

    async def call(self, call: Call[W, T], session_id: str, root_id: str) -> T:
        """Run ``call`` where the tree is held; its :meth:`~Call.unheld` answer if
        nobody holds it and the call claims nothing.

        Raises:
            OwnerUnavailable: no server could be found to run it in time. Whatever
            the call raises, wherever it ran.
        """
        deadline = trio.current_time() + PLACE_TIMEOUT
        backoff = _FIRST_BACKOFF
        owner = "?"
        while True:
            try:
                tenure = await self._enter(call.claims, session_id, root_id)
            except Elsewhere as where:
                owner = where.server
                try:
                    return await self.ownership.forward(where, call)
                except Moved:
                    pass
            except Moved:
                pass
            else:
                if tenure is None:
                    return call.unheld()
                return await self._run(call, session_id, root_id, tenure)
            if trio.current_time() + backoff > deadline:
                raise OwnerUnavailable(session_id, owner)
            await trio.sleep(backoff)
            backoff = min(backoff * 2, _MAX_BACKOFF)

    async def hold_here(
        self, session_id: str, root_id: str, runner_id: str | Unread | None = UNREAD
    ) -> Tenure | None:
        """Hold the tree here if a call that starts work (a message) would run here
        now: a tenure the caller releases — that call, placed afterwards, finds the
        tree held and runs here —, or ``None``: it would be forwarded (another
        server holds the tree, or the placement sends it there), or this server
        takes no tree (it is closing).

        For a caller that must know before it places the call whether the session's
        events will be written here: a turn's stream, which subscribes first, then
        needs no store read to start live. ``runner_id``: the session's runner
        binding, when the caller has its row (see :meth:`Placement.elsewhere`).
        """
        try:
            return await self._enter(True, session_id, root_id, runner_id)
        except (Elsewhere, Moved):
            return None

    async def _enter(
        self,
        claims: bool,
        session_id: str,
        root_id: str,
        runner_id: str | Unread | None = UNREAD,
    ) -> Tenure | None:
        """Hold the tree here for a call (``claims``: one that starts work; see
        :meth:`Ownership.enter`).

        A claiming call on a tree nobody holds goes where the placement says. The
        placement is asked first: when it has no other server in mind (the usual
        answer), the claim itself says whether another server holds the tree, and
        the holder is looked up only when the placement would send the tree away.

        Raises:
            Elsewhere: the tree is held by another server, or should be taken there.
        """
        if not claims or self._placement is None:
            return await self.ownership.enter(session_id, root_id, claim=claims)
        tenure = self.ownership.retain(session_id)  # held here already: no store read
        if tenure is not None:
            return tenure
        where = await self._placement.elsewhere(session_id, root_id, runner_id)
        if where is None:
            return await self.ownership.enter(session_id, root_id, claim=True)
        tenure = await self.ownership.enter(session_id, root_id, claim=False)
        if tenure is not None:
            return tenure
        raise where

    async def serve(self, call: Call[W, Any], session_id: str, root_id: str) -> Any:
        """Run a call another server forwarded here, if the tree is held here — or, for
        a call the placement sent here to start work, once it is taken here.

        Raises:
            Moved: the tree is not held here (the caller places it again).
        """
        claim = (
            call.claims
            and self._placement is not None
            and await self._placement.claims_here(session_id)
        )
        tenure = await self.ownership.enter(session_id, root_id, claim=claim)
        if tenure is None:
            raise Moved()
        return await self._run(call, session_id, root_id, tenure)

    async def _run(self, call: Call[W, T], session_id: str, root_id: str, tenure: Tenure) -> T:
        """Run a call here under ``tenure``; a settling call waits for the let-go too."""
        try:
            result = await call.run(self._here, session_id)
        finally:
            tenure.release()
        if call.settles:
            await self.ownership.settled(root_id)
        return result
