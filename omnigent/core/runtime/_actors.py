"""Starting session actors, and what they report: :class:`Actors`.

:class:`Actors` runs every session actor of a runtime in the runtime's work nursery,
each behind an error boundary and holding a tenure on its session's tree, and
implements :class:`~omnigent.core.session.ActorReports` — what the actors tell the
runtime: that one left (it is removed from :class:`~._live.LiveSessions`), that a turn
took messages (open turn streams and sub-agent dispatches learn which turn answers
them), that a session has nothing left to do (its dispatch settles), and that a turn
started or ended (its parent is told).

Every actor is given the same :class:`~omnigent.core.session.ActorServices`, built
here once from what the runtime passes in.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

import trio

from ..._cancellation import only_exceptions, split_cancellation
from ...errors import RuntimeClosed, SessionElsewhere, SessionNotFound
from ...observability import Metrics
from ...stores import Store
from ..asking import Elicitations
from ..bus import EventBus
from ..cluster import Ownership, Tenure
from ..session import ActorServices, HistoryCache, SessionActor, SessionBasis, SessionBuilder
from ..work import SubAgents, TurnOutcome
from ._live import LiveSessions

__all__ = ["Actors"]

log = logging.getLogger(__name__)


class Actors:
    """Starts session actors and hears their reports. Owned by the ``Runtime``.

    Args:
        live: the runtime's live work (where actors are kept while they have work).
        nursery: the runtime's work nursery (every actor runs in it).
        ownership: where session trees are held (an actor keeps a tenure on its own).
        store, bus, elicitations, histories, builder: what every actor stands on.
        subagents: the dispatches watched (told which turn took their message, and
            when their child settled).
        announce: tells a session's parent that the session changed.
        metrics: where turns are counted (None: nowhere).
    """

    def __init__(
        self,
        *,
        live: LiveSessions,
        nursery: trio.Nursery,
        ownership: Ownership,
        store: Store,
        bus: EventBus,
        elicitations: Elicitations,
        histories: HistoryCache,
        builder: SessionBuilder,
        subagents: SubAgents,
        announce: Callable[[str], Awaitable[None]],
        metrics: Metrics | None = None,
    ) -> None:
        self._live = live
        self._nursery = nursery
        self._ownership = ownership
        self._subagents = subagents
        self._announce = announce
        # Sessions someone waits on to settle (Runtime.wait_settled): set, then dropped.
        self._settled_waiters: dict[str, trio.Event] = {}
        self._services = ActorServices(
            store=store,
            bus=bus,
            elicitations=elicitations,
            histories=histories,
            builder=builder,
            reports=self,
            metrics=metrics,
        )

    @property
    def task_count(self) -> int:
        """Tasks in the work nursery (one per running actor)."""
        return len(self._nursery.child_tasks)

    def actor(self, session_id: str) -> SessionActor:
        """The session's actor, started now if the session had no work.

        Synchronous: no checkpoint, so whatever the caller does next (an enqueue)
        reaches this actor before it can decide to leave. A new actor starts after a
        predecessor still winding down (stopped, or leaving), so one session's work
        never runs twice at once.

        A new actor takes a tenure on its session's tree (see
        :mod:`omnigent.core.cluster._ownership`): the caller holds the tree here already
        (the runtime routes work to where it is).

        Raises:
            RuntimeClosed: the runtime is shutting down. SessionNotFound: the session
            is being deleted. SessionElsewhere: another server holds the tree.
        """
        live = self._live
        if live.closing:
            raise RuntimeClosed()
        if session_id in live.deleting:
            raise SessionNotFound(session_id)
        actor = live.actors.get(session_id)
        if actor is not None and not actor.leaving:
            return actor
        tenure = self._ownership.retain(session_id)
        if tenure is None:
            raise SessionElsewhere(session_id, "another server")
        actor = SessionActor(session_id, self._services, predecessor=actor)
        live.actors[session_id] = actor
        self._nursery.start_soon(self._run, actor, tenure, name=f"session {session_id}")
        return actor

    async def _run(self, actor: SessionActor, tenure: Tenure) -> None:
        """An actor, behind an error boundary: one session's bug is not every session's.

        A turn ends itself (with ``failed``) on any error; what could still escape is
        the actor's own plumbing. It is logged, and the runtime goes on. The actor's
        tenure on its tree is given back when it is done.
        """
        try:
            await actor.run()
        except BaseException as exc:
            cancel, failure = split_cancellation(exc)
            if failure is None or not only_exceptions(failure):
                raise
            log.exception("session %s failed outside a turn", actor.session_id, exc_info=failure)
            if cancel is not None:
                raise cancel from None
        finally:
            tenure.release()

    # -- ActorReports ----------------------------------------------------------------------

    def actor_left(self, actor: SessionActor) -> None:
        actors = self._live.actors
        if actors.get(actor.session_id) is actor:
            del actors[actor.session_id]

    def messages_taken(self, item_ids: list[str], response_id: str) -> None:
        watched = self._live.watched
        for item_id in item_ids:
            if item_id in watched:
                watched[item_id] = response_id
        self._subagents.messages_taken(item_ids, response_id)

    def session_settled(
        self, session_id: str, outcome: TurnOutcome | None, *, ended: bool = False
    ) -> None:
        self._subagents.session_settled(session_id, outcome, ended=ended)
        waiter = self._settled_waiters.pop(session_id, None)
        if waiter is not None:
            waiter.set()

    def settled_waiter(self, session_id: str) -> trio.Event | None:
        """An event set when the session next settles here (``None``: it has nothing
        left to do now: no actor, or one with no turn and nothing waiting for one).

        Synchronous, so nothing can settle between the look and the wait. At most one
        event per session, dropped once set: the map never outgrows the live actors.
        """
        actor = self._live.actors.get(session_id)
        if actor is None or actor.settled:
            return None
        return self._settled_waiters.setdefault(session_id, trio.Event())

    async def turn_changed(self, session_id: str, basis: SessionBasis | None) -> None:
        if basis is not None and basis.row.parent_session_id is None:
            return  # a root session (its parent never changes): nobody to tell
        await self._announce(session_id)
