"""The runtime: the library's API, and the owner of every session's work.

A :class:`Runtime` is made by :func:`~omnigent.core.open_runtime`, which owns its
lifetime; it has no public constructor. Lifetimes nest ``Runtime ⊃ SessionActor ⊃
Turn ⊃ tool call``; transports call the methods here and nothing else.

The runtime composes small objects, each with one job, and reads as the API over
them: :class:`~._agents.AgentCatalog` (agents), :class:`~._sessions.SessionRecords`
(session rows and views), :class:`~._messages.Messages` (messages in, turn streams),
:class:`~._asking.Asking` (held elicitations, policy verdicts), and the
:class:`~._host.ActorHost` that starts session actors. The API is long, so it is
split by subject into mixins over one base that declares those parts
(:mod:`._runtime_base`): records — agents, sessions, resources, files
(:mod:`._runtime_records`) —, events in and out (:mod:`._runtime_events`), and
asking — elicitations, policies, held tool calls, sharing (:mod:`._runtime_asking`).
This module builds the parts and holds the runtime's life and extension points.

State: ``opening → open → closing → closed``. Every call on a closed runtime raises
:class:`~omnigent.errors.RuntimeClosed`; while closing, calls that would start work
raise it too. A records-only runtime (``open_runtime(..., exclusive=False)``) reads
everything and writes records (agents, sessions, files), but any call that would
publish an event, delete, or run work raises :class:`~omnigent.errors.StoreBusy`.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Collection, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, Literal, NoReturn

import httpx
import trio

from ..._ids import now
from ...errors import (
    ConfigError,
    ErrorDetail,
    InvalidInput,
)
from ...harnesses.base import HarnessFactory
from ...harnesses.registry import HarnessRegistry, ModelRule
from ...mcp import INSTALL_HINT as MCP_INSTALL_HINT
from ...mcp import mcp_installed
from ...model import (
    Health,
    ServerInfo,
)
from ...spec import AgentSpec, McpServerSpec, PolicySpec
from ...stores import Store
from ...tools.terminals import TmuxServer
from ..asking import Elicitations, Permissions, Visibility
from ..bus import EventBus, SessionChanges
from ..cluster import Ownership, SharedOwnership, SoloOwnership
from ..tools import PolicyAllowlist, ProvidedTool, Tool, ToolPlace, ToolRegistry
from ..work import (
    CANCEL_GRACE,
    BlockingCalls,
    ClientMcpReport,
    check_client_servers,
    client_connection,
    client_server_refusal,
    open_server_set,
)
from ._agents import AgentCatalog
from ._asking import Asking
from ._files import FileService
from ._host import ActorHost
from ._messages import Messages
from ._orchestration import Orchestration
from ._placed import PlacedCalls
from ._runtime_base import RuntimeState
from ._runtime_events import EventsAPI
from ._runtime_records import RecordsAPI
from ._sessions import SessionRecords
from ._shutdown import AFTER_GRACE, Stopping

if TYPE_CHECKING:
    from ...processes import ProcessManager

__all__ = ["Runtime", "RuntimeState"]

log = logging.getLogger(__name__)


class _NoPublicConstructor(type):
    """Only ``open_runtime`` makes a runtime (it owns the lifetime), as trio does."""

    def __call__(cls, *args: Any, **kwargs: Any) -> NoReturn:
        raise TypeError(f"{cls.__name__} has no public constructor; use open_runtime()")

    def _create(cls, *args: Any, **kwargs: Any) -> Any:
        return super().__call__(*args, **kwargs)


class Runtime(EventsAPI, RecordsAPI, metaclass=_NoPublicConstructor):
    """Sessions, agents, tools and harnesses behind one store. Made by ``open_runtime``."""

    def __init__(
        self,
        *,
        store: Store,
        bus: EventBus,
        nursery: trio.Nursery,
        http: httpx.AsyncClient,
        harnesses: HarnessRegistry,
        place: ToolPlace,
        default_policies: Sequence[PolicySpec] = (),
        policy_allowlist: PolicyAllowlist | None = None,
        allowed_commands: Collection[str] = (),
        allowed_mcp_urls: Sequence[str] = (),
        records_only: bool = False,
        processes: ProcessManager | None = None,
        tmux: TmuxServer | None = None,
        shutdown_grace: float = 5.0,
        ownership: Ownership | None = None,
        changes: SessionChanges | None = None,
    ) -> None:
        self.state = RuntimeState.OPENING
        # The sessions feed (watch_sessions); the bus tells it of stored events.
        self._changes = changes if changes is not None else SessionChanges()
        self._ownership: Ownership = ownership if ownership is not None else SoloOwnership()
        self._started_at = now()
        self._processes = processes
        self.records_only = records_only
        self._allowed_mcp_urls = tuple(allowed_mcp_urls)
        self._store = store
        self._bus = bus
        self._harnesses = harnesses
        # A cancelled sync tool's thread gets this long to return (a shutdown's
        # grace, if shorter), then its turn ends without it.
        self._threads = BlockingCalls(min(CANCEL_GRACE, shutdown_grace))
        self._tools = ToolRegistry(self._threads)
        self._files = FileService(store)
        self._elicitations = Elicitations(store, bus)
        self._permissions = Permissions(store)
        self._host = ActorHost(
            nursery=nursery,
            store=store,
            bus=bus,
            http=http,
            harnesses=harnesses,
            tools=self._tools,
            files=self._files,
            elicitations=self._elicitations,
            place=place,
            default_policies=default_policies,
            policy_allowlist=policy_allowlist or PolicyAllowlist(load_entry_points=False),
            allowed_commands=allowed_commands,
            permissions=self._permissions,
            processes=processes,
            tmux=tmux,
            threads=self._threads,
            ownership=self._ownership,
        )
        self._stopping = Stopping(
            host=self._host,
            elicitations=self._elicitations,
            threads=self._threads,
            store=store,
            grace=shutdown_grace,
        )
        self._agents = AgentCatalog(store, self._host)
        self._sessions = SessionRecords(
            store=store,
            bus=bus,
            host=self._host,
            files=self._files,
            elicitations=self._elicitations,
        )
        self._messages = Messages(
            store=store, bus=bus, host=self._host, files=self._files, sessions=self._sessions
        )
        self._asking = Asking(self._host, self._elicitations, self._sessions)
        self._visibility = Visibility(self._permissions, self._sessions.row)
        self._host.on_turn_changed = self._sessions.announce_to_parent
        self._host.subagents.announce = self._sessions.announce_to_parent
        self._host.subagents.stop_session = self._stop_and_wait
        self._host.orchestration = Orchestration(
            store=store,
            host=self._host,
            sessions=self._sessions,
            messages=self._messages,
            agents=self._agents,
            home=place.home,
        )
        # Calls on live work run where the session's tree is held (see _ownership).
        self._placed = PlacedCalls(
            ownership=self._ownership,
            store=store,
            host=self._host,
            elicitations=self._elicitations,
            sessions=self._sessions,
            asking=self._asking,
            messages=self._messages,
            stop_here=self._stop_here,
            stop_tree_here=self._stop_tree_here,
        )
        self._messages.deliver = self._placed.deliver
        self._sessions.announce = self._placed.announce
        self._sessions.pending_elsewhere = self._placed.pending
        self._asking.elicit = self._placed.elicit

    # -- state ---------------------------------------------------------------------

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
        return self._allowed_mcp_urls

    @property
    def server_id(self) -> str:
        """This server's name (``serve --server-id``; default ``HOST:PID``)."""
        return self._ownership.server_name

    async def list_servers(self) -> list[ServerInfo]:
        """The live servers on this runtime's database, and how many sessions each runs.

        On a database one process owns (SQLite, memory) that is this process alone.
        """
        self._open()
        if not isinstance(self._ownership, SharedOwnership):
            sessions = len(self._host.actors)
            return [ServerInfo(self.server_id, self._started_at, sessions)]
        rows = await self._ownership.servers()
        return [ServerInfo(r.name, r.started_at, r.sessions) for r in rows]

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

    def statistics(self) -> dict[str, int]:
        """Live work: sessions with an actor, tasks in the runtime nursery, subscribers,
        pending elicitations, sub-agent dispatches not yet delivered."""
        return {
            "active_sessions": len(self._host.actors),
            "tasks": self._host.task_count,
            "subscribers": self._bus.statistics()["subscribers"],
            "elicitations": self._elicitations.waiting,
            "sub_agent_work": self._host.subagents.watching,
        }

    # -- extension points ----------------------------------------------------------------

    def register_tool(self, fn: Any, **options: Any) -> Tool:
        """Offer a Python callable (sync or async) as a tool to every session.

        See :meth:`omnigent.core.ToolRegistry.register` for the options.
        """
        self._open()
        return self._tools.register(fn, **options)

    @asynccontextmanager
    async def open_tool_provider(
        self, session_id: str, tools: Mapping[str, ProvidedTool]
    ) -> AsyncIterator[None]:
        """Run these tools of the session with ``tools`` while the block runs.

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
        with self._host.providers.provide(session_id, tools):
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
        host = self._host
        connect = client_connection(host, session_id)

        def refuse(server: McpServerSpec) -> str | None:
            if not from_client:
                return None
            return client_server_refusal(server, host.allowed_commands, self._allowed_mcp_urls)

        async with open_server_set(
            host.client_mcp,
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
    ) -> None:
        """Make a harness available under ``name`` and ``aliases``.

        The rest tell the runtime what the harness can run before it starts one: the
        models of a single-vendor harness, whether its program is installed here,
        spec keys it cannot honour, and whether a model chosen per session reaches it
        (see :class:`omnigent.harnesses.HarnessInfo`).
        """
        self._open()
        self._harnesses.register(
            name,
            factory,
            aliases=aliases,
            models=models,
            requires=requires,
            check_spec=check_spec,
            accepts_model=accepts_model,
        )
