"""Which sessions have live work in this process: :class:`LiveSessions`.

The state every part of the runtime reads about live work, and nothing else: the
actors of sessions that have work (an actor removes itself the moment it decides to
leave), the sessions being deleted (no new work may start on them), whether the
runtime is closing (no new work at all), and the messages open turn streams wait on.
It depends on nothing, so the parts that read it (the session views, messages, stops)
and the part that starts actors (:class:`~._actors.Actors`) can all be built on it
without knowing each other.
"""

from __future__ import annotations

from ...model import Resource
from ..session import SessionActor
from ..work import SessionTerminals

__all__ = ["LiveSessions"]


class LiveSessions:
    """The live work of one runtime, by session. Owned by the ``Runtime``."""

    def __init__(self) -> None:
        self.actors: dict[str, SessionActor] = {}
        # Sessions being deleted: no new work may start on them.
        self.deleting: set[str] = set()
        # The runtime began shutting down: no new work may start at all.
        self.closing = False
        # Messages an open turn stream waits on: item id -> the response id of the
        # turn that took it ("" when a stop dropped it). Entries live with the stream.
        self.watched: dict[str, str | None] = {}

    def actor(self, session_id: str) -> SessionActor | None:
        """The session's actor, if it has one (it may be leaving)."""
        return self.actors.get(session_id)

    def busy(self, session_id: str) -> bool:
        """Whether a turn of the session is running here."""
        actor = self.actors.get(session_id)
        return actor is not None and actor.busy

    def waiting_messages(self, session_id: str) -> int:
        """How many messages wait for the session's running turn (0 without one)."""
        actor = self.actors.get(session_id)
        return 0 if actor is None or actor.leaving else actor.pending_count

    def terminals_of(self, session_id: str) -> SessionTerminals | None:
        """The live terminals of the session's actor (none without an actor or terminals)."""
        actor = self.actors.get(session_id)
        tools = actor.tools if actor is not None else None
        return tools.terminals if tools is not None else None

    def resources_of(self, session_id: str) -> list[Resource]:
        """The session's live resources: its running terminals, in launch order."""
        terminals = self.terminals_of(session_id)
        return [] if terminals is None else terminals.resources()

    def stop(self, session_ids: set[str]) -> None:
        """Cancel the work of these sessions at once (their tree was lost to another server)."""
        for session_id in session_ids:
            actor = self.actors.get(session_id)
            if actor is not None:
                actor.stop()
