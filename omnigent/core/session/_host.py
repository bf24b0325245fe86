"""What a session actor needs from its runtime: the :class:`SessionHost` protocol.

An actor (:class:`~._actor.SessionActor`) builds nothing itself: its harness, its
tools, its child-work watcher and its turn requests come from the runtime, and it tells
the runtime when it leaves, when a turn takes messages and when it settles.
:class:`~._host.ActorHost` implements this protocol. It is a module of its own so that
the actor and its mixins (:mod:`._held`) share one statement of that contract
without importing each other.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

import trio

from ...harnesses.base import Harness, TurnRequest
from ...model import Item, MessageItem
from ..tools import SessionTools
from ..work import BackgroundTasks, ChildWork, TurnOutcome
from ._history import HistoryCache
from ._turn import TurnServices

if TYPE_CHECKING:
    from ._actor import SessionActor

__all__ = ["SessionHost"]


class SessionHost(Protocol):
    """What an actor needs from its runtime."""

    services: TurnServices

    async def make_harness(self, session_id: str, tools: SessionTools) -> tuple[Harness, str]: ...

    async def make_tools(
        self, session_id: str, tasks: BackgroundTasks, work: ChildWork
    ) -> SessionTools: ...

    def child_work(
        self, session_id: str, nursery: trio.Nursery, on_inbox: Callable[[], None]
    ) -> ChildWork:
        """The watcher of the session's own dispatches to its children."""
        ...

    def session_settled(
        self, session_id: str, outcome: TurnOutcome | None, *, ended: bool = False
    ) -> None:
        """The session has nothing left to do after a turn (see ``_subagents``)."""
        ...

    histories: HistoryCache

    async def build_request(
        self,
        actor: SessionActor,
        response_id: str,
        messages: list[MessageItem],
        history: list[Item],
        image_positions: list[int],
    ) -> TurnRequest: ...

    def actor_left(self, actor: SessionActor) -> None: ...

    def messages_taken(self, item_ids: list[str], response_id: str) -> None: ...

    async def turn_changed(self, session_id: str) -> None:
        """A turn started or ended (a parent lists its children's state)."""
        ...
