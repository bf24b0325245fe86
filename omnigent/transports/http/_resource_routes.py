"""Routes for a session's live resources (its terminals) and a terminal's screen.

``GET /sessions/{id}/resources`` lists the running terminals as ``{id, type,
metadata}``; ``GET /sessions/{id}/resources/{rid}/screen?scrollback=N`` answers what
one shows now. Both only read, so both need the read level; an id that names no
running terminal is ``404 resource_not_found``.
"""

from __future__ import annotations

from typing import Any

from quart import Blueprint

from ...tools.terminals import HISTORY_LIMIT
from ._access import READ, session_access
from ._params import query_int, state

__all__ = ["blueprint"]

blueprint = Blueprint("omnigent_resources", __name__)


@blueprint.get("/sessions/<session_id>/resources")
async def list_resources(session_id: str) -> dict[str, Any]:
    from ._answers import ResourceList  # imported by the first answer: see _answers

    await session_access(session_id, READ)
    resources = await state().runtime.list_resources(session_id)
    return ResourceList(tuple(resources)).to_dict()


@blueprint.get("/sessions/<session_id>/resources/<resource_id>/screen")
async def resource_screen(session_id: str, resource_id: str) -> dict[str, Any]:
    await session_access(session_id, READ)
    scrollback = query_int("scrollback", low=0, high=HISTORY_LIMIT) or 0
    screen = await state().runtime.read_resource_screen(
        session_id, resource_id, scrollback=scrollback
    )
    return screen.to_dict()
