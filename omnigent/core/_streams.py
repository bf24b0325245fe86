"""A message and the events of the turn that answers it (``?stream=true``).

The runtime keeps, per open stream, which turn took the message (``host.watched``):
the stream ends with that turn's terminal ``response.*`` event, or with the session's
terminal status when a stop dropped the message before any turn took it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from ..model import (
    TERMINAL_STATUSES,
    Event,
    ResponseCancelled,
    ResponseCompleted,
    ResponseFailed,
    SessionStatus,
)
from ._bus import Subscription
from ._records import MessageAccepted

if TYPE_CHECKING:
    from ._runtime import Runtime

__all__ = ["open_turn_stream"]


@asynccontextmanager
async def open_turn_stream(
    rt: Runtime, session_id: str, content: str | Sequence[Any], role: str
) -> AsyncIterator[tuple[MessageAccepted, AsyncIterator[Event]]]:
    """See :meth:`Runtime.open_turn_stream`."""
    async with rt.subscribe(session_id, after=None) as subscription:
        item = await rt.accept_message(session_id, content, role)
        rt.host.watched[item.id] = None
        try:
            status = rt.host.actor(session_id).enqueue(item)
            accepted = MessageAccepted(status, item.id)  # type: ignore[arg-type]
            yield accepted, _until_answered(rt, subscription, item.id)
        finally:
            del rt.host.watched[item.id]


async def _until_answered(
    rt: Runtime, subscription: Subscription, item_id: str
) -> AsyncIterator[Event]:
    async for event in subscription:
        yield event
        if _ends_answer(event, rt.host.watched.get(item_id)):
            return


def _ends_answer(event: Event, handled_by: str | None) -> bool:
    """Whether ``event`` ends the stream of a message handled by ``handled_by``.

    ``handled_by`` is the answering turn's response id, ``""`` if a stop dropped the
    message, ``None`` while no turn has taken it yet.
    """
    if isinstance(event, ResponseCompleted | ResponseFailed | ResponseCancelled):
        return handled_by == event.response.id
    if isinstance(event, SessionStatus) and event.status in TERMINAL_STATUSES:
        return handled_by == ""
    return False
