"""The runtime: the library's API, and the owner of every session's work.

A :class:`Runtime` is made by :func:`~omnigent.core.open_runtime`, which owns its
lifetime; it has no public constructor. Lifetimes nest ``Runtime ⊃ SessionActor ⊃
Turn ⊃ tool call``; transports call the methods here and nothing else.

:class:`Runtime` is one class: the API, long but made of short methods, over objects
that each have one job — :class:`~._agent_catalog.AgentCatalog` (agents),
:class:`~._session_catalog.SessionCatalog` (session rows and the views built from them),
:class:`~._messages.Messages` (messages in, turn streams), :class:`~._asking.Asking`
(held elicitations, policy verdicts), :class:`~._stopping.Stopping` (stops and
shutdown), :class:`~._placed.PlacedCalls` (calls on live work, run where the session's
tree is held), :class:`~._live.LiveSessions` (which sessions have live work here),
:class:`~._actors.Actors` (starts session actors and hears their reports),
:class:`~._builder.Builder` (what actors run) and :class:`~._orchestration.Orchestration`
(what the orchestration tools act through). Its constructor builds them all, once, in
one place, each given what it stands on; every part of the runtime's state is one of
its attributes there, and nothing is assigned into a part after it is built.

State: ``opening → open → closing → closed``. Every call on a closed runtime raises
:class:`~omnigent.errors.RuntimeClosed`; while closing, calls that would start work
raise it too. A records-only runtime (``open_runtime(..., exclusive=False)``) reads
everything and writes records (agents, sessions, files), but any call that would
publish an event, delete, or run work raises :class:`~omnigent.errors.StoreBusy`.
"""

from __future__ import annotations

import enum
import functools
import logging
from collections.abc import AsyncIterator, Callable, Collection, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import TYPE_CHECKING, Any, Literal, NoReturn, cast

import attrs
import httpx
import trio

from ..._ids import now
from ...errors import (
    ConfigError,
    ErrorDetail,
    InvalidInput,
    ResourceNotFound,
    RuntimeClosed,
    SessionElsewhere,
    SessionNotFound,
    StoreBusy,
)
from ...harnesses.base import HarnessFactory, ToolSchema
from ...harnesses.registry import ModelRule
from ...mcp import INSTALL_HINT as MCP_INSTALL_HINT
from ...mcp import mcp_installed
from ...model import (
    Agent,
    ChildSessionSummary,
    ElicitationHeld,
    ElicitationInfo,
    ElicitationParams,
    ElicitationRequest,
    Event,
    EventAccepted,
    EventAnswer,
    FileInfo,
    Health,
    ItemPage,
    MessageAccepted,
    MessageItem,
    ResolveResult,
    Resource,
    ResourceScreen,
    ServerInfo,
    SessionPage,
    SessionSnapshot,
    check_depth,
    elicitation_params,
)
from ...observability import Metrics
from ...providers import load_provider_config
from ...spec import AgentSpec, McpServerSpec
from ...stores import SessionRow, Store, cluster_of
from ...tools.terminals import HISTORY_LIMIT, TmuxServer
from ..asking import (
    ACTIONS,
    Elicitations,
    EventFilter,
    Grant,
    Permissions,
    Resolution,
    Visibility,
    check_content,
)
from ..bus import EventBus, SessionChanges, SessionWatch, Subscription
from ..cluster import Elsewhere, Moved, Ownership, RunnerDirectory, RunnerLink, Tenure
from ..session import HistoryCache, TurnEvents
from ..tools import (
    ClientTool,
    ClientTools,
    PolicyEvent,
    PythonTools,
    Tool,
    ToolRegistry,
    ToolServices,
    Verdict,
    directory_problem,
    in_session_workspaces,
    purge_workspaces,
)
from ..work import (
    CANCEL_GRACE,
    DEFAULT_TTL,
    BlockingCalls,
    ChildWorkHooks,
    ClientMcp,
    ClientMcpReport,
    HeldToolCall,
    SubAgents,
    ToolTask,
    check_client_servers,
    client_connection,
    client_server_refusal,
    open_server_set,
)
from ._actors import Actors
from ._agent_catalog import AgentCatalog
from ._asking import Asking
from ._builder import Builder
from ._files import FileService
from ._inputs import ApprovalData, McpElicitationData, parse_event, parse_message_content
from ._live import LiveSessions
from ._messages import Messages
from ._options import RuntimeOptions
from ._orchestration import Orchestration
from ._placed import PlacedCalls
from ._session_catalog import SessionCatalog
from ._session_input import check_cwd
from ._specs import AgentSpecs
from ._stopping import AFTER_GRACE, Stopping
from ._tool_tasks import ToolTasks
from ._tuning import SessionTuning

if TYPE_CHECKING:
    from ...processes import ProcessManager, ProcessTrees
    from ..cluster.shared import SharedOwnership

__all__ = ["Runtime", "RuntimeState"]

log = logging.getLogger(__name__)


class _NoPublicConstructor(type):
    """Only ``open_runtime`` makes a runtime (it owns the lifetime), as trio does."""

    def __call__(cls, *args: Any, **kwargs: Any) -> NoReturn:
        raise TypeError(f"{cls.__name__} has no public constructor; use open_runtime()")

    def _create(cls, *args: Any, **kwargs: Any) -> Any:
        return super().__call__(*args, **kwargs)


class RuntimeState(enum.Enum):
    """Where a runtime is in its life (see :attr:`Runtime.state`)."""

    OPENING = "opening"
    OPEN = "open"
    CLOSING = "closing"
    CLOSED = "closed"


class Runtime(metaclass=_NoPublicConstructor):
    """Sessions, agents, tools and harnesses behind one store. Made by ``open_runtime``."""

    def __init__(
        self,
        *,
        options: RuntimeOptions,
        store: Store,
        bus: EventBus,
        nursery: trio.Nursery,
        http: httpx.AsyncClient,
        processes: ProcessManager | None,
        tmux: TmuxServer | None,
        ownership: Ownership,
        changes: SessionChanges,
        metrics: Metrics,
        trees: ProcessTrees | None = None,
    ) -> None:
        """Build every part of the runtime, once, each given what it stands on.

        ``open_runtime`` passes what it opened (and closes it): the store, the event
        bus, the work nursery actors run in, the HTTP client, the process manager,
        the tmux server, the ownership of session trees, the sessions feed and the
        process trees sessions' shells run in.

        The parts are built lowest first; two calls go back up to parts built later,
        and are given as this runtime's own methods: a session's snapshot asks the
        holder of its tree for its pending elicitations (:meth:`_pending_elsewhere`,
        a routed call), and the orchestration tools hand a dispatched message to its
        child's actor (:meth:`_hand_over`, through the actors the tools' builder
        starts).
        """
        self.state = RuntimeState.OPENING
        self.records_only = options.records_only
        self._options = options
        self._started_at = now()
        # What open_runtime opened, and closes.
        self._store = store
        self._metrics = metrics
        self._bus = bus
        self._ownership = ownership
        self._changes = changes  # the sessions feed; the bus tells it of stored events
        self._processes = processes
        # The ground every other part stands on. A cancelled sync tool's thread gets
        # CANCEL_GRACE to return (a shutdown's grace, if shorter), then its turn ends
        # without it.
        self._threads = BlockingCalls(min(CANCEL_GRACE, options.shutdown_grace))
        self._tools = ToolRegistry(self._threads)
        self._files = FileService(store)
        self._elicitations = Elicitations(store, bus)
        self._permissions = Permissions(store)
        self._histories = HistoryCache(store)
        self._subagents = SubAgents(store, bus)
        self._client_tools = ClientTools()
        self._client_mcp = ClientMcp()
        self._live = LiveSessions()
        self._tuning = SessionTuning()
        self._specs = AgentSpecs(
            store=store,
            harnesses=options.harnesses,
            place=options.place,
            threads=self._threads,
            default_policies=options.default_policies,
            policy_allowlist=options.policy_allowlist,
            safe_defaults=options.safe_defaults,
        )
        # The specs' own Python tools (tools.python), loaded once per process.
        python_tools = PythonTools(options.tool_allowlist)
        # Records: agents and sessions, and who may read them.
        self._agents = AgentCatalog(
            store=store,
            specs=self._specs,
            trust=options.client_trust,
            python_tools=python_tools,
            registered_tools=self._tools,
        )
        self._sessions = SessionCatalog(
            store=store,
            bus=bus,
            specs=self._specs,
            live=self._live,
            files=self._files,
            elicitations=self._elicitations,
            subagents=self._subagents,
            ownership=ownership,
            pending_elsewhere=self._pending_elsewhere,
            max_message_bytes=options.max_message_bytes,
        )
        self._visibility = Visibility(self._permissions, self._sessions.row)
        self._stopping = Stopping(
            live=self._live,
            elicitations=self._elicitations,
            threads=self._threads,
            store=store,
            bus=bus,
            processes=processes,
            client_mcp=self._client_mcp,
            subagents=self._subagents,
            histories=self._histories,
            grace=options.shutdown_grace,
        )
        # Where runners are connected; with several servers, a runner-bound tree nobody
        # holds is taken by its runner's server (core/cluster/_runner_directory).
        shared = ownership.shared
        self._runners = RunnerDirectory(
            links=options.runners,
            server=ownership.server_name,
            store=cluster_of(store) if shared else None,
            runner_of=self._runner_of,
        )
        # Live work: what session actors run, and the actors.
        live = self._live
        orchestration = Orchestration(
            store=store,
            sessions=self._sessions,
            agents=self._agents,
            specs=self._specs,
            live=live,
            subagents=self._subagents,
            permissions=self._permissions,
            elicitations=self._elicitations,
            hand_over=self._hand_over,
            histories=self._histories,
            home=options.place.home,
            runners=self._runners,
        )
        builder = Builder(
            store=store,
            specs=self._specs,
            python_tools=python_tools,
            tools=ToolServices(
                registry=self._tools,
                store=store,
                bus=bus,
                elicitations=self._elicitations,
                place=options.place,
                tmux=tmux,
                client_tools=self._client_tools,
                client_mcp=self._client_mcp,
                control=orchestration,
                metrics=metrics,
                trees=trees,
                mcp_guard=options.client_trust.mcp_urls,
            ),
            files=self._files,
            http=http,
            processes=processes,
            runners=options.runners,
            subagents=self._subagents,
            child_hooks=ChildWorkHooks(
                announce=self._sessions.announce_to_parent,
                stop_session=self._stopping.stop_and_wait,
                closing=lambda: live.closing,
            ),
            tuning=self._tuning,
        )
        self._actors = Actors(
            live=live,
            nursery=nursery,
            ownership=ownership,
            store=store,
            bus=bus,
            elicitations=self._elicitations,
            histories=self._histories,
            builder=builder,
            subagents=self._subagents,
            announce=self._sessions.announce_to_parent,
            metrics=metrics,
        )
        self._messages = Messages(
            store=store,
            bus=bus,
            live=live,
            actors=self._actors,
            files=self._files,
            sessions=self._sessions,
            max_message_bytes=options.max_message_bytes,
        )
        self._asking = Asking(actors=self._actors, specs=self._specs, sessions=self._sessions)
        # Calls on live work run where the session's tree is held (see _ownership).
        self._placed = PlacedCalls(
            ownership=ownership,
            placement=self._runners if shared and options.runners else None,
            live=live,
            elicitations=self._elicitations,
            sessions=self._sessions,
            asking=self._asking,
            messages=self._messages,
            stop_here=self._stopping.stop_here,
            stop_tree_here=self._stopping.stop_tree_here,
        )
        # Held tool calls kept as durable tasks (MCP's tasks), found again in the log.
        self._tool_tasks = ToolTasks(
            store=store, bus=bus, held=self.held_tool_call, here=self._here
        )

    async def _runner_of(self, session_id: str) -> str | None:
        row = await self._store.get_session(session_id)
        return None if row is None else row.runner_id

    async def _pending_elsewhere(self, row: SessionRow) -> tuple[ElicitationRequest, ...]:
        """The pending elicitations of a session held by another server (its holder's)."""
        return await self._placed.pending(row)

    async def _hand_over(
        self, session_id: str, item: MessageItem, *, before: Callable[[], None] | None = None
    ) -> MessageAccepted:
        """Store a message and give it to the session's actor (here), as one step."""
        return await self._messages.hand_over(session_id, item, before=before)

    # -- state ---------------------------------------------------------------------

    @property
    def closing(self) -> bool:
        """Whether the runtime is shutting down or closed (no new work is accepted)."""
        return self.state in (RuntimeState.CLOSING, RuntimeState.CLOSED)

    def _open(self) -> None:
        """Refuse any call on a closed runtime."""
        if self.state is RuntimeState.CLOSED:
            raise RuntimeClosed()

    async def _working(self) -> None:
        """Refuse a call that would publish, delete or run work where it cannot."""
        self._open()
        if self.records_only:
            raise StoreBusy(self._store.location, await self._store.owner_info(), records_only=True)
        if self.closing:
            raise RuntimeClosed("the runtime is shutting down")

    @property
    def processes(self) -> ProcessManager | None:
        """The harness process manager: every child process the runtime owns.

        For diagnostics and for harnesses built outside the registry; ``None`` only
        for a runtime made without one.
        """
        return self._processes

    async def shutdown(self) -> None:
        """Refuse new work and stop every session; returns when they have ended.

        Each running turn ends ``cancelled`` and publishes its terminal events (they
        are persisted and delivered to subscribers before this returns). What is
        still running after ``shutdown_grace`` seconds — a sync tool in a thread,
        say — is abandoned, with a log line naming it. Messages still buffered stay
        pending: the next start answers them.

        Leaving ``open_runtime`` does this itself; a server calls it first, so that
        its open streams still carry the turns' terminal events before they close.
        Calling it again waits for the first call.

        Cancellation: shielded, and bounded by ``shutdown_grace`` plus about a second.
        """
        self._open()
        self.state = RuntimeState.CLOSING
        self._ownership.close()  # forwarded calls go elsewhere now
        await self._stopping.stop_all()
        with trio.CancelScope(shield=True), trio.move_on_after(AFTER_GRACE):
            await self._bus.flush()

    @property
    def allowed_mcp_urls(self) -> tuple[str, ...]:
        """URL prefixes a remote client's HTTP MCP servers may be under (``open_runtime``)."""
        return self._options.client_trust.mcp_urls.prefixes

    @property
    def server_id(self) -> str:
        """This server's name (``serve --server-id``; default ``HOST:PID``)."""
        return self._ownership.server_name

    async def list_servers(self) -> list[ServerInfo]:
        """The live servers on this runtime's database, and how many sessions each runs.

        On a database one process owns (SQLite, memory) that is this process alone.
        """
        self._open()
        if not self._ownership.shared:
            sessions = len(self._live.actors)
            return [ServerInfo(self.server_id, self._started_at, sessions)]
        rows = await cast("SharedOwnership", self._ownership).servers()
        return [ServerInfo(r.name, r.started_at, r.sessions) for r in rows]

    async def list_runners(self) -> list[RunnerLink]:
        """The runners connected now — to this server, or to any server sharing the
        database — by name."""
        self._open()
        return await self._runners.links()

    async def find_runner(self, runner_id: str) -> RunnerLink | None:
        """Where ``runner_id`` is connected now (this server or another), or ``None``."""
        self._open()
        return await self._runners.where(runner_id)

    async def runner_session_counts(self, *, viewer: str | None = None) -> dict[str, int]:
        """How many sessions are bound to each runner, by name (``viewer``: only the
        sessions that user may read)."""
        self._open()
        return await self._store.runner_session_counts(viewer=viewer)

    async def health(self) -> Health:
        """Whether this server can serve: its store answers (within two seconds)."""
        self._open()
        ok = False
        with trio.move_on_after(2):
            try:
                await self._store.ping()
                ok = True
            except Exception:
                log.warning("the store did not answer the health check", exc_info=True)
        status: Literal["ok", "unavailable"] = "ok" if ok else "unavailable"
        return Health(status, self.server_id, self._store.kind)

    @property
    def metrics(self) -> Metrics:
        """This runtime's metrics (``GET /metrics`` renders them with
        :meth:`statistics` as its gauges)."""
        return self._metrics

    def statistics(self) -> dict[str, int]:
        """Live work: sessions with an actor, tasks in the runtime nursery, subscribers,
        pending elicitations, sub-agent dispatches not yet delivered."""
        return {
            "active_sessions": len(self._live.actors),
            "tasks": self._actors.task_count,
            "subscribers": self._bus.statistics()["subscribers"],
            "elicitations": self._elicitations.waiting,
            "sub_agent_work": self._subagents.watching,
        }

    # -- agents ------------------------------------------------------------------------

    async def create_agent(
        self,
        spec: AgentSpec | Mapping[str, Any],
        *,
        owner: str = "local",
        from_client: bool = False,
    ) -> Agent:
        """Register an agent, or a new version of the agent with the same name.

        An unchanged spec keeps its version.

        Args:
            spec: the spec (or its dict form).
            owner: who owns the agent's name.
            from_client: the spec came from a client of a server (the HTTP API does
                this), not from the operator: it may name no program to run that
                ``open_runtime(allowed_commands=...)`` does not list, and no working
                directory outside the workspace.

        Raises:
            SpecError: the spec is invalid (a bad function policy reference, or what a
            client may not ask for, included). UnknownHarness: it names no known
            harness. Forbidden: another user owns the name.
        """
        self._open()
        return await self._agents.create(spec, owner, from_client=from_client)

    async def get_agent(self, agent_id: str) -> Agent:
        """The latest version of an agent. Raises AgentNotFound."""
        self._open()
        return await self._agents.get(agent_id)

    async def get_agent_by_name(self, name: str) -> Agent:
        """The latest version of the agent called ``name``. Raises AgentNotFound."""
        self._open()
        return await self._agents.get_by_name(name)

    async def list_agents(self) -> list[Agent]:
        """Every agent at its latest version, oldest first."""
        self._open()
        return await self._agents.list()

    async def get_agent_spec(self, agent_id: str, version: int | None = None) -> AgentSpec:
        """The spec of an agent version (the latest by default). Raises AgentNotFound."""
        self._open()
        return await self._specs.agent_spec(agent_id, version)

    # -- sessions ----------------------------------------------------------------------

    async def create_session(
        self,
        agent_id: str | None = None,
        *,
        agent_name: str | None = None,
        title: str | None = None,
        parent_session_id: str | None = None,
        harness_override: str | None = None,
        model_override: str | None = None,
        labels: Mapping[str, str] | None = None,
        initial_items: Sequence[Any] = (),
        owner: str = "local",
        viewer: str | None = None,
        cwd: str | None = None,
        runner_id: str | None = None,
    ) -> SessionSnapshot:
        """Create a session of an agent (its current version).

        Args:
            agent_id: the agent, by id; or
            agent_name: the agent, by name (exactly one of the two).
            owner: who owns the new session (level manage).
            viewer: when set, ``input_image`` blocks in ``initial_items`` may name
                only files this user uploaded (others are refused as unknown).
            cwd: the absolute directory the session's client works in (an editor's
                project): the OS tools act there unless the spec pins an absolute
                ``os_env.cwd``, and a relative one is taken from it. A child session
                works in its parent's directory unless given its own. Never created.
            runner_id: the runner its work runs on, by name (``docs/runners.md``); it
                need not be connected. A child session runs on its parent's runner
                unless given its own.

        Raises:
            AgentNotFound, SessionNotFound (parent), BadRequest / UnknownHarness
            (override), InvalidInput (model override, labels, initial items; both or
            neither of ``agent_id`` and ``agent_name``).
        """
        if parent_session_id is not None:
            await self._working()  # the parent hears of its new child (an event)
        else:
            self._open()
        if (agent_id is None) == (agent_name is None):
            raise InvalidInput.at("agent_id", "give agent_id or agent_name (exactly one)")
        if agent_name is not None:
            agent_id = (await self._agents.get_by_name(agent_name)).id
        assert agent_id is not None
        row = await self._sessions.create(
            agent_id,
            title=title,
            parent_session_id=parent_session_id,
            harness_override=harness_override,
            model_override=model_override,
            labels=labels,
            initial_items=initial_items,
            owner=owner,
            viewer=viewer,
            cwd=cwd,
            runner_id=runner_id,
        )
        if parent_session_id is not None:
            await self._placed.announce(row)  # the parent hears of its new child
        self._changes.touched([row.id])  # the sessions feed
        return await self._sessions.snapshot(row)

    async def get_session(self, session_id: str, *, viewer: str | None = None) -> SessionSnapshot:
        """The session's snapshot. Raises SessionNotFound.

        With ``viewer``, ``pending_elicitations`` holds only what that user may read
        (a descendant's mirrored request only if they may read the descendant). The
        caller checks the viewer's access to ``session_id`` itself.
        """
        self._open()
        snapshot = await self._sessions.current(session_id)
        return await self._seen_by(snapshot, viewer)

    async def _seen_by(self, snapshot: SessionSnapshot, viewer: str | None) -> SessionSnapshot:
        if viewer is None or not snapshot.pending_elicitations:
            return snapshot
        pending = await self._visibility.requests(snapshot.pending_elicitations, viewer)
        return attrs.evolve(snapshot, pending_elicitations=pending)

    async def child_summary(
        self, session_id: str, *, viewer: str | None = None
    ) -> ChildSessionSummary:
        """A session as its parent lists it (``child_sessions``).

        Raises:
            SessionNotFound: also when ``viewer`` is given and may not read it.
        """
        if not await self._visibility.may_read(session_id, viewer):
            raise SessionNotFound(session_id)
        return await self._sessions.child_summary(await self.get_session(session_id))

    async def list_sessions(
        self,
        *,
        agent_name: str | None = None,
        parent_session_id: str | None = None,
        limit: int = 20,
        after: str | None = None,
        viewer: str | None = None,
        cwd: str | None = None,
        top_level: bool = False,
    ) -> SessionPage:
        """Sessions, newest first, ``limit`` at a time; ``after`` is the previous last id.

        ``viewer`` limits the list to sessions that user may read (and each
        snapshot's ``pending_elicitations`` as :meth:`get_session` does); ``cwd`` to
        sessions created with exactly that working directory; ``top_level`` to sessions
        without a parent (no sub-agent, no spawned child).

        Raises:
            InvalidInput: at ``after`` when it names no session ``viewer`` may read —
                whether it does not exist or is not theirs is not told apart.
        """
        self._open()
        page = await self._sessions.list(
            agent_name=agent_name,
            parent_session_id=parent_session_id,
            limit=limit,
            after=after,
            viewer=viewer,
            cwd=cwd,
            top_level=top_level,
        )
        if viewer is None:
            return page
        seen = tuple([await self._seen_by(snapshot, viewer) for snapshot in page.data])
        return SessionPage(seen, page.has_more)

    @asynccontextmanager
    async def watch_sessions(self, *, viewer: str | None = None) -> AsyncIterator[SessionWatch]:
        """Every session ``viewer`` may read, then every change to them, as it happens.

        The watch starts with a snapshot (``feed.snapshot``, one ``session.updated``
        per session, newest first, ``feed.synced``) and then yields each changed
        session's snapshot (or ``session.deleted``) — coalesced: a session that changed
        several times while the watcher was busy is read once, as it is now. It may
        take a fresh snapshot again (after a change of grants, or when it fell far
        behind); see :mod:`~omnigent.core.bus._session_changes`.

        Cancellation: the watch is cancel-safe (a cancelled ``next`` loses nothing);
        leaving the block stops collecting.
        """
        self._open()
        with self._changes.listen() as pending:
            yield SessionWatch(pending, _ViewerReads(self, viewer))

    async def update_session(
        self, session_id: str, *, viewer: str | None = None, **changes: Any
    ) -> SessionSnapshot:
        """Change ``title``, ``labels`` or ``model_override`` (``None`` clears).

        Returns the new snapshot, as :meth:`get_session` shows it to ``viewer``.
        """
        self._open()
        updated = await self._sessions.update(session_id, changes)
        self._changes.touched([session_id])
        if changes.keys() & {"title", "labels", "model_override"} and not self.records_only:
            # Its own stream shows the change too (session.info.updated).
            row = await self._sessions.row(session_id)
            await self._placed.announce(row, changed=True)
            updated = await self._sessions.current(session_id)  # with that event
        return await self._seen_by(updated, viewer)

    async def fork_session(
        self,
        session_id: str,
        *,
        up_to_item_id: str | None = None,
        title: str | None = None,
        owner: str = "local",
        viewer: str | None = None,
        cwd: str | None = None,
    ) -> SessionSnapshot:
        """A new session with a copy of ``session_id``'s history up to one item.

        The fork runs the same agent version, harness and model override, labels and
        working directory (``cwd`` replaces it) as its source; it is a top-level
        session of ``owner``, titled ``title`` (default: the source's, marked as a
        fork). Its history is the source's taken items up to and including
        ``up_to_item_id`` (default: all), copied under new ids, with an answer added
        for any tool call whose output is not in the copy; a message still waiting
        for a turn is not copied. It has its own id and event log and shares nothing
        live with the source, which is untouched (see :mod:`._fork`).

        A per-session workspace (``$OMNIGENT_HOME/workspaces/…``: a sub-agent's
        session works in its parent's) is kept only by a fork of the source's own
        owner; another user's fork works in a workspace of its own, since reading a
        session is no right to write where its tree works.

        Raises:
            SessionNotFound; InvalidInput at ``up_to_item_id`` (not an item of the
            session), ``title`` or ``cwd``.
        """
        self._open()
        keep_cwd = True
        if cwd is None:
            source = await self._sessions.row(session_id)
            if source.cwd is not None and source.owner != owner:
                place = self._options.place
                inside = await trio.to_thread.run_sync(in_session_workspaces, place, source.cwd)
                keep_cwd = not inside
        fork = await self._sessions.fork(
            session_id,
            up_to_item_id=up_to_item_id,
            title=title,
            owner=owner,
            cwd=cwd,
            keep_cwd=keep_cwd,
        )
        self._changes.touched([fork.id])
        return await self._seen_by(fork, viewer)

    async def set_session_temperature(self, session_id: str, temperature: float | None) -> None:
        """The sampling temperature the session's turns use from the next one on.

        Overrides the spec's ``executor.config.temperature`` for harnesses that read it
        (``loop``); ``None`` goes back to the spec's. Kept in memory for the runtime's
        lifetime (a restart forgets it), dropped with the session (:mod:`._tuning`).

        Raises:
            SessionNotFound; InvalidInput at ``temperature`` (a number in 0..2).
        """
        self._open()
        await self._sessions.row(session_id)
        self._tuning.set_temperature(session_id, temperature)

    def session_temperature(self, session_id: str) -> float | None:
        """The temperature :meth:`set_session_temperature` set (``None``: the spec's)."""
        return self._tuning.temperature(session_id)

    async def context_window(self, model: str | None) -> int | None:
        """``model``'s context window in tokens, from the configuration's
        ``context_windows`` table (``docs/observability.md``); ``None`` when it names
        none — or the configuration cannot be read (logged: a window is never worth
        failing for). Read from the file each time, as prices are.
        """
        if model is None:
            return None
        try:
            config = await trio.to_thread.run_sync(load_provider_config, self._options.place.home)
        except ConfigError as exc:
            log.warning("ignoring the configuration's context windows: %s", exc.message)
            return None
        return config.context_windows.for_model(model)

    async def check_session_directory(self, cwd: str | None) -> None:
        """Refuse a directory a client names for a session (ACP's ``cwd``) unless it is
        inside the runtime's workspace roots (``open_runtime(workspace_roots=...)``;
        without roots, anything absolute). ``None`` names none: nothing to check.

        Transports call it for what a client names; ``create_session(cwd=...)`` itself
        trusts its caller (a sub-agent works in its parent's directory, which may be a
        workspace under ``$OMNIGENT_HOME``).

        Raises:
            InvalidInput: at ``cwd``: not an absolute path, outside every root, or in or
                around ``$OMNIGENT_HOME``.
        """
        self._open()
        checked = check_cwd(cwd)
        if checked is None:
            return
        place = self._options.place
        problem = await trio.to_thread.run_sync(directory_problem, place, checked)
        if problem is not None:
            raise InvalidInput.at("cwd", problem)

    async def delete_session(self, session_id: str, *, purge_workspace: bool | None = None) -> None:
        """Cancel all work of the session and its descendants, then delete them all.

        Whatever is pending on them — their turns' questions, and hook requests or
        policy ASKs held by callers outside — is withdrawn first (those callers get
        ``cancel``), and from then on nothing is published into them.

        Args:
            purge_workspace: also delete their per-session workspaces
                (``$OMNIGENT_HOME/workspaces/<id>``); ``None``: as
                ``open_runtime(purge_workspaces=...)`` says (off by default).
        """
        await self._working()
        row = await self._sessions.row(session_id)
        deleting = self._live.deleting
        deleting.add(session_id)  # from here no new work (or child) starts on it
        doomed = [session_id]
        try:
            doomed.extend(await self._store.descendant_ids(session_id))
            deleting.update(doomed)
            # Where the tree is held: here, or the server that runs it.
            await self._placed.stop_tree(row, doomed)
            self._bus.seal(doomed)
            await self._bus.flush()
            await self._store.delete_sessions(doomed)
            self._changes.touched(doomed, deleted=True)
            place = self._options.place
            if place.purge_workspaces if purge_workspace is None else purge_workspace:
                await purge_workspaces(place.home, doomed)
            for sid in doomed:
                self._bus.forget_session(sid)
                self._elicitations.forget_session(sid)
                self._histories.drop(sid)
                self._tuning.forget(sid)
        finally:
            self._bus.unseal(doomed)
            deleting.difference_update(doomed)

    async def list_items(
        self,
        session_id: str,
        *,
        order: str = "asc",
        limit: int | None = None,
        after: str | None = None,
    ) -> ItemPage:
        """A session's history. ``after`` is an item id (exclusive)."""
        self._open()
        return await self._sessions.items(session_id, order=order, limit=limit, after=after)

    # -- resources (live terminals) ------------------------------------------------------

    async def list_resources(self, session_id: str) -> list[Resource]:
        """The session's live resources: its running terminals, in launch order.

        A terminal belongs to its session's work, so a session without work has none.

        Raises:
            SessionNotFound.
        """
        self._open()
        await self._sessions.row(session_id)
        return self._live.resources_of(session_id)

    async def read_resource_screen(
        self, session_id: str, resource_id: str, *, scrollback: int = 0
    ) -> ResourceScreen:
        """What a live terminal of the session shows now, with ``scrollback`` lines above.

        Reading it here does not count as the agent having seen it (its idle notices
        are unaffected).

        Raises:
            SessionNotFound; ResourceNotFound (no running terminal has that id);
            InvalidInput at ``scrollback`` (not an integer from 0 to the history limit).
        """
        self._open()
        await self._sessions.row(session_id)
        if isinstance(scrollback, bool) or not isinstance(scrollback, int):
            raise InvalidInput.at("scrollback", "must be an integer")
        if not 0 <= scrollback <= HISTORY_LIMIT:
            raise InvalidInput.at("scrollback", f"must be between 0 and {HISTORY_LIMIT}")
        terminals = self._live.terminals_of(session_id)
        if terminals is None:
            raise ResourceNotFound(resource_id)
        return await terminals.screen(resource_id, scrollback)

    # -- files ---------------------------------------------------------------------------

    async def upload_file(
        self,
        content: bytes,
        *,
        filename: str,
        content_type: str | None = None,
        owner: str = "local",
    ) -> FileInfo:
        """Store a file; its id can be used in ``input_image`` blocks."""
        self._open()
        return await self._files.upload(content, filename, content_type, owner)

    async def get_file(self, file_id: str, *, viewer: str | None = None) -> FileInfo:
        """A file's record. To a ``viewer`` other than its uploader it does not exist.

        Raises:
            FileNotFound.
        """
        self._open()
        return await self._files.info(file_id, viewer)

    async def read_file(self, file_id: str, *, viewer: str | None = None) -> bytes:
        """A file's bytes (see :meth:`get_file`). Raises FileNotFound."""
        self._open()
        return await self._files.content(file_id, viewer)

    # -- events in -----------------------------------------------------------------------

    async def send_message(
        self,
        session_id: str,
        content: str | Sequence[Any],
        *,
        role: str = "user",
        viewer: str | None = None,
    ) -> MessageAccepted:
        """Post a user message: starts a turn, or is buffered for the running one.

        The message is persisted before this returns. With ``viewer``, its
        ``input_image`` blocks may name only files that user uploaded.

        Raises:
            SessionNotFound; InvalidInput naming the bad block; RuntimeClosed.
        """
        await self._working()
        row = await self._sessions.row(session_id)
        item = await self._messages.compose(row, content, role, viewer)
        status = await self._placed.deliver(row, item)
        return MessageAccepted(status, item.id)  # type: ignore[arg-type]

    async def check_content(
        self, content: str | Sequence[Any], *, root: str = "content", viewer: str | None = None
    ) -> None:
        """Validate message content as :meth:`send_message` would; store nothing.

        Raises:
            InvalidInput naming the bad block under ``root`` (an unknown file, or with
            ``viewer`` one that user did not upload, included).
        """
        self._open()
        blocks = parse_message_content(content, root=root)
        await self._files.check_references(blocks, root=root, viewer=viewer)

    def open_turn_stream(
        self,
        session_id: str,
        content: str | Sequence[Any],
        *,
        role: str = "user",
        viewer: str | None = None,
        types: Collection[str] | None = None,
    ) -> AbstractAsyncContextManager[tuple[MessageAccepted, TurnEvents]]:
        """Send a message and stream the events of the turn that answers it.

        Yields the acceptance and an iterator over the session's events from now on,
        which ends with the terminal ``response.*`` event of the turn that handles
        the message (a new turn, the running turn if it took the message as an
        injection, or a continuation turn), or with the session's terminal status if
        a stop dropped the message.

        ``types``: only events of these types are yielded, besides the terminal
        ``response.*`` events and statuses that end the stream — for a caller that
        follows a turn only to its end (an ACP prompt, whose updates another
        subscription relays): the others are skipped inside the subscription.

        Resource handling: the subscription is released when the block exits.
        """
        return self._open_turn_stream(session_id, content, role, viewer, types)

    @asynccontextmanager
    async def _open_turn_stream(
        self,
        session_id: str,
        content: Any,
        role: str,
        viewer: str | None,
        types: Collection[str] | None,
    ) -> AsyncIterator[tuple[MessageAccepted, TurnEvents]]:
        await self._working()
        admits = self._visibility.event_filter(viewer)
        if types is not None:
            admits = _only(frozenset(types) | _ENDS, admits)
        turn = self._messages.open_turn_stream(
            session_id,
            content,
            role,
            viewer,
            deliver=self._placed.deliver,
            hold=self._placed.hold_for_delivery,
            admits=admits,
        )
        async with turn as opened:
            yield opened

    async def post_event(
        self, session_id: str, type: str, data: Any, *, viewer: str | None = None
    ) -> EventAnswer:
        """Handle one ``{type, data}`` event as the HTTP and WebSocket routes do.

        Returns the answer, a typed record (``to_dict()`` is the HTTP body): a
        :class:`MessageAccepted` for a message, a :class:`ResolveResult` for an
        approval, an :class:`ElicitationHeld` for an ``mcp_elicitation``, else an
        :class:`EventAccepted`.

        Raises:
            InvalidInput naming ``type`` or the bad ``data`` field; SessionNotFound.
        """
        event = parse_event(type, data)
        await self._working()
        if event.type == "message":
            await self._files.check_references(event.content, root="data.content", viewer=viewer)
            return await self.send_message(
                session_id, event.content, role=event.role, viewer=viewer
            )
        if isinstance(event.data, ApprovalData):
            approval = event.data
            resolved = await self.resolve_elicitation(
                session_id, approval.elicitation_id, approval.action, approval.content
            )
            return ResolveResult(resolved)
        if isinstance(event.data, McpElicitationData):
            params = elicitation_params(
                event.data.message, "mcp_elicitation", requestedSchema=event.data.requestedSchema
            )
            return ElicitationHeld(await self.hold_elicitation(session_id, params))
        if event.type == "interrupt":
            await self.interrupt(session_id)
        elif event.type == "stop_session":
            await self.stop_session(session_id)
        return EventAccepted()

    async def interrupt(self, session_id: str) -> bool:
        """Cancel the running turn, which ends ``cancelled``. False if none was running."""
        await self._working()
        return await self._placed.interrupt(await self._sessions.row(session_id))

    async def wait_settled(self, session_id: str) -> None:
        """Return once the session has nothing left to do: no turn running, and no
        message, inbox notice, background task or child work waiting for one (a child's
        own work counts through its dispatch, which is delivered only once the child
        settles). Returns at once for a session with nothing left.

        What ``omnigent run`` waits on before it ends, so an orchestrator's children
        finish and its wake-up turns answer; a terminal left open does not count. On a
        database several servers share, only the work this runtime runs is seen.

        Raises:
            SessionNotFound.

        Cancellation: stops waiting; the session's work goes on.
        """
        self._open()
        await self._sessions.row(session_id)
        waiter = self._actors.settled_waiter(session_id)
        if waiter is not None:
            await waiter.wait()

    async def stop_session(self, session_id: str) -> None:
        """Cancel the turn and everything else the session runs, and wait for it to end.

        Buffered messages are dropped, and what is pending on the session and its
        descendants is withdrawn: a hook request or policy ASK held by a caller
        outside the session is answered ``cancel`` (a hook answers deny) at once.
        It returns once the session's end is stored and — on a database several
        servers share — the holder has given the tree back if nothing else of it
        runs, so the next message may start its work on any server.
        """
        await self._working()
        await self._placed.stop(await self._sessions.row(session_id))

    # -- events out ----------------------------------------------------------------------

    @asynccontextmanager
    async def subscribe(
        self, session_id: str, after: int | None = None, *, viewer: str | None = None
    ) -> AsyncIterator[Subscription]:
        """The session's events with ``event_id > after`` (``None``: from now on).

        With ``viewer``, events about another session (a child's
        ``session.child_session.updated``, a descendant's mirrored elicitation) are
        skipped unless that user may read that session. The caller checks the
        viewer's access to ``session_id`` itself.

        Resource handling: the subscription is released when the block exits.
        Raises SessionNotFound.
        """
        self._open()
        await self._sessions.row(session_id)
        admits = self._visibility.event_filter(viewer)
        async with self._bus.subscribe(session_id, after, admits=admits) as subscription:
            yield subscription

    async def last_event_id(self, session_id: str) -> int:
        """The id of the newest event of the session (0 if none). Raises SessionNotFound.

        A subscription with ``after=`` this id gets exactly the events published from
        now on.
        """
        self._open()
        await self._sessions.row(session_id)
        return await self._bus.last_event_id(session_id)

    # -- elicitations and policies --------------------------------------------------

    async def resolve_elicitation(
        self, session_id: str, elicitation_id: str, action: str, content: Any = None
    ) -> bool:
        """Answer a pending elicitation owned by ``session_id``.

        Returns False (touching nothing) when ``session_id`` does not own it, or it is
        not pending.

        Raises:
            SessionNotFound; InvalidInput at ``action`` for anything but accept,
            decline or cancel, or at ``content`` when it nests too deep or is not JSON.
        """
        await self._working()
        await self._sessions.row(session_id)
        if action not in ACTIONS:
            raise InvalidInput.at("action", "must be one of 'accept', 'decline', 'cancel'")
        check_depth(content, loc="content")
        if action == "accept":
            check_content(content)  # it is stored and published with the answer
        row = await self._sessions.row(session_id)
        return await self._placed.resolve(row, elicitation_id, action, content)

    async def get_elicitation(
        self, session_id: str, elicitation_id: str, *, viewer: str | None = None
    ) -> ElicitationInfo:
        """An elicitation as ``session_id`` sees it: its own, or a descendant's.

        A pending one carries its ``request`` exactly as that session's stream showed
        it (a descendant's with ``params.target_session_id``, the id to resolve with).
        An id that is unknown or not shown on ``session_id`` is ``status="unknown"``,
        and so is a descendant's that ``viewer`` (when given) may not read.

        Raises:
            SessionNotFound.
        """
        self._open()
        row = await self._sessions.row(session_id)

        async def elsewhere(eid: str) -> ElicitationRequest | None:
            return await self._placed.visible(row, eid)

        remote = None if self._ownership.owns(session_id) else elsewhere
        if viewer is None:
            return await self._elicitations.info(session_id, elicitation_id, elsewhere=remote)
        return await self._elicitations.info(
            session_id,
            elicitation_id,
            owner_visible=lambda owner: self._visibility.may_read(owner, viewer),
            elsewhere=remote,
        )

    async def remember_answer(
        self,
        session_id: str,
        tool_name: str,
        action: str | None,
        *,
        phase: str = "tool_call",
    ) -> int:
        """Give a standing answer to elicitations about one tool in one session.

        From now on an elicitation of ``session_id`` whose ``params.tool_name`` is
        ``tool_name`` and ``params.phase`` is ``phase`` is answered ``action``
        (``accept`` or ``decline``) at once, without publishing anything: an editor's
        "always allow" / "always reject". ``None`` withdraws the standing answer. Such
        elicitations already waiting are answered too; returns how many. Kept in memory
        for the runtime's lifetime; deleting the session drops it.

        Raises:
            SessionNotFound; InvalidInput at ``action`` or ``tool_name``; Conflict: the
            session has 256 standing answers already (or the runtime 65,536).
        """
        self._open()
        await self._sessions.row(session_id)
        if action is not None and action not in ("accept", "decline"):
            raise InvalidInput.at("action", "must be 'accept', 'decline' or None")
        if not isinstance(tool_name, str) or not tool_name:
            raise InvalidInput.at("tool_name", "must be a tool name")
        return self._elicitations.remember(session_id, phase, tool_name, action)

    def standing_answer(
        self, session_id: str, tool_name: str, *, phase: str = "tool_call"
    ) -> str | None:
        """The standing answer :meth:`remember_answer` gave (``accept``/``decline``), if any."""
        self._open()
        return self._elicitations.standing(session_id, phase, tool_name)

    async def elicit(
        self, session_id: str, params: ElicitationParams, *, mark_waiting: bool = False
    ) -> Resolution:
        """Ask the person behind ``session_id`` and wait for the answer.

        The caller's task holds the elicitation (a hook request, say): if it is
        cancelled — the caller went away — the elicitation is withdrawn.

        Raises:
            SessionNotFound; InvalidInput when a field of ``params`` nests too deep.
        """
        await self._working()
        row = await self._sessions.row(session_id)
        _check_params_depth(params)
        return await self._placed.elicit(row, params, mark_waiting=mark_waiting)

    async def hold_elicitation(self, session_id: str, params: ElicitationParams) -> str:
        """Publish an elicitation the *session* holds until answered; returns its id.

        Unlike :meth:`elicit` this returns at once: the session's nursery keeps the
        elicitation open, and a stop (or delete, or shutdown) withdraws it.

        Raises:
            SessionNotFound; RuntimeClosed; Conflict if the session was stopped first;
            InvalidInput when a field of ``params`` nests too deep.
        """
        await self._working()
        _check_params_depth(params)
        return await self._placed.hold_elicitation(await self._sessions.row(session_id), params)

    # -- tools for callers outside a turn (the /mcp endpoint) ------------------------

    async def session_tools(self, session_id: str) -> tuple[ToolSchema, ...]:
        """The tools the session offers, as its harness is offered them.

        Its MCP servers' tools are included once a turn has connected them.

        Raises:
            SessionNotFound; RuntimeClosed; StoreBusy (records only).
        """
        await self._working()
        tenure = await self._here(await self._sessions.row(session_id))
        try:
            return await self._actors.actor(session_id).tool_schemas()
        finally:
            tenure.release()

    async def start_tool_call(
        self,
        session_id: str,
        name: str,
        arguments: Mapping[str, Any],
        *,
        ttl: float = DEFAULT_TTL,
    ) -> HeldToolCall:
        """Run one tool call in the session, through its policies, across requests.

        The call runs in the session's nursery (a stop cancels it). Wait on
        :meth:`HeldToolCall.wait_settled`: the call is then done (take the output
        with :meth:`HeldToolCall.collect`) or waits on a policy's ASK
        (``call.asking``, the published elicitation; resolve it as any other). Find
        the call again with :meth:`held_tool_call`. A call not collected within
        ``ttl`` seconds ends (a pending ASK is withdrawn).

        Raises:
            SessionNotFound; RuntimeClosed; StoreBusy (records only).
        """
        await self._working()
        tenure = await self._here(await self._sessions.row(session_id))
        try:
            call = HeldToolCall(session_id, name, dict(arguments), ttl)
            self._actors.actor(session_id).hold_tool_call(call)
        finally:
            tenure.release()
        return call

    async def _here(self, row: SessionRow) -> Tenure:
        """Hold the session's tree in this process, for a call that cannot be relayed.

        Raises:
            SessionElsewhere: another server holds it (a held tool call lives in its
            process: the caller must ask that server).
        """
        try:
            tenure = await self._ownership.enter(row.id, row.root_session_id)
        except Elsewhere as where:
            raise SessionElsewhere(row.id, where.server) from None
        except Moved:
            raise RuntimeClosed("the runtime is shutting down") from None
        assert tenure is not None
        return tenure

    def held_tool_call(self, session_id: str, call_id: str) -> HeldToolCall | None:
        """A call :meth:`start_tool_call` made on ``session_id`` that is not collected yet."""
        actor = self._live.actor(session_id)
        return None if actor is None else actor.held_call(call_id)

    async def keep_tool_call(self, session_id: str, call_id: str) -> ToolTask:
        """Keep a held call as a durable task: its start (now) and end go to the log.

        Returns once ``session.tool_task.updated`` (``working``) is stored: from then
        on :meth:`tool_task` finds the call by its id — live, or in the log after it
        ended, the server restarted or the session was stopped. Nobody needs to
        collect a kept call. Keeping a kept call again changes nothing.

        Raises:
            ToolCallNotFound: no such held call on the session.
        """
        await self._working()
        return await self._tool_tasks.keep(session_id, call_id)

    async def tool_task(self, session_id: str, call_id: str) -> ToolTask | None:
        """A kept call (:meth:`keep_tool_call`) by id: live here, else as the log has it.

        A call the log shows started but not ended, which runs nowhere any more, is
        ``failed``. ``None``: no kept call of that id on the session.

        Raises:
            SessionNotFound; SessionElsewhere: another server holds the session's tree
            (a live call is in its process: ask that server).
        """
        self._open()
        return await self._tool_tasks.find(await self._sessions.row(session_id), call_id)

    def cancel_tool_call(self, session_id: str, call_id: str) -> bool:
        """Cancel a held call that runs here (its output says so); whether there was one."""
        return self._tool_tasks.cancel(session_id, call_id)

    async def evaluate_policy(self, session_id: str, event: Any) -> Verdict:
        """Evaluate the session's policies (and the runtime defaults) on ``event``.

        ``event`` is a :class:`PolicyEvent` or its wire form ``{type, data,
        request_data?, context?}``. An ASK parks an elicitation on the session
        (``params.message = "<policy>: <reason>"``, phase ``tool_call``) and answers
        ALLOW on accept, DENY otherwise.

        Cancellation: withdraws a pending ASK.

        Raises:
            InvalidInput: a malformed event, or one nested too deep (at ``event…``).
        """
        await self._working()
        if isinstance(event, Mapping):
            check_depth(event, loc="event")
        elif isinstance(event, PolicyEvent):
            for name in ("data", "request_data", "context"):
                check_depth(getattr(event, name), loc=f"event.{name}")
        return await self._asking.evaluate_policy(session_id, event, ask=self._placed.elicit)

    # -- sharing -----------------------------------------------------------------------

    async def access_level(self, session_id: str, user_id: str) -> int:
        """The level ``user_id`` has on the session: 0 none, 1 read, 2 edit, 3 manage.

        Raises:
            SessionNotFound.
        """
        self._open()
        return await self._permissions.level(await self._sessions.row(session_id), user_id)

    async def list_grants(self, session_id: str) -> list[Grant]:
        """The owner, then every grant on the session itself. Raises SessionNotFound."""
        self._open()
        await self._sessions.row(session_id)
        return await self._permissions.list(session_id)

    async def grant(self, session_id: str, user_id: str, level: Any) -> Grant:
        """Give ``user_id`` ``level`` (1 read, 2 edit, 3 manage) on the session and below.

        Raises:
            SessionNotFound; InvalidInput at ``user_id`` or ``level``; Conflict when
            ``user_id`` owns the session or its root.
        """
        self._open()
        await self._sessions.row(session_id)
        granted = await self._permissions.grant(session_id, user_id, level)
        self._changes.grants_changed()  # the sessions feed: who reads what changed
        return granted

    async def revoke(self, session_id: str, user_id: str) -> bool:
        """Remove ``user_id``'s grant on the session; False if there was none.

        Raises:
            SessionNotFound; Conflict when ``user_id`` owns the session or its root.
        """
        self._open()
        await self._sessions.row(session_id)
        revoked = await self._permissions.revoke(session_id, user_id)
        if revoked:
            self._changes.grants_changed()
        return revoked

    # -- extension points ----------------------------------------------------------------

    def register_tool(self, fn: Any, **options: Any) -> Tool:
        """Offer a Python callable (sync or async) as a tool to every session.

        See :meth:`omnigent.core.ToolRegistry.register` for the options.
        """
        self._open()
        return self._tools.register(fn, **options)

    @asynccontextmanager
    async def open_client_tools(
        self, session_id: str, tools: Mapping[str, ClientTool]
    ) -> AsyncIterator[None]:
        """Run these tools of the session with ``tools`` (a client's) while the block runs.

        ``tools`` maps a tool name (``sys_os_read``, say) to an async function taking
        the decoded argument object and returning the tool's output string: an
        editor's connection reads and writes through the editor this way. Policies
        still decide whether a call runs; only the running is replaced, and only for
        tools the session offers. The latest provider of a tool wins; when its block
        ends, the one before (or the built-in implementation) is used again. Whatever
        the function raises becomes the call's ``Error: …`` output.

        Raises:
            SessionNotFound; InvalidInput at ``tools`` for a name that is not a string.
        """
        self._open()
        await self._sessions.row(session_id)
        for name, fn in tools.items():
            if not isinstance(name, str) or not name or not callable(fn):
                raise InvalidInput.at("tools", "maps tool names to async functions")
        with self._client_tools.supply(session_id, tools):
            yield

    @asynccontextmanager
    async def open_client_mcp_servers(
        self,
        session_id: str,
        servers: Sequence[McpServerSpec],
        *,
        from_client: bool = False,
        connect_timeout: float = 30.0,
    ) -> AsyncIterator[ClientMcpReport]:
        """Connect MCP servers a client supplies to one session while the block runs.

        What an ACP connection does with the ``mcpServers`` of ``session/new`` and
        ``session/load``: the servers' tools (``mcp__<name>__<tool>``) are offered to
        every turn of the session that starts while the block is open, through the
        session's policies like a spec's own MCP servers'; their processes end when
        the block exits, or when the session is stopped (a later turn starts them
        again) or deleted. Nothing about them is stored. See
        :mod:`omnigent.core.work._client_mcp`.

        Args:
            session_id: the session.
            servers: the servers (names must differ); a stdio one runs in the
                session's working directory with its ``env`` merged onto the
                non-secret basics of this process's environment.
            from_client: the servers come from a remote client (the WebSocket
                transport), not the operator: a stdio server is connected only if its
                program is in ``open_runtime(allowed_commands=...)``, an HTTP one only
                if its URL is under one of ``allowed_mcp_urls``; the rest are refused.
            connect_timeout: seconds each server may take to start.

        Yields:
            What was done with each server: connected, refused (never started), or
            failed to start (the block goes on without it).

        Raises:
            SessionNotFound. InvalidInput at ``servers`` (more than 32, or two of one
            name). ConfigError: the ``mcp`` extra is not installed.
            RuntimeClosed, StoreBusy: the runtime cannot run work.

        Cancellation: leaving the block stops every server (shielded, bounded).
        """
        await self._working()
        await self._sessions.row(session_id)
        check_client_servers(servers)
        if not mcp_installed():
            raise ConfigError(f"MCP servers need the mcp extra: {MCP_INSTALL_HINT}")
        connect = client_connection(
            session_id,
            elicitations=self._elicitations,
            workdir=functools.partial(self._specs.workdir, session_id),
            guard=self._options.client_trust.mcp_urls,
        )
        options = self._options

        def refuse(server: McpServerSpec) -> str | None:
            if not from_client:
                return None
            return client_server_refusal(server, options.client_trust)

        async with open_server_set(
            self._client_mcp,
            session_id,
            servers,
            connect=connect,
            refuse=refuse,
            timeout=connect_timeout,
        ) as report:
            yield report

    def register_harness(
        self,
        name: str,
        factory: HarnessFactory,
        *,
        aliases: Sequence[str] = (),
        models: ModelRule | None = None,
        requires: Callable[[], str | None] | None = None,
        check_spec: Callable[[AgentSpec], list[ErrorDetail]] | None = None,
        accepts_model: bool = True,
        native: bool = False,
    ) -> None:
        """Make a harness available under ``name`` and ``aliases``.

        The rest tell the runtime what the harness can run before it starts one: the
        models of a single-vendor harness, whether its program is installed here,
        spec keys it cannot honour, whether a model chosen per session reaches it, and
        whether it runs a vendor's agent in a process of its own (see
        :class:`omnigent.harnesses.HarnessInfo`).
        """
        self._open()
        self._options.harnesses.register(
            name,
            factory,
            aliases=aliases,
            models=models,
            requires=requires,
            check_spec=check_spec,
            accepts_model=accepts_model,
            native=native,
        )


class _ViewerReads:
    """How a session watch reads sessions: as :meth:`Runtime.get_session` and
    :meth:`Runtime.list_sessions` show them to ``viewer``."""

    def __init__(self, runtime: Runtime, viewer: str | None) -> None:
        self._runtime = runtime
        self._viewer = viewer

    async def page(self, after: str | None, limit: int) -> SessionPage:
        return await self._runtime.list_sessions(limit=limit, after=after, viewer=self._viewer)

    async def read(self, session_id: str) -> SessionSnapshot | None:
        runtime = self._runtime
        if not await runtime._visibility.may_read(session_id, self._viewer):
            return None
        try:
            return await runtime.get_session(session_id, viewer=self._viewer)
        except SessionNotFound:
            return None


def _check_params_depth(params: ElicitationParams) -> None:
    """Refuse elicitation params whose free-form fields nest too deep to encode."""
    for name in ("tool_input", "requestedSchema", "ask_user_question"):
        check_depth(getattr(params, name), loc=f"params.{name}")


# The events that may end a turn stream (kept whatever ``types`` a caller asks for).
_ENDS = frozenset({"response.completed", "response.failed", "response.cancelled", "session.status"})


def _only(types: frozenset[str], admits: EventFilter | None) -> EventFilter:
    """A filter admitting only ``types`` (and what ``admits`` admits of them)."""

    async def only(event: Event) -> bool:
        if event.type not in types:
            return False
        return admits is None or await admits(event)

    return only
