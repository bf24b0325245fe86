"""The placed calls: each call a client can make on live work, as a typed
:class:`~omnigent.core.cluster.Call` — its arguments are its fields, its ``run`` is what
the holder of the session's tree does against :class:`~._live_work.LiveWork` — and
:data:`PLACED_WIRE`, how they cross to another server.

Imported by the first call (:class:`~._placed.PlacedCalls`), not with the runtime: ten
attrs classes a server need not build before its first answer (issue 32).
"""

from __future__ import annotations

from typing import Any, ClassVar

import attrs

from ...model import ElicitationParams, ElicitationRequest, MessageItem
from ..asking import Resolution
from ..cluster import Call, CallWire
from ._live_work import LiveWork

__all__ = [
    "PLACED_WIRE",
    "Announce",
    "Deliver",
    "Elicit",
    "HoldElicitation",
    "Interrupt",
    "Pending",
    "Resolve",
    "Stop",
    "StopTree",
    "Visible",
]


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
