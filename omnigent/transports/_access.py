"""Who the caller is, and whether they may touch a session: the HTTP side of sharing.

With ``--auth none`` everyone is ``local`` and may do everything. With ``--auth
header`` the caller is the ``X-Forwarded-Email`` header and every session route
checks the caller's level (:mod:`omnigent.core.permissions`): below read the session
does not exist for them (``404``), below what the route needs it is ``403``.
"""

from __future__ import annotations

from ..core.permissions import EDIT, MANAGE, READ
from ..errors import Forbidden, SessionNotFound
from ..stores.base import SessionRow
from ._params import owner, state

__all__ = ["EDIT", "MANAGE", "READ", "session_access"]

_VERBS = {READ: "read", EDIT: "change", MANAGE: "manage"}


async def session_access(session_id: str, need: int) -> SessionRow:
    """The session's row, if the caller may act on it at level ``need``.

    Raises:
        Unauthorized (401) without an identity under ``--auth header``;
        SessionNotFound (404) when the session is missing or the caller cannot read
        it; Forbidden (403) when they can read it but ``need`` is higher.
    """
    app = state()
    caller = owner()
    row = await app.runtime.session_row(session_id)
    if app.auth == "none":
        return row
    level = await app.runtime.permissions.level(row, caller)
    if level < READ:
        raise SessionNotFound(session_id)
    if level < need:
        raise Forbidden(f"you may read session {session_id!r} but not {_VERBS[need]} it")
    return row
