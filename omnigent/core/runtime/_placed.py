"""The runtime's calls on live work, each run on the server that holds the session's tree.

:class:`PlacedCalls` is owned by the runtime. Each of its methods is one call a
client can make on any server — hand a message to the session, interrupt or stop it,
answer its elicitation, open an elicitation it holds, ask its person, tell its parent it
changed, list its pending elicitations — written once as a *local half* (what the holder
does) and registered with the :class:`~omnigent.core.cluster._routing.Router`, which
runs it here or forwards it to the holder (see :mod:`omnigent.core.cluster._ownership`).
Arguments and answers cross servers as JSON, so each local half takes and returns
JSON-ready values.

With one process on its database (SQLite) every call runs here at once, and this is
just the runtime's own code.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from ...model import (
    ElicitationParams,
    ElicitationRequest,
    Item,
    MessageItem,
    event_from_dict,
    structure,
    unstructure,
)
from ...stores import SessionRow, Store
from ..asking import Elicitations, Resolution
from ..cluster import Ownership, Router
from ._asking import Asking
from ._live import LiveSessions
from ._messages import Messages
from ._session_catalog import SessionCatalog

__all__ = ["PlacedCalls"]


class PlacedCalls:
    """Calls on live work, routed to the holder of the session's tree."""

    def __init__(
        self,
        *,
        ownership: Ownership,
        store: Store,
        live: LiveSessions,
        elicitations: Elicitations,
        sessions: SessionCatalog,
        asking: Asking,
        messages: Messages,
        stop_here: Callable[[str], Awaitable[None]],
        stop_tree_here: Callable[[str, list[str]], Awaitable[None]],
    ) -> None:
        self.ownership = ownership
        self._messages = messages
        self._stop_here = stop_here
        self._stop_tree_here = stop_tree_here
        self._store = store
        self._live = live
        self._elicitations = elicitations
        self._sessions = sessions
        self._asking = asking
        self.router = Router(ownership)
        register = self.router.register
        register("message", self._enqueue, claim=True)
        register("interrupt", self._interrupt, claim=False)
        register("stop", self._stop, claim=False, settle=True)
        register("stop_tree", self._stop_tree, claim=False, settle=True)
        register("resolve", self._resolve, claim=False)
        register("hold_elicitation", self._hold, claim=True)
        register("elicit", self._elicit, claim=True)
        register("announce", self._announce, claim=True)
        register("pending", self._pending, claim=False)
        register("visible", self._visible, claim=False)

    # -- what clients call ---------------------------------------------------------------

    async def deliver(self, row: SessionRow, message: MessageItem) -> str:
        """Hand a stored message to the session: ``accepted`` or ``buffered``."""
        answer = await self._call("message", row, {"item": unstructure(message, Item)})
        return str(answer)

    async def interrupt(self, row: SessionRow) -> bool:
        return bool(await self._call("interrupt", row, {}, idle=False))

    async def stop(self, row: SessionRow) -> None:
        await self._call("stop", row, {})

    async def stop_tree(self, row: SessionRow, doomed: list[str]) -> None:
        """Stop the work of ``doomed`` (the session and its descendants), for a delete."""
        await self._call("stop_tree", row, {"doomed": doomed})

    async def resolve(
        self, row: SessionRow, elicitation_id: str, action: str, content: Any
    ) -> bool:
        payload = {"elicitation_id": elicitation_id, "action": action, "content": content}
        return bool(await self._call("resolve", row, payload, idle=False))

    async def hold_elicitation(self, row: SessionRow, params: ElicitationParams) -> str:
        payload = {"params": unstructure(params, ElicitationParams)}
        return str(await self._call("hold_elicitation", row, payload))

    async def elicit(
        self, row: SessionRow, params: ElicitationParams, *, mark_waiting: bool = False
    ) -> Resolution:
        """Ask and wait, on the holder; waits as long as the holder lives."""
        payload = {"params": unstructure(params, ElicitationParams), "mark_waiting": mark_waiting}
        answer = await self._call("elicit", row, payload, timeout=None)
        return Resolution(answer["action"], answer.get("content"))

    async def announce(self, row: SessionRow) -> None:
        """Tell the session's parent that it changed (``session.child_session.updated``)."""
        await self._call("announce", row, {})

    async def pending(self, row: SessionRow) -> tuple[ElicitationRequest, ...]:
        """The pending elicitations shown on the session, from whoever holds its tree."""
        answer = await self._call("pending", row, {}, idle=[])
        found = [event_from_dict(r) for r in answer]
        return tuple(r for r in found if isinstance(r, ElicitationRequest))

    async def visible(self, row: SessionRow, elicitation_id: str) -> ElicitationRequest | None:
        """A pending elicitation as the session's stream showed it, from its tree's holder."""
        answer = await self._call("visible", row, {"elicitation_id": elicitation_id})
        found = None if answer is None else event_from_dict(answer)
        return found if isinstance(found, ElicitationRequest) else None

    async def _call(
        self,
        kind: str,
        row: SessionRow,
        payload: dict[str, Any],
        *,
        idle: Any = None,
        timeout: float | None = 30.0,
    ) -> Any:
        return await self.router.call(
            kind, row.id, row.root_session_id, payload, idle=idle, timeout=timeout
        )

    # -- the local halves (run on the holder) ------------------------------------------

    async def _enqueue(self, session_id: str, payload: dict[str, Any]) -> str:
        message = structure(payload["item"], Item)
        assert isinstance(message, MessageItem)
        return (await self._messages.hand_over(session_id, message)).status

    async def _interrupt(self, session_id: str, payload: dict[str, Any]) -> bool:
        actor = self._live.actor(session_id)
        return actor.interrupt() if actor is not None else False

    async def _stop(self, session_id: str, payload: dict[str, Any]) -> None:
        await self._stop_here(session_id)

    async def _stop_tree(self, session_id: str, payload: dict[str, Any]) -> None:
        await self._stop_tree_here(session_id, [str(s) for s in payload["doomed"]])

    async def _resolve(self, session_id: str, payload: dict[str, Any]) -> bool:
        return self._elicitations.resolve(
            session_id, payload["elicitation_id"], payload["action"], payload.get("content")
        )

    async def _hold(self, session_id: str, payload: dict[str, Any]) -> str:
        params = structure(payload["params"], ElicitationParams)
        return await self._asking.hold_elicitation(session_id, params)

    async def _elicit(self, session_id: str, payload: dict[str, Any]) -> dict[str, Any]:
        params = structure(payload["params"], ElicitationParams)
        mark = bool(payload.get("mark_waiting", False))
        answer = await self._elicitations.ask(session_id, params, mark_waiting=mark)
        return {"action": answer.action, "content": answer.content}

    async def _announce(self, session_id: str, payload: dict[str, Any]) -> None:
        await self._sessions.announce_to_parent(session_id)

    async def _visible(self, session_id: str, payload: dict[str, Any]) -> dict[str, Any] | None:
        request = self._elicitations.visible(session_id, payload["elicitation_id"])
        return None if request is None else request.to_dict()

    async def _pending(self, session_id: str, payload: dict[str, Any]) -> list[dict[str, Any]]:
        return [request.to_dict() for request in self._elicitations.pending_for(session_id)]
