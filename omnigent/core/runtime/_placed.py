"""The runtime's calls on live work, each run on the server that holds the session's tree.

:class:`PlacedCalls` is owned by the runtime. Each of its methods is one call a
client can make on any server — hand a message to the session, interrupt or stop it,
answer its elicitation, open an elicitation it holds, ask its person, tell its parent it
changed, list its pending elicitations. Each is a typed :class:`~omnigent.core.cluster.Call`
(in :mod:`._placed_calls`, imported by the first call: a server builds none of them
before its first answer) — its arguments are its fields, and its ``run`` is what the
holder of the tree does, against :class:`~._live_work.LiveWork` — handed to the
:class:`~omnigent.core.cluster.Router`, which awaits it here or forwards it to the
holder (see :mod:`omnigent.core.cluster`). In one process nothing is serialised: a
message is handed over as the very ``MessageItem``, an answer comes back as the very
``Resolution``. Only a call forwarded to another server becomes JSON, through
:data:`~._placed_calls.PLACED_WIRE`, and back.

With one process on its database (SQLite) every call runs here at once, and this is
just the runtime's own code.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from ...model import ElicitationParams, ElicitationRequest, MessageItem
from ...stores import SessionRow
from ..asking import Elicitations, Resolution
from ..cluster import Ownership, Placement, Router, Tenure
from ._asking import Asking
from ._live import LiveSessions
from ._live_work import LiveWork
from ._messages import Messages
from ._session_catalog import SessionCatalog

__all__ = ["PlacedCalls"]


class PlacedCalls:
    """Calls on live work, routed to the holder of the session's tree."""

    def __init__(
        self,
        *,
        ownership: Ownership,
        live: LiveSessions,
        elicitations: Elicitations,
        sessions: SessionCatalog,
        asking: Asking,
        messages: Messages,
        stop_here: Callable[[str], Awaitable[None]],
        stop_tree_here: Callable[[str, list[str]], Awaitable[None]],
        placement: Placement | None = None,
    ) -> None:
        self.ownership = ownership
        here = LiveWork(
            live=live,
            messages=messages,
            elicitations=elicitations,
            sessions=sessions,
            asking=asking,
            stop_here=stop_here,
            stop_tree_here=stop_tree_here,
        )
        self.router = Router(ownership, here, placement)

    async def deliver(self, row: SessionRow, message: MessageItem) -> str:
        """Hand a stored message to the session: ``accepted`` or ``buffered``."""
        from ._placed_calls import Deliver

        return await self.router.call(Deliver(message), row.id, row.root_session_id)

    async def hold_for_delivery(self, row: SessionRow) -> Tenure | None:
        """Hold the session's tree here if a message to it would be handed over here
        (see :meth:`~omnigent.core.cluster.Router.hold_here`); ``None`` if not."""
        return await self.router.hold_here(row.id, row.root_session_id, row.runner_id)

    async def interrupt(self, row: SessionRow) -> bool:
        from ._placed_calls import Interrupt

        return await self.router.call(Interrupt(), row.id, row.root_session_id)

    async def stop(self, row: SessionRow) -> None:
        from ._placed_calls import Stop

        await self.router.call(Stop(), row.id, row.root_session_id)

    async def stop_tree(self, row: SessionRow, doomed: list[str]) -> None:
        """Stop the work of ``doomed`` (the session and its descendants), for a delete."""
        from ._placed_calls import StopTree

        await self.router.call(StopTree(tuple(doomed)), row.id, row.root_session_id)

    async def resolve(
        self, row: SessionRow, elicitation_id: str, action: str, content: Any
    ) -> bool:
        from ._placed_calls import Resolve

        call = Resolve(elicitation_id, action, content)
        return await self.router.call(call, row.id, row.root_session_id)

    async def hold_elicitation(self, row: SessionRow, params: ElicitationParams) -> str:
        from ._placed_calls import HoldElicitation

        return await self.router.call(HoldElicitation(params), row.id, row.root_session_id)

    async def elicit(
        self, row: SessionRow, params: ElicitationParams, *, mark_waiting: bool = False
    ) -> Resolution:
        """Ask and wait, on the holder; waits as long as the holder lives."""
        from ._placed_calls import Elicit

        call = Elicit(params, mark_waiting)
        return await self.router.call(call, row.id, row.root_session_id)

    async def announce(self, row: SessionRow, *, changed: bool = False) -> None:
        """Tell the session's parent that it changed (``session.child_session.updated``).

        ``changed``: its title, labels or model override changed, which the session's
        own stream shows too (``session.info.updated``).
        """
        from ._placed_calls import Announce

        await self.router.call(Announce(changed), row.id, row.root_session_id)

    async def pending(self, row: SessionRow) -> tuple[ElicitationRequest, ...]:
        """The pending elicitations shown on the session, from whoever holds its tree."""
        from ._placed_calls import Pending

        return await self.router.call(Pending(), row.id, row.root_session_id)

    async def visible(self, row: SessionRow, elicitation_id: str) -> ElicitationRequest | None:
        """A pending elicitation as the session's stream showed it, from its tree's holder."""
        from ._placed_calls import Visible

        return await self.router.call(Visible(elicitation_id), row.id, row.root_session_id)
