"""The session actor: a session's turns, message buffer, background work and lifetime.

A :class:`SessionActor` exists only while its session has work. It runs as one task
in the runtime's nursery and owns a nursery for everything the session does — the
turn, background tool tasks, open terminals — so cancelling that nursery (``stop``)
cancels all of it. When no message is pending and nothing runs in its nursery, the
actor leaves and the session holds no task at all (a session with an open terminal
keeps its actor until the terminal ends).

Messages are persisted by the runtime before they reach :meth:`enqueue`. One that
arrives while a turn runs is *buffered*: the harness may take it as an injection
(:meth:`take_injections`); whatever is left starts a continuation turn. When a
background task delivers to the inbox and no turn is running, the actor drains the
inbox into a message and runs a turn for it, so an orchestrator sees results without a
user prompt.

An actor is given everything it stands on at construction (:class:`~._services.ActorServices`,
one frozen container per runtime) and owns the work it holds for callers outside its
turns (:class:`~._held.HeldWork`). Its life is one :class:`ActorState` at a time::

    waiting ──► running ──► leaving ──► done
       └────────────┴──► stopped ──┘

``waiting`` until its predecessor (an actor of the same session that was leaving) has
ended; ``leaving`` once it decided, synchronously, that it has no work left, and
``stopped`` once a stop cancelled its nursery — from either of those it takes no new
work (the runtime starts a successor); ``done`` when it has ended.
"""

from __future__ import annotations

import enum
import logging
from typing import TYPE_CHECKING

import trio

from ...errors import Conflict, SessionNotFound
from ...harnesses.base import Harness, ToolSchema, TurnRequest
from ...model import ElicitationParams, InputText, Item, MessageItem, Usage, unstructure
from ...observability import Carrier, carrier
from ..work import BackgroundTasks, ChildWork, HeldToolCall, RecordedGroups, TurnOutcome
from ._held import HeldElicitation, HeldWork
from ._history import History
from ._services import ActorServices, SessionBasis
from ._turn import Turn
from ._usage import TurnUsage

if TYPE_CHECKING:
    from ..tools.session import SessionTools

__all__ = ["ActorState", "SessionActor"]

log = logging.getLogger(__name__)


class ActorState(enum.Enum):
    """Where a session actor is in its life (see the module docstring)."""

    WAITING = "waiting"
    RUNNING = "running"
    LEAVING = "leaving"
    STOPPED = "stopped"
    DONE = "done"


class SessionActor:
    """The live part of one session. Created and owned by the runtime."""

    def __init__(
        self,
        session_id: str,
        services: ActorServices,
        *,
        predecessor: SessionActor | None = None,
    ) -> None:
        self.session_id = session_id
        self.state = ActorState.WAITING
        self._predecessor = predecessor
        self.harness_name = "unknown"
        self._services = services
        self._held = HeldWork(
            session_id,
            services.elicitations,
            services.bus,
            tools=self._session_tools,
            wake=self._wake,
        )
        self._pending: list[MessageItem] = []
        # The trace context each pending message was sent from (a tool call that
        # dispatched it), while tracing is on: the turn that answers it is its child.
        # Bounded as the buffer is (a message leaves it when a turn takes it).
        self._trace_parents: dict[str, Carrier] = {}
        self._harness: Harness | None = None
        self._tools: SessionTools | None = None
        self._building_tools = trio.Lock()
        self._tasks: BackgroundTasks | None = None
        self._work: ChildWork | None = None
        self._turn: Turn | None = None
        # How the last turn ended, and whether a parent waiting on this session
        # has yet to hear that it has nothing left to do since.
        self.last_outcome: TurnOutcome | None = None
        self._settle_due = False
        self._nursery: trio.Nursery | None = None
        self._wakeup = trio.Event()
        self._message_buffered = trio.Event()
        self._inbox_arrived = False
        self._ready = trio.Event()
        self._history: History | None = None
        # What the latest turn read of the session at its start. Only its parent is
        # used after that start (a session's parent never changes): whom to announce to.
        self._basis: SessionBasis | None = None
        self.done = trio.Event()

    # -- called by the runtime -------------------------------------------------------

    @property
    def leaving(self) -> bool:
        """Whether it takes no new work (it is leaving, stopped or done)."""
        return self.state in (ActorState.LEAVING, ActorState.STOPPED, ActorState.DONE)

    @property
    def busy(self) -> bool:
        """Whether a turn is running."""
        return self._turn is not None

    @property
    def settled(self) -> bool:
        """Nothing left to do: no turn, and nothing waiting for one (see
        :meth:`_quiescent`). A terminal left open does not count: it is a resource."""
        return self._turn is None and self._quiescent()

    @property
    def background_tasks(self) -> int:
        return 0 if self._tasks is None else self._tasks.running

    @property
    def pending_count(self) -> int:
        """How many messages wait for a turn to take them."""
        return len(self._pending)

    def enqueue(self, message: MessageItem) -> str:
        """Hand a persisted user message to the session: ``accepted`` or ``buffered``.

        The current trace context (the sender's span, while tracing is on) is kept
        with it: the turn that takes the message is traced as its child.
        """
        self._pending.append(message)
        if sent_from := carrier():
            self._trace_parents[message.id] = sent_from
        self._wakeup.set()
        self._message_buffered.set()
        return "buffered" if self._turn is not None else "accepted"

    def interrupt(self) -> bool:
        """Cancel the running turn (it ends ``cancelled``); False if none runs."""
        if self._turn is None:
            return False
        self._turn.scope.cancel()
        return True

    async def tool_schemas(self) -> tuple[ToolSchema, ...]:
        """The tools the session offers (its MCP servers' once a turn started them)."""
        await self._ready.wait()
        if self._tasks is None:
            raise Conflict("the session was stopped")
        return (await self._session_tools()).schemas()

    def stop(self) -> list[str]:
        """Cancel everything the session runs and drop buffered messages.

        Returns the ids of the messages dropped (still pending in the store: the
        caller settles them, or — at shutdown — leaves them for the next start).
        """
        self._held.withdraw()
        dropped, self._pending = self._pending, []
        self._trace_parents.clear()
        self._services.reports.messages_taken([m.id for m in dropped], "")
        # From now on new work goes to a successor (which waits for this actor to
        # end), not to this one, whose nursery is being cancelled. This actor stays
        # the session's entry until then, so the successor can find it.
        if self.state is not ActorState.DONE:
            self.state = ActorState.STOPPED
        groups = self._tools.groups if self._tools is not None else None
        if isinstance(groups, RecordedGroups):
            groups.terminate()  # every shell at once, before the tasks unwind
        if self._nursery is not None:
            self._nursery.cancel_scope.cancel()
        return [m.id for m in dropped]

    def pending_ids(self) -> set[str]:
        """Ids of buffered messages no turn has taken yet."""
        return {m.id for m in self._pending}

    def hold_elicitation(self, params: ElicitationParams) -> HeldElicitation:
        """Open an elicitation the session holds (see :meth:`HeldWork.hold_elicitation`)."""
        return self._held.hold_elicitation(params)

    def hold_tool_call(self, call: HeldToolCall) -> None:
        """Run ``call`` in the session's nursery (see :meth:`HeldWork.hold_tool_call`)."""
        self._held.hold_tool_call(call)

    def held_call(self, call_id: str) -> HeldToolCall | None:
        """A held tool call that is not collected yet."""
        return self._held.calls.get(call_id)

    async def wait_for_injection(self) -> None:
        """Return once a message is buffered (at once if one is)."""
        while not self._pending:
            self._message_buffered = trio.Event()
            await self._message_buffered.wait()

    async def take_injections(self) -> list[MessageItem]:
        """Give the running turn every buffered message (moved to the end of history)."""
        taken, self._pending = self._pending, []
        for message in taken:
            self._trace_parents.pop(message.id, None)
        response_id = self._turn.response_id if self._turn is not None else None
        if taken and response_id is not None:
            self._services.reports.messages_taken([m.id for m in taken], response_id)
        if taken:
            if self._history is not None:
                for message in taken:  # in the order the store puts them at the end
                    self._history.record(message)
            store = self._services.store
            try:
                await store.move_items_to_end(
                    self.session_id, [m.id for m in taken], taken_by=response_id
                )
            except BaseException:
                if self._history is not None:
                    self._history.doubt()
                raise
        return taken

    def note_inbox(self) -> None:
        """An inbox item arrived: run a turn for it once no turn is running."""
        self._inbox_arrived = True
        self._wakeup.set()

    def _wake(self) -> None:
        self._wakeup.set()  # work arrived, or the actor may have no work left

    # -- the actor ---------------------------------------------------------------------

    async def run(self) -> None:
        """Run turns while there is work; return once the session has none.

        Cancellation: cancels the running turn (which still ends with a terminal
        status), background tasks (each still delivers its inbox item), terminals
        (each kills its pane and announces its end) and closes the harness.
        """
        services = self._services
        hold = None
        try:
            if self._predecessor is not None:
                await self._predecessor.done.wait()
                self._predecessor = None
            # While the actor lives the bus keeps the session's counter in memory.
            hold = services.bus.hold(self.session_id)
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                if self.state is ActorState.STOPPED:
                    nursery.cancel_scope.cancel()
                else:
                    self.state = ActorState.RUNNING
                self._tasks = BackgroundTasks(
                    self.session_id,
                    nursery,
                    services.store,
                    services.bus,
                    self.note_inbox,
                    on_work_done=self._wake,
                )
                self._work = services.builder.child_work(self.session_id, nursery, self.note_inbox)
                self._ready.set()
                await self._loop(nursery)
        finally:
            self._ready.set()
            self._leave()
            services.reports.session_settled(self.session_id, self.last_outcome, ended=True)
            try:
                await self._close_harness()
            finally:
                if hold is not None:
                    services.bus.release(hold)
                self.state = ActorState.DONE
                self.done.set()

    def _leave(self) -> None:
        """Take no more work: the runtime starts a successor for the next."""
        if self.state is not ActorState.STOPPED:
            self.state = ActorState.LEAVING
        self._services.reports.actor_left(self)

    async def _loop(self, nursery: trio.Nursery) -> None:
        while True:
            self._held.start_waiting(nursery)
            if self._pending:
                await self._run_turn()
                continue
            if self._inbox_arrived:
                self._inbox_arrived = False
                notice = await self._inbox_notice()
                if notice is not None:
                    self._pending.append(notice)
                continue
            self._settle_if_quiet()
            services = self._tools.services_running if self._tools is not None else 0
            if len(nursery.child_tasks) <= services:
                # Decided synchronously: from here no message can reach this actor;
                # the runtime starts a new one for the next message. Its services (MCP
                # connections) close with it.
                self._leave()
                if self._tools is not None:
                    self._tools.close_services()
                return
            self._wakeup = trio.Event()
            await self._wakeup.wait()

    def _settle_if_quiet(self) -> None:
        """Tell a parent waiting on this session that it has nothing left to do.

        Once per turn that ended, as soon as no message, inbox notice, background
        task or child work is left: the last turn's outcome is the final answer.
        """
        if self._settle_due and self._quiescent():
            self._settle_due = False
            self._services.reports.session_settled(self.session_id, self.last_outcome)

    def _quiescent(self) -> bool:
        """No turn, message, inbox notice, background task or child work is pending."""
        tasks = self._tasks.running if self._tasks is not None else 0
        work = self._work.running if self._work is not None else 0
        return not self._pending and not self._inbox_arrived and not tasks and not work

    async def _inbox_notice(self) -> MessageItem | None:
        """Drain the inbox into a message for a wake-up turn (None if it is empty)."""
        tools = await self._session_tools()
        store = self._services.store
        notice: list[MessageItem] = []

        async def store_notice(lines: list[str]) -> None:
            message = MessageItem(role="user", content=(InputText("\n".join(lines)),))
            # Pending like any message: if the process dies before a turn takes it,
            # the next start answers it. Stored before the items are marked read, so
            # a crash in between leaves them unread (delivered again), never lost.
            await store.put_items(self.session_id, [unstructure(message, Item)], pending=True)
            notice.append(message)

        # Once its items are marked read the message must reach a turn, even if a
        # stop lands in between.
        with trio.move_on_after(10, shield=True):
            await tools.drain_inbox(store_notice)
        return notice[0] if notice else None

    async def _session_tools(self, basis: SessionBasis | None = None) -> SessionTools:
        """The session's one tool set, built by the first caller; the others wait for it.

        Several callers can ask at once (a turn starting, a held tool call, the
        ``/mcp`` tool list): building awaits, so without the lock each would build a
        set of its own, and a stop would terminate only the last one's shells.
        ``basis``: what a turn starting read (with its agent followed), else read here.
        """
        async with self._building_tools:
            if self._tools is None:
                assert self._tasks is not None and self._work is not None
                builder = self._services.builder
                if basis is None:
                    basis = await builder.session_basis(self.session_id, follow=True)
                self._tools = await builder.make_tools(basis, self._tasks, self._work)
            return self._tools

    async def _run_turn(self) -> None:
        messages, self._pending = self._pending, []
        ids = [m.id for m in messages]
        parents = [self._trace_parents.pop(i, None) for i in ids]
        services = self._services
        parent = next((p for p in parents if p is not None), None)
        turn = Turn(self.session_id, self.harness_name, services, parent=parent)
        self._turn = turn
        services.reports.messages_taken(ids, turn.response_id)
        store = services.store
        taken = False

        async def prepare() -> tuple[Harness, TurnRequest]:
            nonlocal taken
            # The turn's ``running`` status must be durable before its messages stop
            # being pending: a crash in between would leave a session stored idle
            # whose messages no turn answers and no recovery finds.
            await services.bus.flush()
            # Counted as it takes its messages, its row read back: one write.
            start = await store.begin_turn(self.session_id, ids, taken_by=turn.response_id)
            taken = True
            if start is None:
                raise SessionNotFound(self.session_id)
            exclude = set(ids) | self.pending_ids()
            history = await services.histories.get(self.session_id, exclude)
            self._history = history
            before, images = history.items(), history.image_positions()
            for message in messages:  # history from the next turn on
                history.record(message)
            # The session's row, read once for everything this start builds; the
            # actor's first turn (no tools yet) moves it to its agent's latest version.
            basis = await services.builder.session_basis(
                self.session_id, follow=self._tools is None, read=start
            )
            self._basis = basis
            tools = await self._session_tools(basis)
            assert self._nursery is not None
            await tools.start_services(self._nursery)  # MCP servers, on the first turn
            request = await services.builder.build_request(
                basis, tools, turn.response_id, start.number, messages, before, images
            )
            limits = request.spec.limits
            usage = TurnUsage(
                # The stored sum is read only for a budget to hold it to.
                before=await self._used_so_far() if limits.bounded else Usage(),
                limits=limits,
                prices=await services.builder.prices(),
                model=request.model,
            )
            turn.bind(tools, self.take_injections, self.wait_for_injection, history, usage)
            if self._harness is None:
                self._harness, self.harness_name = await services.builder.make_harness(basis, tools)
                turn.harness_name = self.harness_name
            await self._announce()
            return self._harness, request

        try:
            await turn.run(prepare)
        finally:
            self._turn = None
            self.last_outcome = turn.outcome
            self._settle_due = True
            self._settle_if_quiet()  # before announcing: the parent waits on this
            with trio.move_on_after(5, shield=True):
                if not taken:
                    # Ended before it read them (a stop at its start): they are
                    # answered by this turn's end, not pending for a restart.
                    await self._settle_messages(ids)
                await self._announce()

    async def _used_so_far(self) -> Usage:
        """What the session's model calls used before this turn (its stored sum)."""
        own = await self._services.store.usage_of([self.session_id])
        return own[self.session_id][0] if self.session_id in own else Usage()

    async def _settle_messages(self, ids: list[str]) -> None:
        try:
            await self._services.store.settle_items(self.session_id, ids)
        except Exception:
            log.warning("could not settle messages of %s", self.session_id, exc_info=True)

    async def _announce(self) -> None:
        try:
            await self._services.reports.turn_changed(self.session_id, self._basis)
        except Exception:
            log.warning("could not tell the parent of %s", self.session_id, exc_info=True)

    @property
    def tools(self) -> SessionTools | None:
        return self._tools

    async def _close_harness(self) -> None:
        harness, self._harness = self._harness, None
        if harness is None:
            return
        with trio.move_on_after(5, shield=True):
            try:
                await harness.aclose()
            except Exception:
                log.warning("closing the harness of %s failed", self.session_id, exc_info=True)
