"""Asking a person from outside a turn: held elicitations and policy evaluation.

:class:`Asking` is owned by the runtime, behind :meth:`Runtime.hold_elicitation` and
:meth:`Runtime.evaluate_policy`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from ...errors import Conflict
from ...model import ElicitationParams, elicitation_params
from ...stores import SessionRow
from ..asking import Elicitations, Resolution
from ..tools import PolicyEvent, Verdict, parse_policy_event
from ._host import ActorHost
from ._sessions import SessionRecords

__all__ = ["Asking"]


class Asking:
    """Elicitations held by a session, and policy verdicts asked for from outside."""

    def __init__(
        self, host: ActorHost, elicitations: Elicitations, sessions: SessionRecords
    ) -> None:
        self._host = host
        self._elicitations = elicitations
        self._sessions = sessions
        # Set by the runtime (see _placed): ask the session's person, wherever its
        # tree is held. By default, here.
        self.elicit: Callable[[SessionRow, ElicitationParams], Awaitable[Resolution]] = (
            self._elicit_here
        )

    async def _elicit_here(self, row: SessionRow, params: ElicitationParams) -> Resolution:
        return await self._elicitations.ask(row.id, params, mark_waiting=False)

    async def hold_elicitation(self, session_id: str, params: ElicitationParams) -> str:
        """See :meth:`Runtime.hold_elicitation`."""
        await self._sessions.row(session_id)
        held = self._host.actor(session_id).hold_elicitation(params)
        await held.started.wait()
        if held.elicitation_id is None:
            raise Conflict("the session was stopped before the elicitation was published")
        return held.elicitation_id

    async def evaluate_policy(self, session_id: str, event: Any) -> Verdict:
        """See :meth:`Runtime.evaluate_policy`."""
        if not isinstance(event, PolicyEvent):
            event = parse_policy_event(event)
        row, spec = await self._host.session_spec(session_id)
        verdict = await self._host.policy_engine(row, spec).evaluate(event)
        if verdict.action != "ASK":
            return verdict
        tool_input = event.data.get("tool_input")
        params = elicitation_params(
            verdict.elicitation_message,
            "tool_call",
            policy_name=verdict.policy_name,
            tool_name=event.tool_name,
            tool_input=dict(tool_input) if isinstance(tool_input, Mapping) else None,
        )
        answer = await self.elicit(row, params)
        return verdict.resolve(answer.accepted, event)
