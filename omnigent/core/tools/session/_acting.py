"""Whose rights an orchestration tool acts with: the lesser of its agent's and its
senders'.

A session's tools act for its owner — but the words that made the agent call them may
be someone else's: a user the owner shared the session with sent a message, or sent
one to a session above it whose agent then dispatched work here. A tool must not do
for such a user what that user could not do themselves (issue 23, defect 7: a user
with ``edit`` had the agent grant them ``manage``, then deleted the owner's session).
So a tool acts with the *lowest* level among its session's **acting users** — its owner
and everyone who has sent a message into it or into a session above it
(:meth:`~._control.SessionControl.acting_users`) — on whatever session it touches, and
grants nothing above that level.

A refusal never tells a session that cannot be read from one that does not exist
(issue 23, defect 10): both are ``session_not_found`` (``agent_not_found`` for the agent
tools), as ``404`` is over HTTP.
"""

from __future__ import annotations

from ....stores import SessionRow
from ...asking import READ
from .._control import SessionControl

__all__ = ["acting_level", "lowest_level", "readable"]


async def lowest_level(control: SessionControl, users: frozenset[str], target: SessionRow) -> int:
    """The lowest level any of ``users`` has on ``target`` (0 none … 3 manage)."""
    return min([await control.access_level(target, user) for user in sorted(users)])


async def acting_level(control: SessionControl, caller: SessionRow, target: SessionRow) -> int:
    """The level a tool of ``caller`` has on ``target``: the lowest any of the caller's
    acting users has (0 none … 3 manage)."""
    return await lowest_level(control, await control.acting_users(caller), target)


async def readable(control: SessionControl, caller: SessionRow, target: SessionRow) -> bool:
    """Whether a tool of ``caller`` may read ``target`` (else it is answered as absent)."""
    return await acting_level(control, caller, target) >= READ
