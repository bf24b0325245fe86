"""ACP over WebSocket: ``GET /v1/ws[?agent=NAME]`` on the HTTP server's port.

The same Agent Client Protocol as ``omnigent stdio``
(:mod:`omnigent.transports.acp._agent`), one JSON-RPC message per text frame, on the
Quart app of :func:`~._app.create_app` — so it shares the port, the runtime and the
identity rules of the HTTP API:

* ``--auth header``: the caller is the upgrade request's ``X-Forwarded-Email``
  (missing: the upgrade is refused ``401``), and every session call checks that
  user's level as HTTP does; ``--auth none``: everyone is ``local``.
* The cross-site fence of the HTTP app (:class:`._fence.Fence`, the app's
  ``AppState.fence``) applies to the upgrade: a ``Host`` that does not name this server
  is ``421`` (a DNS-rebinding page), and an ``Origin`` that is neither the server's own
  nor an ``--allowed-origin`` — or, without ``Origin``, ``Sec-Fetch-Site: cross-site``
  — is ``403 cross_site_request``: a web page the user visits must not drive an agent
  over a socket.
* MCP servers the client passes (``session/new``'s ``mcpServers``) are connected only
  where the operator allowed them — a stdio server's program with
  ``serve --allow-command``, an HTTP server's URL with ``serve --allow-mcp-url`` —
  and otherwise ignored (named in ``_meta.omnigent.ignoredMcpServers``): a remote
  client may not make the server run programs or fetch URLs of its choosing.
* At most ``create_app(max_websockets=...)`` connections are open at once, and one
  caller holds at most 32 of them; past either bound the upgrade is ``503
  server_busy`` (:mod:`._ws_slots`). A message is at most 16 MiB under ``serve``.
* ``?agent=NAME`` picks the agent ``session/new`` uses; without it, the agent named
  ``default``, else the only registered agent (looked up at each ``session/new``,
  so agents registered later count).
* ``?runner=NAME`` binds the sessions ``session/new`` creates to that runner
  (``docs/runners.md``), as ``POST /v1/sessions {"runner_id"}`` does: their work runs
  on its machine, and the directory the client names (``cwd``) is its, not the
  server's — it passes no workspace fence here (``session/load`` and
  ``session/resume`` of a runner's session likewise); it is recorded for
  ``session/list``, and the server never acts in it (the session's OS tools are the
  runner's). ``omnigent stdio`` beside a
  server relays an editor here so.

Lifetimes: the connection's nursery lives inside the websocket handler. When the
client goes away Quart cancels the handler, and with it every prompt (its turn ends
``cancelled``), relay and permission request. When the server stops (the app's
``stopping`` event) open sockets are closed first.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from typing import Any, cast

import trio
from quart import Quart, current_app, websocket

from ...core import Agent, Runtime
from ...errors import AgentNotFound, CrossSiteRequest, InvalidInput, Unauthorized
from ...link import check_name
from ._fence import Fence, own_scheme
from ._params import IDENTITY_HEADER, AppState

__all__ = [
    "AGENT_PATTERN",
    "WS_PATH",
    "QuartWebSocketStream",
    "install_websocket",
    "origin_allowed",
    "pick_agent",
]

WS_PATH = "/v1/ws"
AGENT_PATTERN = "[a-z0-9][a-z0-9._-]{0,127}"
"""What ``?agent=`` must be, whole (the OpenAPI document states it too)."""
_AGENT_NAME = re.compile(AGENT_PATTERN)


def origin_allowed(origin: str | None, host: str | None, allowed: Collection[str]) -> bool:
    """Whether an upgrade from ``origin`` may proceed (pure): the fence's Origin rule.

    No ``Origin`` (a non-browser client) is fine; a browser's must be this server's
    own — the host and port the ``Host`` header names — or listed in ``allowed``.
    """
    headers = {} if origin is None else {"Origin": origin}
    try:
        Fence.of(allowed).check_origin(headers, host=host, state_changing=True)
    except CrossSiteRequest:
        return False
    return True


async def pick_agent(runtime: Runtime, name: str | None) -> Agent:
    """The agent of ``?agent=NAME``, else ``default``, else the only one.

    Raises:
        AgentNotFound: naming what to pass instead.
    """
    if name is not None:
        return await runtime.get_agent_by_name(name)
    agents = await runtime.list_agents()
    for agent in agents:
        if agent.name == "default":
            return agent
    if len(agents) == 1:
        return agents[0]
    if not agents:
        raise AgentNotFound(
            "default",
            "no agent is registered on this server: register one (POST /v1/agents, or "
            "serve --agents DIR), then connect (?agent=NAME picks one)",
        )
    names = ", ".join(a.name for a in agents)
    raise AgentNotFound(
        "default",
        f"no agent named 'default', and {len(agents)} to choose from: connect with "
        f"?agent=NAME (agents: {names})",
    )


class QuartWebSocketStream:
    """A Quart websocket as a JSON-RPC message stream (text frames both ways)."""

    def __init__(self, ws: Any) -> None:
        self._ws = ws

    async def receive(self) -> str | bytes | object | None:
        # A binary frame is decoded as UTF-8 JSON too (or answered -32700).
        message: str | bytes = await self._ws.receive()
        return message

    async def send(self, text: str) -> None:
        try:
            await self._ws.send(text)
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
            # Imported here, not with the routes: a server's first answer does without
            # JSON-RPC (issue 32); a socket that carries messages has it already.
            from ...rpc import ConnectionClosed

            raise ConnectionClosed(str(exc)) from exc


def install_websocket(app: Quart) -> None:
    """Add ``GET /v1/ws`` to ``app`` (made by :func:`~._app.create_app`).

    The upgrade passes the app's fence (``AppState.fence``) before anything else.
    """

    @app.websocket(WS_PATH)
    async def acp_socket() -> Any:
        state: AppState = current_app.extensions["omnigent"]
        headers = websocket.headers
        server = websocket.scope.get("server")
        state.fence.check_host(headers.get("Host"), server[0] if server else None)
        state.fence.check_origin(
            headers,
            host=headers.get("Host"),
            state_changing=True,
            scheme=own_scheme(headers, websocket.scheme),
        )
        user = "local"
        if state.auth == "header":
            user = headers.get(IDENTITY_HEADER) or ""
            if not user:
                raise Unauthorized(f"missing {IDENTITY_HEADER} header")
        name = websocket.args.get("agent")
        if name is not None and not _AGENT_NAME.fullmatch(name):
            raise InvalidInput.at("agent", "must be an agent name ([a-z0-9][a-z0-9._-]*)")
        runner = websocket.args.get("runner")
        if runner is not None and (problem := check_name(runner)) is not None:
            raise InvalidInput.at("runner", problem)
        # ACP (its agent, sessions, prompts, client tools) is imported by the first
        # socket: a server nobody opens one on never pays for it (benchmarks/startup.py).
        from ..acp import serve_acp

        with state.websockets.hold(user):  # ServerBusy (503) before anything is accepted
            await websocket.accept()
            ws = cast(Any, websocket)._get_current_object()  # the object: tasks outlive the proxy
            runtime = state.runtime

            async def resolve() -> Agent:
                return await pick_agent(runtime, name)

            async with trio.open_nursery() as nursery:
                nursery.start_soon(_close_when_stopping, state.stopping, nursery.cancel_scope)
                await serve_acp(
                    runtime,
                    QuartWebSocketStream(ws),
                    resolve,
                    user=user,
                    check_access=state.auth == "header",
                    client_mcp="client",
                    # A closed WebSocket is closed both ways: nothing could be answered.
                    drain_timeout=0.0,
                    runner_id=runner,
                )
                nursery.cancel_scope.cancel()
        return None


async def _close_when_stopping(stopping: trio.Event, scope: trio.CancelScope) -> None:
    await stopping.wait()
    scope.cancel()
