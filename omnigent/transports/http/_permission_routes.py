"""Sharing a session: ``/v1/sessions/{id}/permissions``.

Reading the grants needs read; changing them needs manage. A grant on a root session
reaches every session below it (:mod:`omnigent.core.asking._permissions`). The owners of a
session (its creator, and the creator of its root) hold manage by ownership, not by a
grant: changing or revoking their level is a ``409 conflict``, never a silent no-op.
Revoking a grant that does not exist answers ``200`` with ``deleted: false``, so a
retried ``DELETE`` is harmless.
"""

from __future__ import annotations

from typing import Any

from quart import Blueprint

from ._access import MANAGE, READ, session_access
from ._params import state, structured_body

__all__ = ["blueprint"]

blueprint = Blueprint("omnigent_permissions", __name__)


@blueprint.get("/sessions/<session_id>/permissions")
async def list_permissions(session_id: str) -> dict[str, Any]:
    from ._answers import GrantList  # imported by the first answer: see _answers

    await session_access(session_id, READ)
    grants = await state().runtime.list_grants(session_id)
    return GrantList(tuple(grants)).to_dict()


@blueprint.put("/sessions/<session_id>/permissions")
async def put_permission(session_id: str) -> dict[str, Any]:
    await session_access(session_id, MANAGE)
    from ._bodies import GrantBody  # the first request's: see _bodies

    body = await structured_body(GrantBody)
    grant = await state().runtime.grant(session_id, body.user_id, body.level)
    return grant.to_dict()


@blueprint.delete("/sessions/<session_id>/permissions/<user_id>")
async def delete_permission(session_id: str, user_id: str) -> dict[str, Any]:
    from ._answers import GrantRevoked  # imported by the first answer: see _answers

    await session_access(session_id, MANAGE)
    deleted = await state().runtime.revoke(session_id, user_id)
    return GrantRevoked(user_id, deleted).to_dict()
