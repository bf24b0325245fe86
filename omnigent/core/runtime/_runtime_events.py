"""The runtime's API for events: messages and events in, stops, subscriptions out.

A mixin of :class:`~._runtime.Runtime` (see :mod:`._runtime_base`). It builds on
:class:`~._runtime_asking.AskingAPI`: a posted event may be an approval or an
``mcp_elicitation``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import trio

from ...model import (
    ElicitationHeld,
    EventAccepted,
    MessageAccepted,
    ResolveResult,
    elicitation_params,
)
from ..bus import Subscription
from ..session import TurnEvents
from ._inputs import ApprovalData, McpElicitationData, parse_event, parse_message_content
from ._runtime_asking import AskingAPI

__all__ = ["EventsAPI"]


# How long a stop or delete waits for withdrawn elicitations to record their end.
_WITHDRAW_WAIT = 5.0


class EventsAPI(AskingAPI):
    """Messages, posted events, interrupts and stops in; subscriptions out."""

    # -- events in -----------------------------------------------------------------------

    async def send_message(
        self,
        session_id: str,
        content: str | Sequence[Any],
        *,
        role: str = "user",
        viewer: str | None = None,
    ) -> MessageAccepted:
        """Post a user message: starts a turn, or is buffered for the running one.

        The message is persisted before this returns. With ``viewer``, its
        ``input_image`` blocks may name only files that user uploaded.

        Raises:
            SessionNotFound; InvalidInput naming the bad block; RuntimeClosed.
        """
        await self._working()
        return await self._messages.send(session_id, content, role, viewer)

    async def check_content(
        self, content: str | Sequence[Any], *, root: str = "content", viewer: str | None = None
    ) -> None:
        """Validate message content as :meth:`send_message` would; store nothing.

        Raises:
            InvalidInput naming the bad block under ``root`` (an unknown file, or with
            ``viewer`` one that user did not upload, included).
        """
        self._open()
        blocks = parse_message_content(content, root=root)
        await self._files.check_references(blocks, root=root, viewer=viewer)

    def open_turn_stream(
        self,
        session_id: str,
        content: str | Sequence[Any],
        *,
        role: str = "user",
        viewer: str | None = None,
    ) -> AbstractAsyncContextManager[tuple[MessageAccepted, TurnEvents]]:
        """Send a message and stream the events of the turn that answers it.

        Yields the acceptance and an iterator over the session's events from now on,
        which ends with the terminal ``response.*`` event of the turn that handles
        the message (a new turn, the running turn if it took the message as an
        injection, or a continuation turn), or with the session's terminal status if
        a stop dropped the message.

        Resource handling: the subscription is released when the block exits.
        """
        return self._open_turn_stream(session_id, content, role, viewer)

    @asynccontextmanager
    async def _open_turn_stream(
        self, session_id: str, content: Any, role: str, viewer: str | None
    ) -> AsyncIterator[tuple[MessageAccepted, TurnEvents]]:
        await self._working()
        admits = self._visibility.event_filter(viewer)
        turn = self._messages.open_turn_stream(session_id, content, role, viewer, admits=admits)
        async with turn as opened:
            yield opened

    async def post_event(
        self, session_id: str, type: str, data: Any, *, viewer: str | None = None
    ) -> dict[str, Any]:
        """Handle one ``{type, data}`` event as the HTTP and WebSocket routes do.

        Returns the answer body: a :class:`MessageAccepted` for a message, a
        :class:`ResolveResult` for an approval, an :class:`ElicitationHeld` for an
        ``mcp_elicitation``, else an :class:`EventAccepted` (each as ``to_dict()``).

        Raises:
            InvalidInput naming ``type`` or the bad ``data`` field; SessionNotFound.
        """
        event = parse_event(type, data)
        await self._working()
        if event.type == "message":
            await self._files.check_references(event.content, root="data.content", viewer=viewer)
            accepted = await self.send_message(
                session_id, event.content, role=event.role, viewer=viewer
            )
            return accepted.to_dict()
        if isinstance(event.data, ApprovalData):
            approval = event.data
            resolved = await self.resolve_elicitation(
                session_id, approval.elicitation_id, approval.action, approval.content
            )
            return ResolveResult(resolved).to_dict()
        if isinstance(event.data, McpElicitationData):
            params = elicitation_params(
                event.data.message, "mcp_elicitation", requestedSchema=event.data.requestedSchema
            )
            return ElicitationHeld(await self.hold_elicitation(session_id, params)).to_dict()
        if event.type == "interrupt":
            await self.interrupt(session_id)
        elif event.type == "stop_session":
            await self.stop_session(session_id)
        return EventAccepted().to_dict()

    async def interrupt(self, session_id: str) -> bool:
        """Cancel the running turn, which ends ``cancelled``. False if none was running."""
        await self._working()
        return await self._placed.interrupt(await self._sessions.row(session_id))

    async def stop_session(self, session_id: str) -> None:
        """Cancel the turn and everything else the session runs, and wait for it to end.

        Buffered messages are dropped, and what is pending on the session and its
        descendants is withdrawn: a hook request or policy ASK held by a caller
        outside the session is answered ``cancel`` (a hook answers deny) at once.
        It returns once the session's end is stored and — on a database several
        servers share — the holder has given the tree back if nothing else of it
        runs, so the next message may start its work on any server.
        """
        await self._working()
        await self._placed.stop(await self._sessions.row(session_id))

    async def _stop_here(self, session_id: str) -> None:
        """:meth:`stop_session` where the session's tree is held (the routed call)."""
        actor = self._host.actors.get(session_id)
        if actor is not None and (waiting := sorted(actor.pending_ids())):
            # Settled before the stop ends anything: a turn stream on another server
            # waiting on one of these learns that no turn will answer it.
            with trio.move_on_after(_WITHDRAW_WAIT, shield=True):
                await self._store.settle_items(session_id, waiting)
        tree = [session_id, *await self._store.descendant_ids(session_id)]
        dropped = await self._stop_and_withdraw([session_id], withdraw=tree)
        self._host.histories.drop(session_id)  # dropped messages stay in the history
        with trio.move_on_after(_WITHDRAW_WAIT, shield=True):
            await self._store.settle_items(session_id, dropped)
            # The stop's terminal events are stored before it answers; their queued
            # writes also hold the tree, which is let go once they are written.
            await self._bus.flush()

    async def _stop_tree_here(self, session_id: str, doomed: list[str]) -> None:
        """What a delete stops, where the tree is held: every doomed session's work."""
        await self._stop_and_withdraw(doomed)
        # A deleted child's dispatch is delivered to its (surviving) parent first.
        await self._host.subagents.wait_concluded(doomed)
        with trio.move_on_after(_WITHDRAW_WAIT, shield=True):
            await self._bus.flush()

    async def _stop_and_wait(self, session_id: str) -> None:
        """Stop one session (what a sub-agent watcher stops its child with)."""
        await self._stop_and_withdraw([session_id])

    async def _stop_and_withdraw(
        self, session_ids: Sequence[str], *, withdraw: Sequence[str] | None = None
    ) -> list[str]:
        """Stop the sessions' actors and withdraw what is pending on ``withdraw``
        (default: the same sessions); wait for both. Returns the dropped messages."""
        actors = [a for a in (self._host.actors.get(sid) for sid in session_ids) if a]
        dropped = [item_id for actor in actors for item_id in actor.stop()]
        waiters = self._elicitations.withdraw(set(withdraw or session_ids))
        for actor in actors:
            await actor.done.wait()
        # MCP servers a connected client supplies: stopped too (the next turn on that
        # connection starts them again; a deleted session has none).
        await self._host.client_mcp.stop(session_ids)
        if self._processes is not None:
            # A native coding agent's process serves this session only: a stop or a
            # delete leaves none behind (an idle session's included).
            for sid in session_ids:
                await self._processes.terminate_session(sid)
        with trio.move_on_after(_WITHDRAW_WAIT):
            for waiter in waiters:
                await waiter.finished.wait()
        return dropped

    # -- events out ----------------------------------------------------------------------

    @asynccontextmanager
    async def subscribe(
        self, session_id: str, after: int | None = None, *, viewer: str | None = None
    ) -> AsyncIterator[Subscription]:
        """The session's events with ``event_id > after`` (``None``: from now on).

        With ``viewer``, events about another session (a child's
        ``session.child_session.updated``, a descendant's mirrored elicitation) are
        skipped unless that user may read that session. The caller checks the
        viewer's access to ``session_id`` itself.

        Resource handling: the subscription is released when the block exits.
        Raises SessionNotFound.
        """
        self._open()
        await self._sessions.row(session_id)
        admits = self._visibility.event_filter(viewer)
        async with self._bus.subscribe(session_id, after, admits=admits) as subscription:
            yield subscription

    async def last_event_id(self, session_id: str) -> int:
        """The id of the newest event of the session (0 if none). Raises SessionNotFound.

        A subscription with ``after=`` this id gets exactly the events published from
        now on.
        """
        self._open()
        await self._sessions.row(session_id)
        return await self._bus.last_event_id(session_id)
