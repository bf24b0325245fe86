"""MCP servers a client supplies for one session while it is connected (ACP ``mcpServers``).

An editor passes the MCP servers its user configured with ACP's ``session/new`` and
``session/load``. :meth:`~omnigent.Runtime.open_client_mcp_servers` connects them for
one session for as long as its block runs — the connection's life, not the store's:

* Their tools join the session's tool list (``mcp__<server>__<tool>``, as a spec's own
  MCP servers' do) for every turn that starts while the block is open, and every call
  takes the session's one tool path, policies included
  (:mod:`omnigent.core.tools.session._session_tools`). A name the session already offers (a spec
  server of the same name) keeps its own tool.
* A stdio server runs in the session's working directory, in its own process group,
  with the environment the client gave merged onto the non-secret basics
  (:func:`~omnigent.processes._manager.base_environment`) — nothing else of the
  server's environment reaches it.
* Its processes end when the block exits, and when the session is stopped or deleted
  (stdin closed, then SIGTERM to the group, SIGKILL after a grace — the SDK's
  shutdown). After a stop the next turn connects them again, as it would a spec's.
* Nothing about them is written to the store: a later client cannot make the server
  run a command another client once supplied.

Trust: a server a *client of a server* supplies (``from_client=True``, the WebSocket
transport) is connected only if the operator allowed it (:class:`~omnigent.spec.ClientTrust`,
the rule :mod:`omnigent.spec._trust` applies to client specs) — a stdio server's
program by name and each of its ``env`` variables by name, an HTTP server's URL by
prefix (a server fetching URLs a remote client chose is a request forgery risk; it is
then fetched through :mod:`omnigent.outbound`'s guard). Others are refused, and
reported.

Resource handling: :class:`ClientServerSet` is one block's servers; each server is held
by one task of the block's own nursery. :class:`ClientMcp` (one per runtime) only
indexes the open sets by session, for the tools and for stops; it owns no task.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
import trio

from ...errors import InvalidInput, OmnigentError
from ...harnesses.base import ToolSchema
from ...model import ElicitationParams
from ...outbound import UrlAllowList, url_prefix_problem
from ...processes import base_environment
from ...spec import ClientTrust, McpServerSpec
from ..asking import Elicitations

if TYPE_CHECKING:
    from ...mcp import McpServers

__all__ = [
    "MAX_CLIENT_SERVERS",
    "MAX_SERVERS_PER_BLOCK",
    "ClientMcp",
    "ClientMcpReport",
    "ClientServerSet",
    "check_client_servers",
    "client_connection",
    "client_server_refusal",
    "open_server_set",
    "url_prefix_problem",
]

log = logging.getLogger(__name__)

MAX_CLIENT_SERVERS = 256
"""Client-supplied MCP servers connected at once in one runtime (beyond: not started)."""

MAX_SERVERS_PER_BLOCK = 32
"""Servers one :meth:`~omnigent.Runtime.open_client_mcp_servers` block may connect."""

Connect = Callable[[McpServerSpec], "McpServers"]
# How long the servers of a closing block get to stop (each stop is bounded itself).
_CLOSE_GRACE = 15.0


@attrs.frozen
class ClientMcpReport:
    """What :meth:`~omnigent.Runtime.open_client_mcp_servers` did with each server.

    Attributes:
        connected: names of the servers connected (their tools are offered).
        refused: ``(name, reason)`` of servers the trust rule left out (never started).
        failed: ``(name, message)`` of servers that did not start or list their tools.
        tools: the tool names the connected servers added to the session.
    """

    connected: tuple[str, ...] = ()
    refused: tuple[tuple[str, str], ...] = ()
    failed: tuple[tuple[str, str], ...] = ()
    tools: tuple[str, ...] = ()


def check_client_servers(servers: Sequence[McpServerSpec]) -> None:
    """Refuse more than :data:`MAX_SERVERS_PER_BLOCK` servers, or two of one name.

    Raises:
        InvalidInput: at ``servers`` (or ``servers[i].name``).
    """
    if len(servers) > MAX_SERVERS_PER_BLOCK:
        raise InvalidInput.at("servers", f"more than {MAX_SERVERS_PER_BLOCK} MCP servers")
    seen: set[str] = set()
    for index, server in enumerate(servers):
        if not isinstance(server, McpServerSpec):
            raise InvalidInput.at(f"servers[{index}]", "expected an McpServerSpec")
        if server.name in seen:
            raise InvalidInput.at(f"servers[{index}].name", f"{server.name!r} appears twice")
        seen.add(server.name)


def client_server_refusal(server: McpServerSpec, trust: ClientTrust) -> str | None:
    """Why a server a remote client supplied may not be connected (None: it may)."""
    if server.command is not None:
        problems = trust.program_problems(server.command[0], "command")
        problems += trust.env_problems(server.env, "env")
    else:
        assert server.url is not None
        problems = trust.url_problems(server.url, "url", model=False)
    return "; ".join(problem.msg for problem in problems) or None


class ClientServerSet:
    """The servers of one :meth:`~omnigent.Runtime.open_client_mcp_servers` block.

    Args:
        session_id: the session they serve.
        servers: the servers to connect (already past the trust rule).
        connect: makes the (unstarted) connection of one server.
        nursery: the block's nursery, which holds the connections.
        timeout: seconds a server may take to start and list its tools.
    """

    def __init__(
        self,
        session_id: str,
        servers: Sequence[McpServerSpec],
        *,
        connect: Connect,
        nursery: trio.Nursery,
        timeout: float,
    ) -> None:
        self.session_id = session_id
        self._specs = {s.name: s for s in servers}
        self._connect = connect
        self._nursery = nursery
        self._timeout = timeout
        self._live: dict[str, McpServers] = {}
        # Closed by a stop of the session: connected again when a turn starts.
        self._stopped: set[str] = set()
        self.failed: dict[str, str] = {}
        self.closed = False
        self._lock = trio.Lock()

    @property
    def live(self) -> int:
        return len(self._live)

    def report(self) -> ClientMcpReport:
        return ClientMcpReport(
            connected=tuple(self._live),
            failed=tuple(self.failed.items()),
            tools=tuple(s.name for s in self.schemas()),
        )

    async def connect(self, names: Sequence[str], room: Callable[[], int]) -> None:
        """Connect these servers concurrently; a failure is recorded, not raised.

        ``room`` says how many more servers the runtime may connect now.

        Cancellation: a server still starting is stopped.
        """
        async with self._lock, trio.open_nursery() as starting:
            for name in names if not self.closed else ():
                if room() <= 0:
                    self.failed[name] = (
                        f"not started: {MAX_CLIENT_SERVERS} client MCP servers run already"
                    )
                    continue
                servers = self._connect(self._specs[name])
                self._live[name] = servers  # counted at once, so room() holds
                starting.start_soon(self._start, name, servers)

    async def _start(self, name: str, servers: McpServers) -> None:
        problem: str | None = None
        with trio.move_on_after(self._timeout) as deadline:
            try:
                await servers.start(self._nursery)
            except OmnigentError as exc:
                problem = exc.message
        if deadline.cancelled_caught:
            problem = f"MCP server {name!r} did not start within {self._timeout:g} s"
        if problem is not None:
            self._live.pop(name, None)
            self.failed[name] = problem
            log.warning("a client's MCP server did not start: %s", problem)

    async def disconnect(self) -> None:
        """Stop every connected server (a stop of the session); a turn reconnects them.

        Cancellation: each close is shielded and bounded (see ``McpServers.aclose``).
        """
        async with self._lock:
            live, self._live = self._live, {}
            self._stopped.update(live)
            async with trio.open_nursery() as closing:
                for servers in live.values():
                    closing.start_soon(servers.aclose)

    async def close(self) -> None:
        """Stop every server for good (the block ends)."""
        self.closed = True
        await self.disconnect()

    async def resume(self, room: Callable[[], int]) -> None:
        """Connect again what a stop closed (nothing if nothing was)."""
        if self._stopped:
            names, self._stopped = sorted(self._stopped), set()
            await self.connect(names, room)

    def schemas(self) -> list[ToolSchema]:
        return [schema for servers in self._live.values() for schema in servers.schemas()]

    def server_for(self, tool: str) -> McpServers | None:
        for servers in self._live.values():
            if servers.offers(tool):
                return servers
        return None


class ClientMcp:
    """The client-supplied MCP servers open now, by session. One per runtime."""

    def __init__(self) -> None:
        self._sets: dict[str, list[ClientServerSet]] = {}

    def live(self) -> int:
        """How many client servers are connected (or starting) in the runtime."""
        return sum(s.live for sets in self._sets.values() for s in sets)

    def room(self) -> int:
        return MAX_CLIENT_SERVERS - self.live()

    @contextmanager
    def provide(self, server_set: ClientServerSet) -> Iterator[None]:
        """Offer the set's tools to its session while the block runs."""
        self._sets.setdefault(server_set.session_id, []).append(server_set)
        try:
            yield
        finally:
            sets = self._sets[server_set.session_id]
            sets.remove(server_set)
            if not sets:
                del self._sets[server_set.session_id]

    def schemas(self, session_id: str, taken: set[str]) -> list[ToolSchema]:
        """The tools client servers add to the session: names not ``taken`` yet.

        The latest set wins a name two sets share (as the latest client tool does).
        """
        seen = set(taken)
        found: list[ToolSchema] = []
        for server_set in reversed(self._sets.get(session_id, [])):
            for schema in server_set.schemas():
                if schema.name not in seen:
                    seen.add(schema.name)
                    found.append(schema)
        return found

    def server_for(self, session_id: str, tool: str) -> McpServers | None:
        for server_set in reversed(self._sets.get(session_id, [])):
            servers = server_set.server_for(tool)
            if servers is not None:
                return servers
        return None

    async def stop(self, session_ids: Sequence[str]) -> None:
        """Stop the client servers of these sessions (they were stopped or deleted)."""
        for session_id in session_ids:
            for server_set in list(self._sets.get(session_id, [])):
                await server_set.disconnect()

    async def resume(self, session_id: str) -> None:
        """Before a turn: connect again the servers a stop closed."""
        for server_set in list(self._sets.get(session_id, [])):
            await server_set.resume(self.room)


@asynccontextmanager
async def open_server_set(
    registry: ClientMcp,
    session_id: str,
    servers: Sequence[McpServerSpec],
    *,
    connect: Connect,
    refuse: Callable[[McpServerSpec], str | None],
    timeout: float,
) -> AsyncIterator[ClientMcpReport]:
    """Connect ``servers`` (those ``refuse`` lets through) for the block; see the module.

    Cancellation: leaving the block, however, stops every server before it returns.
    """
    refused = [(s.name, why) for s in servers if (why := refuse(s)) is not None]
    allowed = [s for s in servers if refuse(s) is None]
    async with trio.open_nursery() as nursery:
        server_set = ClientServerSet(
            session_id, allowed, connect=connect, nursery=nursery, timeout=timeout
        )
        try:
            with registry.provide(server_set):
                await server_set.connect([s.name for s in allowed], registry.room)
                yield attrs.evolve(server_set.report(), refused=tuple(refused))
        finally:
            with trio.move_on_after(_CLOSE_GRACE, shield=True):
                await server_set.close()
            nursery.cancel_scope.cancel()


def client_connection(
    session_id: str,
    *,
    elicitations: Elicitations,
    workdir: Callable[[], Awaitable[Path]],
    guard: UrlAllowList | None = None,
) -> Connect:
    """How one client server of the session is connected (the ``mcp`` SDK's client).

    Args:
        session_id: the session the server serves.
        elicitations: where the server's questions to a person are asked.
        workdir: the session's working directory (where a stdio server runs).
        guard: URLs clients may name (``--allow-mcp-url``): an HTTP server under them
            is reached through the outbound guard.
    """
    from ...mcp import McpServers  # the optional `mcp` extra

    async def ask(params: ElicitationParams, mark_waiting: bool) -> tuple[str, Any]:
        answer = await elicitations.ask(session_id, params, mark_waiting=mark_waiting)
        return answer.action, answer.content

    def connect(spec: McpServerSpec) -> McpServers:
        return McpServers((spec,), ask=ask, cwd=workdir, base_env=base_environment(), guard=guard)

    return connect
