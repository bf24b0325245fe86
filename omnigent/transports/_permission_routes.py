"""Sharing a session: ``/v1/sessions/{id}/permissions``.

Reading the grants needs read; changing them needs manage. A grant on a root session
reaches every session below it (:mod:`omnigent.core._permissions`). The owners of a
session (its creator, and the creator of its root) hold manage by ownership, not by a
grant: changing or revoking their level is a ``409 conflict``, never a silent no-op.
Revoking a grant that does not exist answers ``200`` with ``deleted: false``, so a
retried ``DELETE`` is harmless.
"""

from __future__ import annotations

from typing import Any

import attrs
from quart import Blueprint

from ..errors import Conflict
from ..stores import SessionRow
from ._access import MANAGE, READ, session_access
from ._params import state, structured_body

__all__ = ["GrantBody", "blueprint"]

blueprint = Blueprint("omnigent_permissions", __name__)


@attrs.frozen
class GrantBody:
    """``PUT …/permissions``: the core checks ``user_id`` and ``level`` (422 at each)."""

    user_id: str
    level: int


@blueprint.get("/sessions/<session_id>/permissions")
async def list_permissions(session_id: str) -> dict[str, Any]:
    row = await session_access(session_id, READ)
    grants = await state().runtime.permissions.list(row)
    return {"object": "list", "data": [g.to_dict() for g in grants]}


@blueprint.put("/sessions/<session_id>/permissions")
async def put_permission(session_id: str) -> dict[str, Any]:
    row = await session_access(session_id, MANAGE)
    body = await structured_body(GrantBody)
    await _refuse_owner(row, body.user_id)
    grant = await state().runtime.permissions.grant(session_id, body.user_id, body.level)
    return grant.to_dict()


@blueprint.delete("/sessions/<session_id>/permissions/<user_id>")
async def delete_permission(session_id: str, user_id: str) -> dict[str, Any]:
    row = await session_access(session_id, MANAGE)
    await _refuse_owner(row, user_id)
    deleted = await state().runtime.permissions.revoke(session_id, user_id)
    return {"user_id": user_id, "deleted": deleted}


async def _refuse_owner(row: SessionRow, user_id: str) -> None:
    """Conflict when ``user_id`` owns the session or its root.

    A grant to an owner would change nothing (ownership wins) yet be listed; a
    revocation would report success while the owner kept manage.
    """
    owners = {row.owner}
    if row.root_session_id != row.id:
        owners.add((await state().runtime.session_row(row.root_session_id)).owner)
    if user_id in owners:
        raise Conflict(
            f"{user_id!r} owns session {row.id!r} (or its root); an owner's level "
            "cannot be changed or revoked"
        )
