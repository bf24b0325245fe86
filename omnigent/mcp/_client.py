"""A session's MCP servers: connected with the ``mcp`` SDK, offered as tools.

:class:`McpServers` holds the connections of one session's ``mcp_servers``. It is
started in the session actor's nursery on the session's first turn
(:meth:`McpServers.start`, which returns once every server is connected and has
listed its tools) and closed with the actor — when the session goes idle, is stopped,
or the runtime shuts down. A server that fails to start fails that turn with its name
and the tail of its stderr.

Each server's tools are offered as ``mcp__<server>__<tool>`` and called through the
session's one tool path (:class:`~omnigent.core.tools.session.SessionTools`), policies
included. A server's ``elicitation/create`` (or an elicitation inside a 2026-era
``input_required`` result — the SDK drives both through one callback) becomes an
omnigent elicitation on the session, mirrored to its ancestors; the answer goes back
to the server.

The ``mcp`` SDK runs on anyio, so on Trio; it is the ``mcp`` extra
(``pip install 'omnigent[mcp]'``) and imported only here.
"""

from __future__ import annotations

import json
import logging
import re
import tempfile
from collections.abc import Awaitable, Callable, Mapping
from contextlib import AsyncExitStack
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import attrs
import mcp_types
import trio
from mcp import Client, MCPError, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from ..errors import HarnessError, SandboxUnavailable
from ..harnesses.base import ToolSchema
from ..model import ElicitationParams
from ..observability import carrier
from ..outbound import UrlAllowList, guarded_mcp_client
from ..spec import McpServerSpec

if TYPE_CHECKING:
    from ..processes.sandbox import Sandbox, SandboxPolicy

__all__ = ["MCP_PHASE", "McpServerFailed", "McpServers", "tool_name"]

log = logging.getLogger(__name__)

MCP_PHASE = "mcp_elicitation"
_NAME = re.compile(r"[^A-Za-z0-9_-]")
_CLOSE_TIMEOUT = 5.0

Ask = Callable[[ElicitationParams, bool], Awaitable[tuple[str, Any]]]
"""Ask the person behind the session: ``(params, mark_waiting) -> (action, content)``."""


class McpServerFailed(HarnessError):
    """An MCP server could not be started or reached; the message names it."""

    code = "mcp_server_failed"


def tool_name(server: str, tool: str) -> str:
    """``mcp__<server>__<tool>``, with characters a model API refuses replaced by ``_``."""
    return _NAME.sub("_", f"mcp__{server}__{tool}")[:64]


@attrs.define(eq=False)
class _Server:
    spec: McpServerSpec
    client: Client | None = None
    stderr: IO[str] | None = None
    failure: str | None = None

    def stderr_tail(self, limit: int = 2000) -> str:
        if self.stderr is None:
            return ""
        try:
            self.stderr.seek(0)
            return self.stderr.read()[-limit:].strip()
        except (OSError, ValueError):
            return ""


@attrs.define(eq=False)
class _Tool:
    server: _Server
    name: str
    schema: ToolSchema


class McpServers:
    """The MCP servers of one session. Made per session actor by the core."""

    def __init__(
        self,
        servers: tuple[McpServerSpec, ...],
        *,
        ask: Ask,
        cwd: Callable[[], Awaitable[Path]],
        client_name: str = "omnigent",
        base_env: Mapping[str, str] | None = None,
        sandbox: Callable[[], Awaitable[SandboxPolicy | None]] | None = None,
        guard: UrlAllowList | None = None,
    ) -> None:
        self._servers = [_Server(spec) for spec in servers]
        # The session's sandbox: stdio servers run inside it (open while they run).
        self._sandbox_policy = sandbox
        self._box: Sandbox | None = None
        # URLs a client may name (``--allow-mcp-url``): a server under them is reached
        # only through the outbound guard (checked addresses, no redirect out).
        self._guard = guard
        # What a stdio server's env is merged onto (besides the SDK's own basics).
        self._base_env = dict(base_env or {})
        self._ask = ask
        self._cwd = cwd
        self._client_name = client_name
        self._tools: dict[str, _Tool] = {}
        self._scope: trio.CancelScope | None = None
        self._started = False
        self._closed = trio.Event()
        self._in_turn = 0

    @property
    def started(self) -> bool:
        return self._started

    def schemas(self) -> tuple[ToolSchema, ...]:
        """Every server's tools, as the model is offered them (empty before start)."""
        return tuple(tool.schema for tool in self._tools.values())

    def offers(self, name: str) -> bool:
        return name in self._tools

    async def start(self, nursery: trio.Nursery) -> None:
        """Connect every server (once), in a task of ``nursery`` that holds them.

        Raises:
            McpServerFailed: a server could not start or list its tools; its name and
                stderr tail are in the message. Nothing stays open.
        """
        if not self._started:
            await nursery.start(self._hold)
            self._started = True

    def close(self) -> None:
        """Close every connection (the holding task ends; stdio servers are stopped)."""
        if self._scope is not None:
            self._scope.cancel()

    async def aclose(self) -> None:
        """Close every connection and wait until the holding task has ended.

        A stdio server is stopped as the SDK does it (stdin closed, then SIGTERM to its
        process group, then SIGKILL, each after a bounded grace), so when this returns
        its processes are gone.

        Cancellation: the close itself is shielded and bounded; the wait is not.
        """
        self.close()
        if self._started:
            await self._closed.wait()

    async def _hold(self, task_status: trio.TaskStatus[None]) -> None:
        connected = False
        try:
            with trio.CancelScope() as life:
                self._scope = life
                # The SDK's task groups are entered inside ``guard`` and must exit in
                # it too: a scope opened around the close instead (a shielded
                # move_on_after) would interleave with theirs and corrupt trio's
                # scope stack. So the close is bounded and shielded by ``guard``.
                with trio.CancelScope() as guard:
                    stack = AsyncExitStack()
                    try:
                        self._box = await self._open_sandbox(stack)
                        for server in self._servers:
                            await self._connect(stack, server)
                        task_status.started()
                        connected = True
                        await trio.sleep_forever()
                    finally:
                        guard.shield = True
                        guard.deadline = trio.current_time() + _CLOSE_TIMEOUT
                        await stack.aclose()
        except Exception as exc:
            if not connected:
                raise  # start() raises it: the turn fails with it
            # A server went away after start: later calls say so.
            log.warning("the MCP connections of a session failed", exc_info=True)
            for server in self._servers:
                server.failure = server.failure or f"the connection failed: {exc}"
        finally:
            for server in self._servers:
                if server.stderr is not None:
                    server.stderr.close()
            self._closed.set()

    async def _open_sandbox(self, stack: AsyncExitStack) -> Sandbox | None:
        """The session's sandbox, open for as long as the servers run (None: none).

        Raises:
            McpServerFailed: the sandbox cannot be created here (nothing is started).
        """
        stdio = any(server.spec.command is not None for server in self._servers)
        if self._sandbox_policy is None or not stdio:
            return None
        from ..processes.sandbox import open_sandbox  # with the first sandboxed server

        try:
            policy = await self._sandbox_policy()
            if policy is None:
                return None
            box: Sandbox = await stack.enter_async_context(open_sandbox(policy))
        except SandboxUnavailable as exc:
            raise McpServerFailed(f"the MCP servers cannot start: {exc.message}") from exc
        return box

    async def _connect(self, stack: AsyncExitStack, server: _Server) -> None:
        spec = server.spec
        try:
            client = Client(
                await self._transport(server),
                elicitation_callback=self._elicitation_callback(server),
                client_info=mcp_types.Implementation(name=self._client_name, version="1"),
            )
            server.client = await stack.enter_async_context(client)
            listing = await server.client.list_tools()
        except (trio.Cancelled, KeyboardInterrupt):
            raise
        except BaseException as exc:
            raise McpServerFailed(_start_failure(server, exc)) from None
        for tool in listing.tools:
            name = tool_name(spec.name, tool.name)
            if name in self._tools:
                log.warning("MCP tool %s of %s hides another; skipped", tool.name, spec.name)
                continue
            description = tool.description or f"{tool.name} (MCP server {spec.name})"
            schema = ToolSchema(name, description, dict(tool.input_schema))
            self._tools[name] = _Tool(server, tool.name, schema)

    async def _transport(self, server: _Server) -> Any:
        spec = server.spec
        if spec.command is not None:
            # Closed by _hold when the connections close; read for a start failure.
            server.stderr = await trio.to_thread.run_sync(
                lambda: tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace")  # noqa: SIM115
            )
            cwd = await self._cwd()
            argv, env = list(spec.command), {**self._base_env, **spec.env}
            if self._box is not None:
                try:
                    launch = await self._box.wrap(argv, cwd=cwd, env=env)
                except SandboxUnavailable as exc:
                    raise McpServerFailed(f"MCP server {spec.name!r}: {exc.message}") from exc
                argv, env = list(launch.argv), dict(launch.env or {})
            params = StdioServerParameters(command=argv[0], args=argv[1:], env=env, cwd=cwd)
            return stdio_client(params, errlog=server.stderr)
        assert spec.url is not None
        if self._guard is not None and self._guard.admits(spec.url):
            http = guarded_mcp_client(self._guard, dict(spec.headers))
        else:
            http = create_mcp_http_client(headers=dict(spec.headers) or None)
        return streamable_http_client(spec.url, http_client=http)

    # -- calls -------------------------------------------------------------------------

    async def call(self, name: str, arguments: Mapping[str, Any], *, in_turn: bool) -> str:
        """Call an MCP tool; its result as one string (``Error: …`` on failure)."""
        tool = self._tools[name]
        server = tool.server
        if server.failure is not None or server.client is None:
            return f"Error: MCP server {server.spec.name!r} is not available ({server.failure})"
        self._in_turn += in_turn
        try:
            # W3C trace context in _meta: the server's spans may continue the call's.
            trace = carrier()
            meta: Any = trace or None
            result = await server.client.call_tool(tool.name, dict(arguments), meta=meta)
        except MCPError as exc:
            return f"Error: MCP server {server.spec.name!r}: {exc.error.message}"
        except (trio.Cancelled, KeyboardInterrupt):
            raise
        except Exception as exc:
            log.info("MCP call %s failed", name, exc_info=True)
            return f"Error: MCP server {server.spec.name!r} failed: {exc}"
        finally:
            self._in_turn -= in_turn
        return _result_text(result)

    def _elicitation_callback(self, server: _Server) -> Any:
        async def elicit(
            context: Any, params: mcp_types.ElicitRequestParams
        ) -> mcp_types.ElicitResult | mcp_types.ErrorData:
            if isinstance(params, mcp_types.ElicitRequestURLParams):
                asked = ElicitationParams(
                    mode="url", message=params.message, phase=MCP_PHASE, url=params.url
                )
            else:
                asked = ElicitationParams(
                    mode="form",
                    message=params.message,
                    phase=MCP_PHASE,
                    requestedSchema=dict(params.requested_schema),
                )
            asked = attrs.evolve(asked, tool_name=f"mcp__{server.spec.name}")
            action, content = await self._ask(asked, self._in_turn > 0)
            accepted = action == "accept" and isinstance(content, dict)
            return mcp_types.ElicitResult(
                action=action,  # type: ignore[arg-type]
                content=content if accepted else None,
            )

        return elicit


def _start_failure(server: _Server, exc: BaseException) -> str:
    leaf = exc
    while isinstance(leaf, BaseExceptionGroup) and leaf.exceptions:
        leaf = leaf.exceptions[0]
    detail = leaf.error.message if isinstance(leaf, MCPError) else f"{type(leaf).__name__}: {leaf}"
    message = f"MCP server {server.spec.name!r} failed to start: {detail}"
    tail = server.stderr_tail()
    return f"{message}; stderr: {tail}" if tail else message


def _result_text(result: mcp_types.CallToolResult) -> str:
    parts: list[str] = []
    for block in result.content:
        if isinstance(block, mcp_types.TextContent):
            parts.append(block.text)
        else:
            parts.append(
                json.dumps(block.model_dump(mode="json", by_alias=True, exclude_none=True))
            )
    text = "\n".join(parts)
    if not text and result.structured_content is not None:
        text = json.dumps(result.structured_content)
    return f"Error: {text}" if result.is_error else text
