"""The sharing fence for mirrored data: what a viewer may see about *other* sessions.

A session's views carry data about other sessions: its stream has
``session.child_session.updated`` (a child's title, labels and a preview of its last
answer) and the elicitations of its descendants mirrored with
``target_session_id``; its snapshot lists those elicitations as pending; the approval
page and ``get_elicitation`` show one of them. The rule, applied here for every
transport (HTTP, WebSocket, ACP all call the same runtime methods with a ``viewer``):
**data about another session is shown to a viewer only if that viewer may read that
session directly** — the same check a direct read makes (see
:mod:`._permissions`: grants inherit down the tree, so a reader of a session normally
reads every descendant, and this fence is what keeps that true if a descendant is
deleted, or a rule ever narrows).

``viewer=None`` means "nobody's limits" (the library, ``--auth none``): everything is
shown.

Cancellation: the checks only read the store; a cancelled check changed nothing.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

from ...errors import SessionNotFound
from ...model import ChildSessionUpdated, ElicitationRequest, ElicitationResolved, Event
from ...stores import SessionRow
from ._permissions import READ, Permissions

__all__ = ["EventFilter", "Visibility", "subject_of"]

SessionRowOf = Callable[[str], Awaitable[SessionRow]]
"""A session's row by id; raises ``SessionNotFound`` for a missing session."""

EventFilter = Callable[[Event], Awaitable[bool]]
"""Whether a viewer may be shown one event of a session they read."""


def subject_of(event: Event) -> str | None:
    """The *other* session an event is about, if any.

    A child summary is about the child; a mirrored elicitation (request or resolved
    signal) is about the session that owns it. Events about the session itself (and
    the owner's own copy of an elicitation) have no other subject.
    """
    if isinstance(event, ChildSessionUpdated):
        return event.child.id
    if isinstance(event, ElicitationRequest):
        return event.params.target_session_id
    if isinstance(event, ElicitationResolved):
        return event.target_session_id
    return None


class Visibility:
    """Answers "may this viewer read that session" for the views. One per runtime."""

    def __init__(self, permissions: Permissions, row_of: SessionRowOf) -> None:
        self._permissions = permissions
        self._row_of = row_of

    async def may_read(self, session_id: str, viewer: str | None) -> bool:
        """Whether ``viewer`` may read ``session_id`` (a missing session: no)."""
        if viewer is None:
            return True
        try:
            row = await self._row_of(session_id)
        except SessionNotFound:
            return False
        return await self._permissions.level(row, viewer) >= READ

    def event_filter(self, viewer: str | None) -> EventFilter | None:
        """A filter for one subscription's events (``None``: show everything).

        Answers are remembered for the life of the filter (one subscription), so a
        busy child costs one check, not one per update.
        """
        if viewer is None:
            return None
        known: dict[str, bool] = {}

        async def admits(event: Event) -> bool:
            subject = subject_of(event)
            if subject is None:
                return True
            if subject not in known:
                known[subject] = await self.may_read(subject, viewer)
            return known[subject]

        return admits

    async def requests(
        self, requests: Sequence[ElicitationRequest], viewer: str | None
    ) -> tuple[ElicitationRequest, ...]:
        """The pending requests ``viewer`` may be shown, in order."""
        if viewer is None:
            return tuple(requests)
        admits = self.event_filter(viewer)
        assert admits is not None
        return tuple([r for r in requests if await admits(r)])
