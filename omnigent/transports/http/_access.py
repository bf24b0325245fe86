"""Who the caller is, and what they may touch: the HTTP side of sharing.

With ``--auth none`` everyone is ``local`` and may do everything. With ``--auth
header`` the caller is the ``X-Forwarded-Email`` header and:

- every session route checks the caller's level (``Runtime.access_level``):
  below read the session does not exist for them (``404``), below what the route needs
  it is ``403``;
- session lists hold only what the caller may read (:func:`viewer`);
- a file is its uploader's alone: to anyone else it does not exist (``404``), and an
  ``input_image`` block naming it is refused as an unknown file (``422``).
"""

from __future__ import annotations

from ...core import EDIT, MANAGE, READ, FileInfo
from ...errors import Forbidden, SessionNotFound
from ._params import owner, state

__all__ = [
    "EDIT",
    "MANAGE",
    "READ",
    "file_access",
    "session_access",
    "viewer",
]

_VERBS = {READ: "read", EDIT: "change", MANAGE: "manage"}


async def session_access(session_id: str, need: int) -> None:
    """Refuse the request unless the caller may act on the session at level ``need``.

    Raises:
        Unauthorized (401) without an identity under ``--auth header``;
        SessionNotFound (404) when the session is missing or the caller cannot read
        it; Forbidden (403) when they can read it but ``need`` is higher.
    """
    app = state()
    level = await app.runtime.access_level(session_id, owner())  # SessionNotFound
    if app.auth == "none":
        return
    if level < READ:
        raise SessionNotFound(session_id)
    if level < need:
        raise Forbidden(f"you may read session {session_id!r} but not {_VERBS[need]} it")


def viewer() -> str | None:
    """Whose access limits what the caller sees: the caller, or nobody's (``none``).

    Session lists hold only what this user may read, and ``input_image`` blocks may
    name only files this user uploaded.
    """
    return None if state().auth == "none" else owner()


async def file_access(file_id: str) -> FileInfo:
    """The file's record, if the caller may see it (its owner; anyone under ``none``).

    Raises:
        FileNotFound (404) when the file is missing or belongs to someone else.
    """
    return await state().runtime.get_file(file_id, viewer=viewer())
