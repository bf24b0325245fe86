"""Who may do what with a session: owners, grants, and the public.

Levels are cumulative: ``1`` read, ``2`` edit (send messages, resolve elicitations,
interrupt, patch), ``3`` manage (share, delete). A session's creator owns it (level 3).
A grant gives one user a level on one session; the user ``__public__`` stands for
everyone and is read-only at most.

**Grants inherit down the tree from any ancestor.** A user's level on a session is the
highest level they hold on it *or on any session above it*: read on a session reads
its whole subtree, and the owner of any ancestor manages every session below it. One
rule, so that whatever a session shows about its descendants (child summaries,
mirrored elicitations) is something its readers may read directly; the store's
``list_sessions(viewer=…)`` filter applies the same rule.

The runtime answers :meth:`Permissions.level`; transports enforce it (HTTP answers
``404`` below read and ``403`` below the level a write needs).
"""

from __future__ import annotations

from typing import Any

import attrs

from ...errors import Conflict, InvalidInput, SessionNotFound
from ...stores import SessionRow, Store

__all__ = ["EDIT", "MANAGE", "NONE", "PUBLIC", "READ", "Grant", "Permissions"]

NONE, READ, EDIT, MANAGE = 0, 1, 2, 3
PUBLIC = "__public__"
_LEVELS = (READ, EDIT, MANAGE)


@attrs.frozen
class Grant:
    """One user's level on one session (``owner`` marks the session's creator)."""

    user_id: str
    level: int
    owner: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"user_id": self.user_id, "level": self.level, "owner": self.owner}


def check_level(level: Any, user_id: str, *, loc: str = "level") -> int:
    """A valid level for ``user_id``, else InvalidInput at ``loc``."""
    if isinstance(level, bool) or level not in _LEVELS:
        raise InvalidInput.at(loc, "must be 1 (read), 2 (edit) or 3 (manage)")
    if user_id == PUBLIC and level != READ:
        raise InvalidInput.at(loc, "Public access is limited to read-only (level 1)")
    return int(level)


def check_user(user_id: Any, *, loc: str = "user_id") -> str:
    if not isinstance(user_id, str) or not user_id.strip() or len(user_id) > 320:
        raise InvalidInput.at(loc, "must be a non-empty user id")
    return user_id


class Permissions:
    """Session access over the store. One per runtime."""

    def __init__(self, store: Store) -> None:
        self._store = store

    async def _row(self, session_id: str) -> SessionRow:
        row = await self._store.get_session(session_id)
        if row is None:
            raise SessionNotFound(session_id)
        return row

    async def lineage(self, row: SessionRow) -> list[SessionRow]:
        """The session and every ancestor still stored, nearest first."""
        rows = [row]
        if row.parent_session_id is None:
            return rows
        for ancestor_id in await self._store.ancestor_ids(row.id):
            ancestor = await self._store.get_session(ancestor_id)
            if ancestor is not None:
                rows.append(ancestor)
        return rows

    async def owners(self, row: SessionRow) -> set[str]:
        """Who manages the session by ownership: its creator and every ancestor's."""
        return {r.owner for r in await self.lineage(row)}

    async def level(self, row: SessionRow, user_id: str) -> int:
        """The highest level ``user_id`` has on ``row`` or on any session above it."""
        lineage = await self.lineage(row)
        if user_id in {r.owner for r in lineage}:
            return MANAGE
        grants = await self._store.grants_for({r.id for r in lineage}, {user_id, PUBLIC})
        best = NONE
        for grantee, level in grants:
            best = max(best, min(level, READ) if grantee == PUBLIC else level)
        return best

    async def grant(self, session_id: str, user_id: str, level: Any) -> Grant:
        """Give ``user_id`` ``level`` on the session (replacing an earlier grant).

        Raises:
            SessionNotFound; InvalidInput at ``user_id`` or ``level``; Conflict when
            ``user_id`` owns the session (or one above it): an owner's level cannot
            change.
        """
        user_id = check_user(user_id)
        level = check_level(level, user_id)
        row = await self._row(session_id)
        await self._refuse_owner(row, user_id)
        await self._store.put_grant(session_id, user_id, level)
        return Grant(user_id, level)

    async def revoke(self, session_id: str, user_id: str) -> bool:
        """Remove a grant; False if there was none.

        Raises:
            SessionNotFound; Conflict when ``user_id`` owns the session (or one above it).
        """
        row = await self._row(session_id)
        await self._refuse_owner(row, user_id)
        return await self._store.delete_grant(session_id, user_id)

    async def list(self, session_id: str) -> list[Grant]:
        """The owner, then every grant on the session itself. Raises SessionNotFound."""
        row = await self._row(session_id)
        grants = [Grant(row.owner, MANAGE, owner=True)]
        for user_id, level in await self._store.grants_for({row.id}, None):
            grants.append(Grant(user_id, level))
        return grants

    async def _refuse_owner(self, row: SessionRow, user_id: str) -> None:
        """A grant to an owner would change nothing (ownership wins) yet be listed; a
        revocation would report success while the owner kept manage."""
        if user_id in await self.owners(row):
            raise Conflict(
                f"{user_id!r} owns session {row.id!r} (or a session above it); an "
                "owner's level cannot be changed or revoked"
            )
