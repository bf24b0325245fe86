"""Asking a person from outside a turn: held elicitations and policy evaluation.

Plain functions of a runtime behind :meth:`Runtime.hold_elicitation` and
:meth:`Runtime.evaluate_policy`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..errors import Conflict, RuntimeClosed
from ..model import ElicitationParams
from ._policies import PolicyEvent, Verdict, parse_policy_event

if TYPE_CHECKING:
    from ._runtime import Runtime

__all__ = ["evaluate_policy", "hold_elicitation"]


async def hold_elicitation(rt: Runtime, session_id: str, params: ElicitationParams) -> str:
    """See :meth:`Runtime.hold_elicitation`."""
    if rt.closing:
        raise RuntimeClosed()
    await rt.session_row(session_id)
    held = rt.host.actor(session_id).hold_elicitation(params)
    await held.started.wait()
    if held.elicitation_id is None:
        raise Conflict("the session was stopped before the elicitation was published")
    return held.elicitation_id


async def evaluate_policy(rt: Runtime, session_id: str, event: Any) -> Verdict:
    """See :meth:`Runtime.evaluate_policy`."""
    if not isinstance(event, PolicyEvent):
        event = parse_policy_event(event)
    row, spec = await rt.host.session_spec(session_id)
    verdict = await rt.host.policy_engine(row, spec).evaluate(event)
    if verdict.action != "ASK":
        return verdict
    tool_input = event.data.get("tool_input")
    params = rt.elicitations.params(
        verdict.elicitation_message,
        "tool_call",
        policy_name=verdict.policy_name,
        tool_name=event.tool_name,
        tool_input=dict(tool_input) if isinstance(tool_input, Mapping) else None,
    )
    answer = await rt.elicitations.ask(session_id, params, mark_waiting=False)
    return verdict.resolve(answer.accepted, event)
