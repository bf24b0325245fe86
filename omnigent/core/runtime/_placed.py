"""The runtime's calls on live work, each run on the server that holds the session's tree.

:class:`PlacedCalls` is owned by the runtime. Each of its methods is one call a
client can make on any server — hand a message to the session, interrupt or stop it,
answer its elicitation, open an elicitation it holds, ask its person, tell its parent it
changed, list its pending elicitations. Each is a typed :class:`~omnigent.core.cluster.Call`
defined here — its arguments are its fields, and its ``run`` is what the holder of the
tree does, against :class:`LiveWork` — handed to the
:class:`~omnigent.core.cluster.Router`, which awaits it here or forwards it to the
holder (see :mod:`omnigent.core.cluster`). In one process nothing is serialised: a
message is handed over as the very ``MessageItem``, an answer comes back as the very
``Resolution``. Only a call forwarded to another server becomes JSON, through
:data:`PLACED_WIRE`, and back.

With one process on its database (SQLite) every call runs here at once, and this is
just the runtime's own code.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, ClassVar

import attrs

from ...model import ElicitationParams, ElicitationRequest, MessageItem
from ...stores import SessionRow
from ..asking import Elicitations, Resolution
from ..cluster import Call, CallWire, Ownership, Placement, Router, Tenure
from ._asking import Asking
from ._live import LiveSessions
from ._messages import Messages
from ._session_catalog import SessionCatalog

__all__ = ["PLACED_WIRE", "LiveWork", "PlacedCalls"]


@attrs.frozen
class LiveWork:
    """What the holder of a tree runs placed calls against (built once by the runtime)."""

    live: LiveSessions
    messages: Messages
    elicitations: Elicitations
    sessions: SessionCatalog
    asking: Asking
    stop_here: Callable[[str], Awaitable[None]]
    stop_tree_here: Callable[[str, list[str]], Awaitable[None]]


# -- the calls ---------------------------------------------------------------------------


@attrs.frozen
class Deliver(Call[LiveWork, str]):
    """Hand a stored message to the session: ``accepted`` or ``buffered``."""

    name: ClassVar[str] = "message"
    answer: ClassVar[Any] = str
    claims: ClassVar[bool] = True

    message: MessageItem

    async def run(self, here: LiveWork, session_id: str) -> str:
        return (await here.messages.hand_over(session_id, self.message)).status


@attrs.frozen
class Interrupt(Call[LiveWork, bool]):
    """Cancel the session's running turn; whether one was running."""

    name: ClassVar[str] = "interrupt"
    answer: ClassVar[Any] = bool

    async def run(self, here: LiveWork, session_id: str) -> bool:
        actor = here.live.actor(session_id)
        return actor.interrupt() if actor is not None else False

    def unheld(self) -> bool:
        return False


@attrs.frozen
class Stop(Call[LiveWork, None]):
    """Cancel the session's turn, background tasks and child work; wait for them."""

    name: ClassVar[str] = "stop"
    answer: ClassVar[Any] = None
    settles: ClassVar[bool] = True

    async def run(self, here: LiveWork, session_id: str) -> None:
        await here.stop_here(session_id)

    def unheld(self) -> None:
        return None


@attrs.frozen
class StopTree(Call[LiveWork, None]):
    """Stop the work of ``doomed`` (a session and its descendants), for a delete."""

    name: ClassVar[str] = "stop_tree"
    answer: ClassVar[Any] = None
    settles: ClassVar[bool] = True

    doomed: tuple[str, ...]

    async def run(self, here: LiveWork, session_id: str) -> None:
        await here.stop_tree_here(session_id, list(self.doomed))

    def unheld(self) -> None:
        return None


@attrs.frozen
class Resolve(Call[LiveWork, bool]):
    """Answer a pending elicitation of the session; whether it was pending."""

    name: ClassVar[str] = "resolve"
    answer: ClassVar[Any] = bool

    elicitation_id: str
    action: str
    content: Any = None

    async def run(self, here: LiveWork, session_id: str) -> bool:
        return here.elicitations.resolve(session_id, self.elicitation_id, self.action, self.content)

    def unheld(self) -> bool:
        return False


@attrs.frozen
class HoldElicitation(Call[LiveWork, str]):
    """Open an elicitation the session holds until it is answered; its id."""

    name: ClassVar[str] = "hold_elicitation"
    answer: ClassVar[Any] = str
    claims: ClassVar[bool] = True

    params: ElicitationParams

    async def run(self, here: LiveWork, session_id: str) -> str:
        return await here.asking.hold_elicitation(session_id, self.params)


@attrs.frozen
class Elicit(Call[LiveWork, Resolution]):
    """Ask the session's person and wait for the answer (as long as the holder lives)."""

    name: ClassVar[str] = "elicit"
    answer: ClassVar[Any] = Resolution
    claims: ClassVar[bool] = True
    timeout: ClassVar[float | None] = None

    params: ElicitationParams
    mark_waiting: bool = False

    async def run(self, here: LiveWork, session_id: str) -> Resolution:
        return await here.elicitations.ask(session_id, self.params, mark_waiting=self.mark_waiting)


@attrs.frozen
class Announce(Call[LiveWork, None]):
    """Tell the session's parent that it changed (``session.child_session.updated``).

    ``changed``: its title, labels or model override changed — its own stream shows
    that too (``session.info.updated``).
    """

    name: ClassVar[str] = "announce"
    answer: ClassVar[Any] = None
    claims: ClassVar[bool] = True

    changed: bool = False

    async def run(self, here: LiveWork, session_id: str) -> None:
        await here.sessions.announce_to_parent(session_id, changed=self.changed)


@attrs.frozen
class Pending(Call[LiveWork, tuple[ElicitationRequest, ...]]):
    """The pending elicitations shown on the session (its own and its descendants')."""

    name: ClassVar[str] = "pending"
    answer: ClassVar[Any] = tuple[ElicitationRequest, ...]

    async def run(self, here: LiveWork, session_id: str) -> tuple[ElicitationRequest, ...]:
        return tuple(here.elicitations.pending_for(session_id))

    def unheld(self) -> tuple[ElicitationRequest, ...]:
        return ()


@attrs.frozen
class Visible(Call[LiveWork, ElicitationRequest | None]):
    """A pending elicitation as the session's stream showed it (``None``: not pending)."""

    name: ClassVar[str] = "visible"
    answer: ClassVar[Any] = ElicitationRequest | None

    elicitation_id: str

    async def run(self, here: LiveWork, session_id: str) -> ElicitationRequest | None:
        return here.elicitations.visible(session_id, self.elicitation_id)

    def unheld(self) -> ElicitationRequest | None:
        return None


PLACED_WIRE = CallWire(
    [
        Deliver,
        Interrupt,
        Stop,
        StopTree,
        Resolve,
        HoldElicitation,
        Elicit,
        Announce,
        Pending,
        Visible,
    ]
)
"""How the placed calls cross to the server holding a tree (and their answers back)."""


# -- what the runtime calls ----------------------------------------------------------------


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
        return await self.router.call(Deliver(message), row.id, row.root_session_id)

    async def hold_for_delivery(self, row: SessionRow) -> Tenure | None:
        """Hold the session's tree here if a message to it would be handed over here
        (see :meth:`~omnigent.core.cluster.Router.hold_here`); ``None`` if not."""
        return await self.router.hold_here(row.id, row.root_session_id)

    async def interrupt(self, row: SessionRow) -> bool:
        return await self.router.call(Interrupt(), row.id, row.root_session_id)

    async def stop(self, row: SessionRow) -> None:
        await self.router.call(Stop(), row.id, row.root_session_id)

    async def stop_tree(self, row: SessionRow, doomed: list[str]) -> None:
        """Stop the work of ``doomed`` (the session and its descendants), for a delete."""
        await self.router.call(StopTree(tuple(doomed)), row.id, row.root_session_id)

    async def resolve(
        self, row: SessionRow, elicitation_id: str, action: str, content: Any
    ) -> bool:
        call = Resolve(elicitation_id, action, content)
        return await self.router.call(call, row.id, row.root_session_id)

    async def hold_elicitation(self, row: SessionRow, params: ElicitationParams) -> str:
        return await self.router.call(HoldElicitation(params), row.id, row.root_session_id)

    async def elicit(
        self, row: SessionRow, params: ElicitationParams, *, mark_waiting: bool = False
    ) -> Resolution:
        """Ask and wait, on the holder; waits as long as the holder lives."""
        call = Elicit(params, mark_waiting)
        return await self.router.call(call, row.id, row.root_session_id)

    async def announce(self, row: SessionRow, *, changed: bool = False) -> None:
        """Tell the session's parent that it changed (``session.child_session.updated``).

        ``changed``: its title, labels or model override changed, which the session's
        own stream shows too (``session.info.updated``).
        """
        await self.router.call(Announce(changed), row.id, row.root_session_id)

    async def pending(self, row: SessionRow) -> tuple[ElicitationRequest, ...]:
        """The pending elicitations shown on the session, from whoever holds its tree."""
        return await self.router.call(Pending(), row.id, row.root_session_id)

    async def visible(self, row: SessionRow, elicitation_id: str) -> ElicitationRequest | None:
        """A pending elicitation as the session's stream showed it, from its tree's holder."""
        return await self.router.call(Visible(elicitation_id), row.id, row.root_session_id)
