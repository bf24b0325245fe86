"""Asking people, and who may see what: elicitations, permissions, visibility.

:class:`Elicitations` parks a waiter until a person answers, mirrors the question to the
session's ancestors and resolves it exactly once; :class:`Permissions` holds owners and
grants (read, edit, manage, ``__public__``) inherited down a session tree;
:class:`Visibility` is the sharing fence for data about *other* sessions in a view.
"""

from ._elicitations import (
    ACTIONS,
    MAX_STANDING,
    MAX_STANDING_PER_SESSION,
    Elicitations,
    Resolution,
    check_content,
    wants_content,
)
from ._permissions import EDIT, MANAGE, NONE, PUBLIC, READ, Grant, Permissions, check_level
from ._visibility import EventFilter, Visibility

__all__ = [
    "ACTIONS",
    "EDIT",
    "MANAGE",
    "MAX_STANDING",
    "MAX_STANDING_PER_SESSION",
    "NONE",
    "PUBLIC",
    "READ",
    "Elicitations",
    "EventFilter",
    "Grant",
    "Permissions",
    "Resolution",
    "Visibility",
    "check_content",
    "check_level",
    "elicitation_params",
    "wants_content",
]
