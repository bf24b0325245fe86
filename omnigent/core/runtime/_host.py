"""The runtime's side of its session actors: starting them and building what they run.

:class:`ActorHost` implements :class:`~omnigent.core.session._actor.SessionHost`. It keeps the
actors of sessions that have work (an actor removes itself the moment it decides to
leave) and the table of messages an open turn stream is waiting on; and it builds a
session's harness, tools and turn requests. Which spec a session runs — the cache of
parsed agent specs and policy engines, the harness choice and its checks — is its
base, :class:`~._host_specs.HostSpecs`.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Collection, Sequence
from typing import TYPE_CHECKING

import attrs
import httpx
import trio

from ..._cancellation import only_exceptions, split_cancellation
from ...errors import (
    ConfigError,
    RuntimeClosed,
    SessionElsewhere,
    SessionNotFound,
)
from ...harnesses.base import Harness, HarnessEnv, TurnRequest
from ...harnesses.registry import HarnessRegistry
from ...model import Item, MessageItem, Resource
from ...providers import Provider, load_provider_config
from ...spec import PolicySpec
from ...stores import Store
from ...tools.terminals import TmuxServer
from ..asking import Elicitations, Permissions
from ..bus import EventBus
from ..cluster import Ownership, SoloOwnership, Tenure
from ..session import (
    HistoryCache,
    SessionActor,
    StoredHarnessState,
    TurnServices,
)
from ..tools import PolicyAllowlist, SessionTools, ToolPlace, ToolProviders, ToolRegistry
from ..work import (
    BackgroundTasks,
    BlockingCalls,
    ChildWork,
    ClientMcp,
    RecordedGroups,
    SessionTerminals,
    SubAgents,
    TurnOutcome,
)
from ._files import FileService
from ._host_specs import HostSpecs, sub_agent_spec

if TYPE_CHECKING:
    from ...processes import ProcessManager
    from ._orchestration import Orchestration

__all__ = ["ActorHost", "sub_agent_spec"]


async def _nothing(session_id: str) -> None:
    return None


log = logging.getLogger(__name__)


class ActorHost(HostSpecs):
    """Starts session actors and serves them. Owned by the ``Runtime``."""

    def __init__(
        self,
        *,
        nursery: trio.Nursery,
        store: Store,
        bus: EventBus,
        http: httpx.AsyncClient,
        harnesses: HarnessRegistry,
        tools: ToolRegistry,
        files: FileService,
        elicitations: Elicitations,
        place: ToolPlace,
        default_policies: Sequence[PolicySpec],
        policy_allowlist: PolicyAllowlist,
        allowed_commands: Collection[str] = (),
        permissions: Permissions,
        threads: BlockingCalls,
        processes: ProcessManager | None = None,
        tmux: TmuxServer | None = None,
        ownership: Ownership | None = None,
    ) -> None:
        super().__init__(
            store=store,
            harnesses=harnesses,
            place=place,
            threads=threads,
            default_policies=default_policies,
            policy_allowlist=policy_allowlist,
        )
        self.services = TurnServices(store, bus, elicitations)
        self.subagents = SubAgents(store, bus, lambda: self.closing)
        # Set by the runtime: what the orchestration tools act through.
        self.orchestration: Orchestration | None = None
        self.permissions = permissions
        self.histories = HistoryCache(store)
        # Where sessions' work runs: an actor holds its tree here for its whole life.
        self.ownership: Ownership = ownership if ownership is not None else SoloOwnership()
        self._processes = processes
        self.actors: dict[str, SessionActor] = {}
        # Sessions being deleted: no new work may start on them.
        self.deleting: set[str] = set()
        self.closing = False
        # Set by the runtime: tells a session's parent that its state changed.
        self.on_turn_changed: Callable[[str], Awaitable[None]] = _nothing
        # Messages an open turn stream waits on: item id -> the response id of the
        # turn that took it ("" when a stop dropped it). Entries live with the stream.
        self.watched: dict[str, str | None] = {}
        self._nursery = nursery
        self._http = http
        self._tools = tools
        self._files = files
        self._elicitations = elicitations
        self._permissions = permissions
        self._tmux = tmux
        # Programs a client's spec may name (see omnigent.spec._trust).
        self.allowed_commands = frozenset(allowed_commands)
        # Tool implementations clients supply for their sessions (ACP's fs/terminal).
        self.providers = ToolProviders()
        # MCP servers clients supply for their sessions while connected (ACP's).
        self.client_mcp = ClientMcp()

    @property
    def processes(self) -> ProcessManager | None:
        """The harness process manager (``None`` only for a runtime made without one)."""
        return self._processes

    @property
    def task_count(self) -> int:
        return len(self._nursery.child_tasks)

    # -- actors --------------------------------------------------------------------------

    def actor(self, session_id: str) -> SessionActor:
        """The session's actor, started now if the session had no work.

        A new actor starts after a predecessor still winding down (stopped, or
        leaving), so one session's work never runs twice at once.

        A new actor takes a tenure on its session's tree (see
        :mod:`omnigent.core.cluster._ownership`): the caller holds the tree here already
        (the runtime routes work to where it is).

        Raises:
            RuntimeClosed: the runtime is shutting down. SessionNotFound: the session
            is being deleted. SessionElsewhere: another server holds the tree.
        """
        if self.closing:
            raise RuntimeClosed()
        if session_id in self.deleting:
            raise SessionNotFound(session_id)
        actor = self.actors.get(session_id)
        if actor is not None and not actor.leaving:
            return actor
        tenure = self.ownership.retain(session_id)
        if tenure is None:
            raise SessionElsewhere(session_id, "another server")
        actor = SessionActor(session_id, self, predecessor=actor)
        self.actors[session_id] = actor
        self._nursery.start_soon(self._run_actor, actor, tenure, name=f"session {session_id}")
        return actor

    def stop_sessions(self, session_ids: set[str]) -> None:
        """Cancel the work of these sessions at once (their tree was lost to another server)."""
        for session_id in session_ids:
            actor = self.actors.get(session_id)
            if actor is not None:
                actor.stop()

    async def _run_actor(self, actor: SessionActor, tenure: Tenure) -> None:
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

    def terminals_of(self, session_id: str) -> SessionTerminals | None:
        """The live terminals of the session's actor (none without an actor or terminals)."""
        actor = self.actors.get(session_id)
        tools = actor.tools if actor is not None else None
        return tools.terminals if tools is not None else None

    def resources_of(self, session_id: str) -> list[Resource]:
        """The session's live resources: its running terminals, in launch order."""
        terminals = self.terminals_of(session_id)
        return [] if terminals is None else terminals.resources()

    def actor_left(self, actor: SessionActor) -> None:
        if self.actors.get(actor.session_id) is actor:
            del self.actors[actor.session_id]

    async def turn_changed(self, session_id: str) -> None:
        await self.on_turn_changed(session_id)

    def messages_taken(self, item_ids: list[str], response_id: str) -> None:
        for item_id in item_ids:
            if item_id in self.watched:
                self.watched[item_id] = response_id
        self.subagents.messages_taken(item_ids, response_id)

    def child_work(
        self, session_id: str, nursery: trio.Nursery, on_inbox: Callable[[], None]
    ) -> ChildWork:
        return ChildWork(session_id, nursery, self.subagents, on_inbox)

    def session_settled(
        self, session_id: str, outcome: TurnOutcome | None, *, ended: bool = False
    ) -> None:
        self.subagents.session_settled(session_id, outcome, ended=ended)

    # -- what actors run -----------------------------------------------------------------

    async def make_harness(self, session_id: str, tools: SessionTools) -> tuple[Harness, str]:
        row, spec = await self.session_spec(session_id)
        name = self.harness_of(spec, row.harness_override)
        config = spec.executor.config
        if row.model_override is not None and row.model_override != config.model:
            # What the harness actually runs: a harness reading its config sees the
            # session's model, as one reading TurnRequest.model does.
            config = attrs.evolve(config, model=row.model_override)
        env = HarnessEnv(
            session_id,
            spec,
            config,
            self._http,
            harness_name=name,
            processes=self._processes,
            working_directory=tools.cwd,
            state=StoredHarnessState(self._store, session_id, name),
            data_dir=self._place.home / "harnesses" / name,
            provider=await self._provider_serving(name),
        )
        return self.harnesses.create(name, env), name

    async def _provider_serving(self, harness: str) -> Provider | None:
        """The provider of ``config.yaml`` whose endpoint ``harness`` uses by default.

        A configuration that cannot be read is logged and treated as empty here: a
        session whose spec or environment names its endpoint must not fail for it
        (``sys_list_models`` reports the error to the agent).
        """
        try:
            config = await trio.to_thread.run_sync(load_provider_config, self._place.home)
        except ConfigError as exc:
            log.warning("ignoring the provider configuration for endpoints: %s", exc.message)
            return None
        return config.serving(harness)

    async def make_tools(
        self, session_id: str, tasks: BackgroundTasks, work: ChildWork
    ) -> SessionTools:
        row, spec = await self.session_spec(session_id)
        return SessionTools(
            session_id=session_id,
            spec=spec,
            registry=self._tools,
            policies=self.policy_engine(row, spec),
            elicitations=self._elicitations,
            tasks=tasks,
            store=self._store,
            bus=self.services.bus,
            place=self._place,
            permissions=self._permissions,
            tmux=self._tmux,
            session_cwd=row.cwd,
            providers=self.providers,
            client_mcp=self.client_mcp,
            work=work,
            orchestration=self.orchestration,
            groups=RecordedGroups(self._store, session_id),
        )

    async def build_request(
        self,
        actor: SessionActor,
        response_id: str,
        messages: list[MessageItem],
        history: list[Item],
        image_positions: list[int],
    ) -> TurnRequest:
        """The turn's request: ``history`` as kept
        (:mod:`omnigent.core.session._history`), its uploaded
        images (at ``image_positions``) and the input's resolved to ``data:`` URLs."""
        session_id = actor.session_id
        row, spec = await self.session_spec(session_id)
        resolve = self._files.resolver()
        for position in image_positions:
            history[position] = await resolve(history[position])
        tools = actor.tools
        return TurnRequest(
            session_id=session_id,
            response_id=response_id,
            turn_number=await self._store.begin_turn(session_id),
            history=tuple(history),
            input=tuple([await resolve(m) for m in messages]),  # type: ignore[misc]
            instructions=spec.prompt,
            model=row.model_override or spec.model,
            tools=tools.schemas() if tools is not None else self._tools.schemas(),
            spec=spec,
        )
