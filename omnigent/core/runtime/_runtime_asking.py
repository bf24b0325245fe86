"""The runtime's API for asking: elicitations, policies, tools run from outside a
turn (the ``/mcp`` endpoint) and sharing.

A mixin of :class:`~._runtime.Runtime` (see :mod:`._runtime_base`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...errors import (
    InvalidInput,
    RuntimeClosed,
    SessionElsewhere,
)
from ...harnesses.base import ToolSchema
from ...model import (
    ElicitationInfo,
    ElicitationParams,
    ElicitationRequest,
    check_depth,
)
from ...stores import SessionRow
from ..asking import ACTIONS, Grant, Resolution, check_content
from ..cluster import Elsewhere, Moved, Tenure
from ..tools import PolicyEvent, Verdict
from ..work import DEFAULT_TTL, HeldToolCall
from ._runtime_base import RuntimeBase

__all__ = ["AskingAPI"]


class AskingAPI(RuntimeBase):
    """Elicitations, policy verdicts, held tool calls and grants."""

    # -- elicitations and policies --------------------------------------------------

    async def resolve_elicitation(
        self, session_id: str, elicitation_id: str, action: str, content: Any = None
    ) -> bool:
        """Answer a pending elicitation owned by ``session_id``.

        Returns False (touching nothing) when ``session_id`` does not own it, or it is
        not pending.

        Raises:
            SessionNotFound; InvalidInput at ``action`` for anything but accept,
            decline or cancel, or at ``content`` when it nests too deep or is not JSON.
        """
        await self._working()
        await self._sessions.row(session_id)
        if action not in ACTIONS:
            raise InvalidInput.at("action", "must be one of 'accept', 'decline', 'cancel'")
        check_depth(content, loc="content")
        if action == "accept":
            check_content(content)  # it is stored and published with the answer
        row = await self._sessions.row(session_id)
        return await self._placed.resolve(row, elicitation_id, action, content)

    async def get_elicitation(
        self, session_id: str, elicitation_id: str, *, viewer: str | None = None
    ) -> ElicitationInfo:
        """An elicitation as ``session_id`` sees it: its own, or a descendant's.

        A pending one carries its ``request`` exactly as that session's stream showed
        it (a descendant's with ``params.target_session_id``, the id to resolve with).
        An id that is unknown or not shown on ``session_id`` is ``status="unknown"``,
        and so is a descendant's that ``viewer`` (when given) may not read.

        Raises:
            SessionNotFound.
        """
        self._open()
        row = await self._sessions.row(session_id)

        async def elsewhere(eid: str) -> ElicitationRequest | None:
            return await self._placed.visible(row, eid)

        remote = None if self._ownership.owns(session_id) else elsewhere
        if viewer is None:
            return await self._elicitations.info(session_id, elicitation_id, elsewhere=remote)
        return await self._elicitations.info(
            session_id,
            elicitation_id,
            owner_visible=lambda owner: self._visibility.may_read(owner, viewer),
            elsewhere=remote,
        )

    async def remember_answer(
        self,
        session_id: str,
        tool_name: str,
        action: str | None,
        *,
        phase: str = "tool_call",
    ) -> int:
        """Give a standing answer to elicitations about one tool in one session.

        From now on an elicitation of ``session_id`` whose ``params.tool_name`` is
        ``tool_name`` and ``params.phase`` is ``phase`` is answered ``action``
        (``accept`` or ``decline``) at once, without publishing anything: an editor's
        "always allow" / "always reject". ``None`` withdraws the standing answer. Such
        elicitations already waiting are answered too; returns how many. Kept in memory
        for the runtime's lifetime; deleting the session drops it.

        Raises:
            SessionNotFound; InvalidInput at ``action`` or ``tool_name``.
        """
        self._open()
        await self._sessions.row(session_id)
        if action is not None and action not in ("accept", "decline"):
            raise InvalidInput.at("action", "must be 'accept', 'decline' or None")
        if not isinstance(tool_name, str) or not tool_name:
            raise InvalidInput.at("tool_name", "must be a tool name")
        return self._elicitations.remember(session_id, phase, tool_name, action)

    async def elicit(
        self, session_id: str, params: ElicitationParams, *, mark_waiting: bool = False
    ) -> Resolution:
        """Ask the person behind ``session_id`` and wait for the answer.

        The caller's task holds the elicitation (a hook request, say): if it is
        cancelled — the caller went away — the elicitation is withdrawn.

        Raises:
            SessionNotFound; InvalidInput when a field of ``params`` nests too deep.
        """
        await self._working()
        row = await self._sessions.row(session_id)
        _check_params_depth(params)
        return await self._placed.elicit(row, params, mark_waiting=mark_waiting)

    async def hold_elicitation(self, session_id: str, params: ElicitationParams) -> str:
        """Publish an elicitation the *session* holds until answered; returns its id.

        Unlike :meth:`elicit` this returns at once: the session's nursery keeps the
        elicitation open, and a stop (or delete, or shutdown) withdraws it.

        Raises:
            SessionNotFound; RuntimeClosed; Conflict if the session was stopped first;
            InvalidInput when a field of ``params`` nests too deep.
        """
        await self._working()
        _check_params_depth(params)
        return await self._placed.hold_elicitation(await self._sessions.row(session_id), params)

    # -- tools for callers outside a turn (the /mcp endpoint) ------------------------

    async def session_tools(self, session_id: str) -> tuple[ToolSchema, ...]:
        """The tools the session offers, as its harness is offered them.

        Its MCP servers' tools are included once a turn has connected them.

        Raises:
            SessionNotFound; RuntimeClosed; StoreBusy (records only).
        """
        await self._working()
        tenure = await self._here(await self._sessions.row(session_id))
        try:
            return await self._host.actor(session_id).tool_schemas()
        finally:
            tenure.release()

    async def start_tool_call(
        self,
        session_id: str,
        name: str,
        arguments: Mapping[str, Any],
        *,
        ttl: float = DEFAULT_TTL,
    ) -> HeldToolCall:
        """Run one tool call in the session, through its policies, across requests.

        The call runs in the session's nursery (a stop cancels it). Wait on
        :meth:`HeldToolCall.wait_settled`: the call is then done (take the output
        with :meth:`HeldToolCall.collect`) or waits on a policy's ASK
        (``call.asking``, the published elicitation; resolve it as any other). Find
        the call again with :meth:`held_tool_call`. A call not collected within
        ``ttl`` seconds ends (a pending ASK is withdrawn).

        Raises:
            SessionNotFound; RuntimeClosed; StoreBusy (records only).
        """
        await self._working()
        tenure = await self._here(await self._sessions.row(session_id))
        try:
            call = HeldToolCall(session_id, name, dict(arguments), ttl)
            self._host.actor(session_id).hold_tool_call(call)
        finally:
            tenure.release()
        return call

    async def _here(self, row: SessionRow) -> Tenure:
        """Hold the session's tree in this process, for a call that cannot be relayed.

        Raises:
            SessionElsewhere: another server holds it (a held tool call lives in its
            process: the caller must ask that server).
        """
        try:
            tenure = await self._ownership.enter(row.id, row.root_session_id)
        except Elsewhere as where:
            raise SessionElsewhere(row.id, where.server) from None
        except Moved:
            raise RuntimeClosed("the runtime is shutting down") from None
        assert tenure is not None
        return tenure

    def held_tool_call(self, session_id: str, call_id: str) -> HeldToolCall | None:
        """A call :meth:`start_tool_call` made on ``session_id`` that is not collected yet."""
        actor = self._host.actors.get(session_id)
        return None if actor is None else actor.held_calls.get(call_id)

    async def evaluate_policy(self, session_id: str, event: Any) -> Verdict:
        """Evaluate the session's policies (and the runtime defaults) on ``event``.

        ``event`` is a :class:`PolicyEvent` or its wire form ``{type, data,
        request_data?, context?}``. An ASK parks an elicitation on the session
        (``params.message = "<policy>: <reason>"``, phase ``tool_call``) and answers
        ALLOW on accept, DENY otherwise.

        Cancellation: withdraws a pending ASK.

        Raises:
            InvalidInput: a malformed event, or one nested too deep (at ``event…``).
        """
        await self._working()
        if isinstance(event, Mapping):
            check_depth(event, loc="event")
        elif isinstance(event, PolicyEvent):
            for name in ("data", "request_data", "context"):
                check_depth(getattr(event, name), loc=f"event.{name}")
        return await self._asking.evaluate_policy(session_id, event)

    # -- sharing -----------------------------------------------------------------------

    async def access_level(self, session_id: str, user_id: str) -> int:
        """The level ``user_id`` has on the session: 0 none, 1 read, 2 edit, 3 manage.

        Raises:
            SessionNotFound.
        """
        self._open()
        return await self._permissions.level(await self._sessions.row(session_id), user_id)

    async def list_grants(self, session_id: str) -> list[Grant]:
        """The owner, then every grant on the session itself. Raises SessionNotFound."""
        self._open()
        await self._sessions.row(session_id)
        return await self._permissions.list(session_id)

    async def grant(self, session_id: str, user_id: str, level: Any) -> Grant:
        """Give ``user_id`` ``level`` (1 read, 2 edit, 3 manage) on the session and below.

        Raises:
            SessionNotFound; InvalidInput at ``user_id`` or ``level``; Conflict when
            ``user_id`` owns the session or its root.
        """
        self._open()
        await self._sessions.row(session_id)
        granted = await self._permissions.grant(session_id, user_id, level)
        self._changes.grants_changed()  # the sessions feed: who reads what changed
        return granted

    async def revoke(self, session_id: str, user_id: str) -> bool:
        """Remove ``user_id``'s grant on the session; False if there was none.

        Raises:
            SessionNotFound; Conflict when ``user_id`` owns the session or its root.
        """
        self._open()
        await self._sessions.row(session_id)
        revoked = await self._permissions.revoke(session_id, user_id)
        if revoked:
            self._changes.grants_changed()
        return revoked


def _check_params_depth(params: ElicitationParams) -> None:
    """Refuse elicitation params whose free-form fields nest too deep to encode."""
    for name in ("tool_input", "requestedSchema", "ask_user_question"):
        check_depth(getattr(params, name), loc=f"params.{name}")
