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

import attrs
from quart import Blueprint

from ...model import wire_schema
from ._access import EDIT, MANAGE, READ, session_access
from ._params import state, structured_body

__all__ = ["GrantBody", "blueprint"]

blueprint = Blueprint("omnigent_permissions", __name__)


@attrs.frozen
class GrantBody:
    """``PUT …/permissions``: the core checks ``user_id`` and ``level`` (422 at each).

    ``__public__`` stands for everyone and takes read (1) only.
    """

    user_id: str = attrs.field(metadata=wire_schema({"minLength": 1, "maxLength": 320}))
    level: int = attrs.field(
        metadata=wire_schema(
            {"enum": [READ, EDIT, MANAGE], "description": "1 read, 2 edit, 3 manage"}
        )
    )


@blueprint.get("/sessions/<session_id>/permissions")
async def list_permissions(session_id: str) -> dict[str, Any]:
    from ._answers import GrantList  # imported by the first answer: see _answers

    await session_access(session_id, READ)
    grants = await state().runtime.list_grants(session_id)
    return GrantList(tuple(grants)).to_dict()


@blueprint.put("/sessions/<session_id>/permissions")
async def put_permission(session_id: str) -> dict[str, Any]:
    await session_access(session_id, MANAGE)
    body = await structured_body(GrantBody)
    grant = await state().runtime.grant(session_id, body.user_id, body.level)
    return grant.to_dict()


@blueprint.delete("/sessions/<session_id>/permissions/<user_id>")
async def delete_permission(session_id: str, user_id: str) -> dict[str, Any]:
    from ._answers import GrantRevoked  # imported by the first answer: see _answers

    await session_access(session_id, MANAGE)
    deleted = await state().runtime.revoke(session_id, user_id)
    return GrantRevoked(user_id, deleted).to_dict()
