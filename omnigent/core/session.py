"""The session actor: a session's turns, message buffer and lifetime.

A :class:`SessionActor` exists only while its session has work. It runs as one task
in the runtime's nursery and owns a nursery for everything the session does (the
turn, and later background tool tasks and child work), so cancelling that nursery —
``stop`` — cancels all of it. When no message is pending and nothing runs in its
nursery, the actor leaves and the session holds no task at all.

Messages are persisted by the runtime before they reach :meth:`enqueue`. One that
arrives while a turn runs is *buffered*: the harness may take it as an injection
(:meth:`take_injections`); whatever is left starts a continuation turn.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

import attrs
import trio

from ..harnesses.base import Harness, TurnRequest
from ..model import MessageItem
from .turn import Turn, TurnServices

__all__ = ["SessionActor"]

log = logging.getLogger(__name__)


class SessionActor:
    """The live part of one session. Created and owned by the ``Runtime``.

    Args:
        session_id: the session.
        make_harness: builds the harness (and says its name) when a turn needs it.
        build_request: builds a turn's request from the messages it answers.
        services: store, bus and tools, shared with each turn.
        on_exit: called (synchronously) the moment the actor decides to leave.
        on_taken: told which turn (response id) took which messages; ``""`` for
            messages dropped by :meth:`stop`.
    """

    def __init__(
        self,
        session_id: str,
        *,
        make_harness: Callable[[], Awaitable[tuple[Harness, str]]],
        build_request: Callable[[str, list[MessageItem]], Awaitable[TurnRequest]],
        services: TurnServices,
        on_exit: Callable[[SessionActor], None],
        on_taken: Callable[[list[str], str], None] = lambda ids, response_id: None,
    ) -> None:
        self.session_id = session_id
        self.harness_name = "unknown"
        self._make_harness = make_harness
        self._build_request = build_request
        self._services = attrs.evolve(services, take_injections=self.take_injections)
        self._on_exit = on_exit
        self._on_taken = on_taken
        self._pending: list[MessageItem] = []
        self._harness: Harness | None = None
        self._turn: Turn | None = None
        self._nursery: trio.Nursery | None = None
        self._wakeup = trio.Event()
        self.leaving = False
        self.done = trio.Event()

    # -- called by the runtime -------------------------------------------------------

    @property
    def busy(self) -> bool:
        """Whether a turn is running."""
        return self._turn is not None

    def enqueue(self, message: MessageItem) -> str:
        """Hand a persisted user message to the session: ``accepted`` or ``buffered``."""
        self._pending.append(message)
        self._wakeup.set()
        return "buffered" if self._turn is not None else "accepted"

    def interrupt(self) -> bool:
        """Cancel the running turn (it ends ``cancelled``); False if none runs."""
        if self._turn is None:
            return False
        self._turn.scope.cancel()
        return True

    def stop(self) -> None:
        """Cancel everything the session runs and drop buffered messages."""
        dropped, self._pending = self._pending, []
        self._on_taken([m.id for m in dropped], "")
        if self._nursery is not None:
            self._nursery.cancel_scope.cancel()

    def pending_ids(self) -> set[str]:
        """Ids of buffered messages no turn has taken yet."""
        return {m.id for m in self._pending}

    async def take_injections(self) -> list[MessageItem]:
        """Give the running turn every buffered message (moved to the end of history)."""
        taken, self._pending = self._pending, []
        if taken and self._turn is not None:
            self._on_taken([m.id for m in taken], self._turn.response_id)
        if taken:
            await self._services.store.move_items_to_end(self.session_id, [m.id for m in taken])
        return taken

    # -- the actor ---------------------------------------------------------------------

    async def run(self) -> None:
        """Run turns while messages are pending; return once the session has no work.

        Cancellation: cancels the running turn (which still ends with a terminal
        status) and everything in the session's nursery; the harness is closed.
        """
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                while True:
                    if self._pending:
                        await self._run_turn()
                        continue
                    if not nursery.child_tasks:
                        # Decided synchronously: from here no message can reach us,
                        # the runtime starts a new actor for the next one.
                        self.leaving = True
                        self._on_exit(self)
                        break
                    self._wakeup = trio.Event()
                    await self._wakeup.wait()
        finally:
            if not self.leaving:
                self.leaving = True
                self._on_exit(self)
            try:
                await self._close_harness()
            finally:
                self.done.set()

    async def _run_turn(self) -> None:
        messages, self._pending = self._pending, []
        turn = Turn(self.session_id, self.harness_name, self._services)
        self._turn = turn
        self._on_taken([m.id for m in messages], turn.response_id)

        async def prepare() -> tuple[Harness, TurnRequest]:
            await self._services.store.move_items_to_end(self.session_id, [m.id for m in messages])
            request = await self._build_request(turn.response_id, messages)
            if self._harness is None:
                self._harness, self.harness_name = await self._make_harness()
                turn.harness_name = self.harness_name
            return self._harness, request

        try:
            await turn.run(prepare)
        finally:
            self._turn = None

    async def _close_harness(self) -> None:
        harness, self._harness = self._harness, None
        if harness is None:
            return
        with trio.move_on_after(5, shield=True):
            try:
                await harness.aclose()
            except Exception:
                log.warning("closing the harness of %s failed", self.session_id, exc_info=True)
