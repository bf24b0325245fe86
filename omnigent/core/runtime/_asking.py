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
from ..asking import Resolution
from ..tools import PolicyEvent, Verdict, parse_policy_event
from ._actors import Actors
from ._session_catalog import SessionCatalog
from ._specs import AgentSpecs

__all__ = ["Ask", "Asking"]

Ask = Callable[[SessionRow, ElicitationParams], Awaitable[Resolution]]
"""Asks the person behind a session and waits (wherever its tree is held)."""


class Asking:
    """Elicitations held by a session, and policy verdicts asked for from outside."""

    def __init__(self, *, actors: Actors, specs: AgentSpecs, sessions: SessionCatalog) -> None:
        self._actors = actors
        self._specs = specs
        self._sessions = sessions

    async def hold_elicitation(self, session_id: str, params: ElicitationParams) -> str:
        """See :meth:`Runtime.hold_elicitation` (run where the session's tree is held)."""
        await self._sessions.row(session_id)
        held = self._actors.actor(session_id).hold_elicitation(params)
        await held.started.wait()
        if held.elicitation_id is None:
            raise Conflict("the session was stopped before the elicitation was published")
        return held.elicitation_id

    async def evaluate_policy(self, session_id: str, event: Any, *, ask: Ask) -> Verdict:
        """See :meth:`Runtime.evaluate_policy`; an ASK is put to the person with ``ask``."""
        if not isinstance(event, PolicyEvent):
            event = parse_policy_event(event)
        row, spec = await self._specs.session_spec(session_id)
        verdict = await self._specs.policy_engine(row, spec).evaluate(event)
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
        answer = await ask(row, params)
        return verdict.resolve(answer.accepted, event)
