"""Opening a runtime: the root of every lifetime.

:func:`open_runtime` opens the store, the HTTP client harnesses use, the tmux server
terminals run in, the event bus writer and the root nurseries, recovers what a
previous process left in flight (:mod:`._recovery`), and yields a
:class:`~omnigent.core.runtime._runtime.Runtime`. Leaving the block cancels every session's
work (each running turn still ends with a terminal ``cancelled`` status), waits for
it, lets the bus persist what is queued, and closes the store. Nothing it started
outlives it, and leaving takes ``shutdown_grace`` plus about a second at most for the
sessions, the event writer and the store: what is stuck after the grace — a sync
tool's thread, a store call on a locked database — is abandoned with a log line
naming it.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import httpx
import trio

from ..._ids import new_id
from ...harnesses.base import HarnessFactory
from ...observability import Metrics
from ...outbound import DeferredTransport, UrlAllowList, guarded_mounts
from ...processes import DEFAULT_GRACE, ProcessTrees, open_process_manager, open_process_trees
from ...spec import PolicySpec
from ...stores import Store, cluster_of, open_store
from ...tools.terminals import TmuxServer, open_tmux_server
from ..bus import EventBus, SessionChanges
from ..cluster import DEFAULT_LEASE_TTL, Ownership, SoloOwnership, default_server_name
from ..tools import PolicyFunctions, Runners
from ..work import recover_work
from ._inputs import MAX_MESSAGE_BYTES
from ._options import runtime_options
from ._recovery import recover
from ._runtime import Runtime, RuntimeState

if TYPE_CHECKING:
    from ..cluster.shared import SharedOwnership

__all__ = ["open_runtime"]

log = logging.getLogger(__name__)

# After the sessions' grace: how long the writer may take to persist what is queued.
_WRITER_GRACE = 0.4


@asynccontextmanager
async def open_runtime(
    db: str | None = None,
    *,
    http_client: httpx.AsyncClient | None = None,
    load_entry_points: bool = True,
    home: str | Path | None = None,
    workspace: str | Path | None = None,
    default_cwd: str | Path | None = None,
    workspace_roots: Iterable[str | Path] | None = None,
    purge_workspaces: bool = False,
    default_policies: Sequence[Mapping[str, Any] | PolicySpec] = (),
    safe_defaults: bool = False,
    policy_functions: PolicyFunctions | None = None,
    policy_modules: Iterable[str] = (),
    tool_functions: PolicyFunctions | None = None,
    tool_modules: Iterable[str] = (),
    allowed_commands: Iterable[str] = (),
    allowed_env: Iterable[str] = (),
    allowed_mcp_urls: Iterable[str] = (),
    allowed_model_urls: Iterable[str] = (),
    max_message_bytes: int = MAX_MESSAGE_BYTES,
    exclusive: bool = True,
    shutdown_grace: float = DEFAULT_GRACE,
    harness_idle_timeout: float | None = None,
    server_id: str | None = None,
    lease_ttl: float = DEFAULT_LEASE_TTL,
    harnesses: Mapping[str, HarnessFactory] | None = None,
    runners: Runners | None = None,
) -> AsyncIterator[Runtime]:
    """Open a runtime on a store; close everything it started when the block exits.

    Args:
        db: ``sqlite:///path.db`` (or a path); ``None`` keeps everything in memory;
            ``postgresql://…`` a database several servers share (see
            ``docs/deploy.md``).
        http_client: the client harnesses use for model endpoints (tests pass one
            over ``httpx.MockTransport``); by default the runtime owns one.
        load_entry_points: register harnesses from the ``omnigent.harnesses`` group
            and allow the policy functions of the ``omnigent.policies`` group.
        home: where per-session workspaces live (default ``$OMNIGENT_HOME``, else
            ``~/.omnigent``).
        workspace: the directory an agent's ``os_env.cwd: .`` means (default: the
            current directory).
        default_cwd: where the OS tools of an agent whose spec names no
            ``os_env.cwd`` act. ``None`` (the default, and what ``serve`` uses): each
            session gets its own workspace under ``home``. ``omnigent run`` passes
            the directory it was run in.
        workspace_roots: the directories a session's own directory must be inside
            when a client names it (ACP's ``cwd``; see
            :meth:`Runtime.check_session_directory`) — and it may be neither inside
            nor around ``home`` (``serve``: its workspace, or ``--workspace-root``).
            ``None`` (the default): no fence; the library's caller is the operator.
        purge_workspaces: deleting a session also deletes its per-session workspace
            (``serve --purge-workspaces``); ``delete_session(purge_workspace=...)``
            decides for one call.
        default_policies: policies applied to every session after its agent's own.
            Their ``function`` references are the caller's own, and may name any
            importable callable.
        safe_defaults: when no policy has an opinion, ask before a command runs or a
            file is written outside the working directory (``omnigent run`` does;
            see ``docs/policies.md``, "Safe defaults").
        policy_functions: callables an agent's ``function`` policy may name, by name
            (or a list of callables, each named ``"module:qualname"``).
        policy_modules: modules whose own callables an agent's ``function`` policy
            may name (``serve --policy-module``). Without these, and apart from the
            entry points, an agent's ``function`` policy can name nothing: a
            reference to any other module is refused (``SpecError`` when the agent
            is registered) and nothing is imported for it.
        tool_functions, tool_modules: the Python tools a client's spec (one registered
            with ``from_client=True``: the HTTP API's, an agent's ``sys_session_create``)
            may name in ``tools.python`` — callables by name (or a list, each named
            ``"module:qualname"``), and modules whose own callables it may name
            (``serve --tool-module``). The operator's own specs may name any callable
            they can import; a client's may name nothing else, and nothing is imported
            for it.
        allowed_commands: programs a spec registered with ``from_client=True`` (the
            HTTP API's) may name to run — an external harness's or a stdio MCP
            server's ``command``, a terminal's ``command`` (``serve --allow-command``).
            By default a client's spec may name none; the operator's own specs may
            name any. The same list says which stdio MCP servers a remote client may
            supply (:meth:`Runtime.open_client_mcp_servers` with ``from_client``).
        allowed_env: environment variables (names, or prefixes ending in ``*``) a
            spec registered with ``from_client=True`` may set for the programs it
            names, and a remote client for its stdio MCP servers (``serve
            --allow-env``); by default none — ``LD_PRELOAD`` would run any code.
        allowed_mcp_urls: URL prefixes (``https://mcp.example/``) under which a
            client's spec (``from_client=True``) and a remote client's ACP session may
            name HTTP MCP servers (``serve --allow-mcp-url``); by default none — the
            server fetching URLs a client chose would let it reach what only the server
            can. Such a URL is fetched through the outbound guard
            (:mod:`omnigent.outbound`).
        allowed_model_urls: URL prefixes under which a client's spec may name its
            model endpoint (``executor.config.base_url``; ``serve --allow-model-url``);
            by default none. The runtime's own HTTP client reaches them through the
            outbound guard.
        max_message_bytes: the largest message a session takes (text and inline
            images, UTF-8; default 8 MiB; ``serve --max-message-bytes``): a larger one
            is refused with ``PayloadTooLarge`` (``413``) and nothing is stored.
        exclusive: own the database (the default). One process at a time may run
            turns on a database file: their event logs and recovery would collide.
            ``False`` opens it beside a running owner for records only — agents,
            sessions, items, files — and refuses what would publish events, delete
            or run turns (``StoreBusy``).
        shutdown_grace: seconds the sessions get to end when the block exits (then
            whatever still blocks is abandoned; see the module docstring), and a
            harness process between SIGTERM and SIGKILL (on shutdown, idle reaping
            and respawns).
        harness_idle_timeout: seconds an external harness process may sit unused
            before it is reaped (default ``$OMNIGENT_HARNESS_IDLE_TIMEOUT``, else one
            hour; ``0`` never reaps). A process with a turn in flight is never reaped.
        server_id: this server's name among those sharing a database (default
            ``HOST:PID``); ``GET /v1/servers`` lists it.
        lease_ttl: (PostgreSQL) seconds a session tree's lease outlives its holder's
            last renewal: how soon another server takes over after a crash.
        harnesses: harness factories by name, registered before the runtime recovers
            what a previous process left (a session whose turn resumes at start
            needs its harness then; one registered later with
            :meth:`Runtime.register_harness` comes too late for that turn).
        runners: the runners sessions may be bound to (``serve`` passes its hub, see
            ``docs/runners.md``); without it a runner-bound session's turn fails.

    Raises:
        StoreBusy: ``exclusive`` and another runtime owns the database file.
        InvalidInput: a bad ``policy_modules`` / ``tool_modules`` name or
            ``policy_functions`` / ``tool_functions`` entry, an ``allowed_mcp_urls`` or
            ``allowed_model_urls`` entry that is not an http(s) URL prefix, or an
            ``allowed_env`` entry that is not a name.

    Cancellation: cancelling the block cancels every turn; each still publishes its
    terminal status before the store closes.
    """
    options = runtime_options(
        load_entry_points=load_entry_points,
        home=home,
        workspace=workspace,
        default_cwd=default_cwd,
        workspace_roots=workspace_roots,
        purge_workspaces=purge_workspaces,
        default_policies=default_policies,
        safe_defaults=safe_defaults,
        policy_functions=policy_functions,
        policy_modules=policy_modules,
        tool_functions=tool_functions,
        tool_modules=tool_modules,
        allowed_commands=allowed_commands,
        allowed_env=allowed_env,
        allowed_mcp_urls=allowed_mcp_urls,
        allowed_model_urls=allowed_model_urls,
        max_message_bytes=max_message_bytes,
        exclusive=exclusive,
        shutdown_grace=shutdown_grace,
        harness_idle_timeout=harness_idle_timeout,
        harnesses=harnesses,
        runners=runners,
    )
    body_error: BaseException | None = None
    rt: Runtime | None = None
    try:
        # Several servers may share a PostgreSQL database: each member is an instance.
        instance = new_id("inst") if exclusive else None
        async with (
            open_store(db, exclusive=exclusive, instance=instance) as store,
            _open_ownership(store, exclusive, server_id, lease_ttl) as ownership,
            _open_http(http_client, options.client_trust.model_urls) as http,
            _open_terminals(exclusive) as tmux,
            trio.open_nursery() as services,
            _open_trees(exclusive, services) as trees,
        ):
            changes = SessionChanges()
            metrics = Metrics()
            bus = EventBus(
                store, ownership, records_only=not exclusive, changes=changes, metrics=metrics
            )
            await services.start(bus.run)
            try:
                async with (
                    open_process_manager(
                        options.place.home,
                        grace=shutdown_grace,
                        idle_timeout=options.harness_idle_timeout,
                        sweep=exclusive,
                    ) as processes,
                    trio.open_nursery() as nursery,
                ):
                    rt = Runtime._create(
                        metrics=metrics,
                        options=options,
                        store=store,
                        bus=bus,
                        nursery=nursery,
                        http=http,
                        processes=processes,
                        tmux=tmux,
                        trees=trees,
                        ownership=ownership,
                        changes=changes,
                    )
                    # This server's runner links, published for the others (PostgreSQL).
                    await services.start(rt._runners.run)
                    if ownership.shared:
                        shared = cast("SharedOwnership", ownership)
                        await _join(rt, store, bus, shared, services)
                    elif exclusive:
                        resumption = await recover(store, bus)
                        # Sub-agent work a previous process left open: settled from
                        # the store, and each parent woken to read the result.
                        parents = await recover_work(store, bus)
                        resumption.start(rt._actors, also_inbox=parents)
                    rt.state = RuntimeState.OPEN
                    try:
                        yield rt
                    except BaseException as exc:
                        body_error = exc
                        raise
                    finally:
                        with trio.CancelScope(shield=True):
                            await rt.shutdown()
            finally:
                with trio.CancelScope(shield=True):
                    await _close_bus(bus, store)
                services.cancel_scope.cancel()  # the remote feed; the writer has returned
                if rt is not None:
                    rt.state = RuntimeState.CLOSED
    except BaseExceptionGroup as group:
        # The user's own exception comes back to them as itself, not wrapped in the
        # groups of the nurseries it passed through (as trio-websocket does).
        if body_error is not None and _only(group, body_error):
            raise body_error from None
        raise


def _only(group: BaseExceptionGroup[BaseException], exc: BaseException) -> bool:
    """Whether ``exc`` is the one leaf of ``group`` (however deeply nested)."""
    leaves: list[BaseException] = []
    pending: list[BaseException] = [group]
    while pending:
        current = pending.pop()
        if isinstance(current, BaseExceptionGroup):
            pending.extend(current.exceptions)
        else:
            leaves.append(current)
    return leaves == [exc]


@asynccontextmanager
async def _open_terminals(exclusive: bool) -> AsyncIterator[TmuxServer | None]:
    """The runtime's tmux server (terminals); none for a records-only runtime.

    Opening it kills what runtimes that died without closing left running; closing it
    kills this runtime's server and whatever its panes still run.
    """
    if not exclusive:
        yield None
        return
    async with open_tmux_server() as server:
        yield server


@asynccontextmanager
async def _open_trees(
    exclusive: bool, services: trio.Nursery
) -> AsyncIterator[ProcessTrees | None]:
    """The process trees sessions' shell commands run in; none for a records-only
    runtime. Whether cgroups can be had is probed in ``services`` while the runtime
    opens the rest (a command waits for it); the probe then sweeps what dead runtimes
    left in their cgroups."""
    if not exclusive:
        yield None
        return
    async with open_process_trees(nursery=services) as trees:
        yield trees


@asynccontextmanager
async def _open_http(
    client: httpx.AsyncClient | None, guarded: UrlAllowList
) -> AsyncIterator[httpx.AsyncClient]:
    """The client harnesses reach model endpoints with: ``client``, else one the
    runtime owns, whose requests to a ``guarded`` origin (URLs a client's spec may
    name) go through the outbound guard."""
    if client is not None:
        yield client
        return
    timeout = httpx.Timeout(connect=10.0, read=300.0, write=30.0, pool=30.0)
    # httpx's own transport (what the client would make), made on the first request:
    # making it loads the CA certificates, which a server pays before it answers.
    transport = DeferredTransport(httpx.AsyncHTTPTransport)
    async with httpx.AsyncClient(
        timeout=timeout, mounts=guarded_mounts(guarded), transport=transport
    ) as owned:
        yield owned


@asynccontextmanager
async def _open_ownership(
    store: Store, exclusive: bool, server_id: str | None, lease_ttl: float
) -> AsyncIterator[Ownership]:
    """Shared ownership on a cluster store, else this process owns everything."""
    name = server_id or default_server_name()
    if not exclusive or cluster_of(store) is None:
        yield SoloOwnership(name)
        return
    # Shared ownership, and the placed calls as JSON, are imported by a runtime on a
    # cluster store only: a server on SQLite answers without them (issue 32).
    from ..cluster.shared import SharedStore, open_shared_ownership
    from ._placed_calls import PLACED_WIRE

    shared: SharedStore = store  # type: ignore[assignment]  # cluster_of said so

    async with open_shared_ownership(shared, PLACED_WIRE, name, ttl=lease_ttl) as ownership:
        yield ownership


async def _join(
    rt: Runtime,
    store: Store,
    bus: EventBus,
    ownership: SharedOwnership,
    services: trio.Nursery,
) -> None:
    """Plug the runtime into the cluster: its calls, recovery, and the remote feed.

    Then recovers what dead servers left (the first sweep), as a lone process does
    at start.
    """
    from ..cluster.shared import Member, RemoteFeed

    feed = RemoteFeed(store, bus, ownership.instance, ownership.owns)
    await services.start(feed.run)

    async def recover_tree(root_id: str) -> None:
        sessions = {root_id, *await store.descendant_ids(root_id)}
        resumption = await recover(store, bus, sessions)
        parents = await recover_work(store, bus, sessions)
        resumption.start(rt._actors, also_inbox=parents)

    member = Member(
        serve=rt._placed.router.serve,
        recover=recover_tree,
        lost=rt._live.stop,
        released=bus.disown,
        events=feed.notify,
    )
    await ownership.join(member)


async def _close_bus(bus: EventBus, store: Store) -> None:
    """Let the writer persist what is queued, for at most :data:`_WRITER_GRACE`.

    A writer still stuck then (a database locked by another process) is abandoned:
    what it holds is dropped with a log line, and the store stops waiting. One that
    has not ended half a grace later (a store call that does not give way) is
    cancelled; every step has a deadline.
    """
    await bus.close()
    with trio.move_on_after(_WRITER_GRACE):
        await bus.drained.wait()
        return
    bus.abandon()
    waits = store.abandon()
    log.warning("shutdown: the event writer is stuck; abandoning %d store calls", waits)
    with trio.move_on_after(_WRITER_GRACE / 2):
        await bus.drained.wait()
        return
    bus.cancel_writer()  # logs what it drops
    with trio.move_on_after(_WRITER_GRACE / 2):
        await bus.drained.wait()
        return
    log.error(
        "shutdown: the event writer did not end when cancelled (a store call that "
        "cannot be abandoned); leaving the runtime waits for it"
    )
