"""The statuses of sessions and turns: :class:`SessionStatus` and :class:`TurnStatus`.

String enums: each member *is* its wire string (``SessionStatus.IDLE == "idle"``), so
events and snapshots keep the contract's values, and code compares against members
rather than spelling strings.

A session is ``launching``, ``running`` or ``waiting`` while a turn works, and ends
each turn ``idle``, ``failed`` or ``cancelled`` (its *terminal* statuses). A turn is
its response: ``in_progress`` while it runs, then ``completed``, ``failed`` or
``cancelled`` — and a turn that ends so leaves its session ``idle``, ``failed`` or
``cancelled`` (:meth:`TurnStatus.session_status`). A child session's work, as its
parent sees it (:class:`TaskStatus`), is ``launching`` until the child takes it, then
``in_progress``, then how it ended.
"""

from __future__ import annotations

import enum

__all__ = ["SessionStatus", "TaskStatus", "TurnStatus"]


class SessionStatus(enum.StrEnum):
    """A session's status (``session.status`` events, snapshots)."""

    LAUNCHING = "launching"
    RUNNING = "running"
    WAITING = "waiting"
    IDLE = "idle"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def terminal(self) -> bool:
        """Whether a turn ends with this status (``idle``, ``failed``, ``cancelled``)."""
        return self in _TERMINAL

    @property
    def active(self) -> bool:
        """Whether a turn works in this status (``launching``, ``running``, ``waiting``)."""
        return not self.terminal


class TurnStatus(enum.StrEnum):
    """A turn's status: its response's (``response.status``)."""

    IN_PROGRESS = "in_progress"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def ended(self) -> bool:
        """Whether the turn has ended (anything but ``in_progress``)."""
        return self is not TurnStatus.IN_PROGRESS

    def session_status(self) -> SessionStatus:
        """The terminal status a turn that ended so leaves its session in.

        Raises:
            ValueError: the turn has not ended.
        """
        if self is TurnStatus.IN_PROGRESS:
            raise ValueError("a turn in progress leaves its session no terminal status")
        return _SESSION_AFTER[self]


class TaskStatus(enum.StrEnum):
    """A child session's work as its parent sees it (``current_task_status``): the
    original omnigent's mapping of the child's status — ``launching`` → ``launching``,
    ``running``/``waiting`` → ``in_progress``, ``idle`` → ``completed``, ``failed`` →
    ``failed`` (and ``cancelled`` → ``cancelled``)."""

    LAUNCHING = "launching"
    IN_PROGRESS = "in_progress"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"


_TERMINAL = frozenset({SessionStatus.IDLE, SessionStatus.FAILED, SessionStatus.CANCELLED})
_SESSION_AFTER = {
    TurnStatus.COMPLETED: SessionStatus.IDLE,
    TurnStatus.FAILED: SessionStatus.FAILED,
    TurnStatus.CANCELLED: SessionStatus.CANCELLED,
}
