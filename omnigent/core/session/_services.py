"""What a session actor stands on: :class:`ActorServices`, built once by the runtime.

An actor (:class:`~._actor.SessionActor`) builds nothing itself and knows nothing of
the runtime above it. Everything it needs is given to it at construction, in one
frozen container shared by every actor of a runtime:

- the store, the event bus and the elicitations its turns write to;
- the :class:`~._history.HistoryCache` its turns read the history from;
- a :class:`SessionBuilder`, which builds what it runs (its tools, its harness, each
  turn's request, the watcher of its dispatches to child sessions) from one
  :class:`SessionBasis` a turn's start reads;
- :class:`ActorReports`, where it tells the runtime what happened (it left, a turn
  took messages, it has nothing left to do, a turn started or ended).

The two protocols are the only way up: the runtime implements them, and the session
package never imports it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

import attrs
import trio

from ...harnesses.base import Harness, TurnRequest
from ...model import Item, MessageItem, Prices
from ...observability import Metrics
from ...spec import AgentSpec
from ...stores import SessionRow, Store, TurnStart
from ..asking import Elicitations
from ..bus import EventBus
from ..work import BackgroundTasks, ChildWork, TurnOutcome
from ._history import HistoryCache

if TYPE_CHECKING:
    from ..tools.session import SessionTools
    from ._actor import SessionActor

__all__ = ["ActorReports", "ActorServices", "SessionBasis", "SessionBuilder"]


@attrs.frozen
class SessionBasis:
    """What a turn's start reads of its session, once: its row and the spec it runs.

    Read afresh at the start of every turn — a row kept from an earlier turn would miss
    a change made since (a ``model_override``, an update another server made) — and
    handed to everything that start builds (the tools, the harness, the request), so
    none of them reads the row again: a PostgreSQL call costs a turn's start far more
    than the read itself (issue 32). Only the parent it names may be relied on later:
    a session's parent never changes.
    """

    row: SessionRow
    spec: AgentSpec


class SessionBuilder(Protocol):
    """Builds what a session actor runs (implemented by the runtime)."""

    async def session_basis(
        self, session_id: str, *, follow: bool, read: TurnStart | None = None
    ) -> SessionBasis:
        """The session's row and spec as they are now (``follow``: a session that
        tracks its agent is moved to the agent's latest version first — done when an
        actor builds its tools); ``read``: the row as the turn starting just read it
        (:meth:`~omnigent.stores.Store.begin_turn`), not read again.

        Raises:
            OmnigentError: SessionNotFound, AgentNotFound, SpecUnresolved, a store's.
        """
        ...

    async def make_tools(
        self, basis: SessionBasis, tasks: BackgroundTasks, work: ChildWork
    ) -> SessionTools:
        """The session's tool set (built once per actor)."""
        ...

    async def make_harness(self, basis: SessionBasis, tools: SessionTools) -> tuple[Harness, str]:
        """The session's harness and its canonical name (built on its first turn)."""
        ...

    async def build_request(
        self,
        basis: SessionBasis,
        tools: SessionTools,
        response_id: str,
        turn_number: int,
        messages: list[MessageItem],
        history: list[Item],
        image_positions: list[int],
    ) -> TurnRequest:
        """One turn's request: ``history`` before it, ``messages`` its input,
        ``turn_number`` as the store counted it."""
        ...

    def child_work(
        self, session_id: str, nursery: trio.Nursery, on_inbox: Callable[[], None]
    ) -> ChildWork:
        """The watcher of the session's own dispatches to its children."""
        ...

    async def prices(self) -> Prices:
        """The configuration's ``prices`` table, as it is now (read for each turn)."""
        ...


class ActorReports(Protocol):
    """What a session actor tells the runtime (implemented by the runtime)."""

    def actor_left(self, actor: SessionActor) -> None:
        """The actor takes no more work (it decided to leave, or it ended)."""
        ...

    def messages_taken(self, item_ids: list[str], response_id: str) -> None:
        """A turn took these messages (``response_id`` ``""``: a stop dropped them)."""
        ...

    def session_settled(
        self, session_id: str, outcome: TurnOutcome | None, *, ended: bool = False
    ) -> None:
        """The session has nothing left to do after a turn (see ``core.work``)."""
        ...

    async def turn_changed(self, session_id: str, basis: SessionBasis | None) -> None:
        """A turn started or ended (a parent lists its children's state).

        ``basis``: what a turn of this actor read at its start (``None``: none has
        yet). A session's parent never changes, so its row says whether there is a
        parent to tell at all: a root session's turns cost no read here.
        """
        ...


@attrs.frozen(eq=False)
class ActorServices:
    """What every session actor of one runtime is given (see the module docstring)."""

    store: Store
    bus: EventBus
    elicitations: Elicitations
    histories: HistoryCache
    builder: SessionBuilder
    reports: ActorReports
    metrics: Metrics | None = None
