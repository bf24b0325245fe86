"""The Agent Client Protocol (ACP v1) mapped onto the core: the same for stdio and WebSocket.

:class:`AcpAgent` answers one connection's ACP requests with calls on the public
:class:`~omnigent.Runtime`; :func:`serve_acp` runs it over any message stream (see
:mod:`._stdio` and :mod:`omnigent.transports.http._websocket`). The wire contract is
API.md, "stdio and WebSocket: ACP v1"; ``docs/editors.md`` shows it from an editor's
side.

=================================  ==================================================
ACP                                core
=================================  ==================================================
``authenticate``                   nothing to do (``authMethods`` is empty)
``initialize``                     capabilities both ways (``loadSession``, images and
                                   embedded context, ``session/list``; the client's
                                   ``fs`` and ``terminal``)
``session/new {cwd, mcpServers}``  ``create_session(agent, cwd=cwd)``, and
                                   ``open_client_mcp_servers`` for the connection
``session/load``                   the history replayed as ``session/update``
``session/list {cwd?, cursor?}``   ``list_sessions(agent_name, cwd=…)``, top level only
``session/prompt``                 ``open_turn_stream``; ``stopReason`` from its end
``session/cancel``                 ``interrupt`` (the prompt answers ``cancelled``)
``session/set_config_option``      ``update_session(model_override=…)``
``_omnigent/session/list``         ``list_sessions`` (every field, children included)
``_omnigent/session/info``         ``get_session`` (the snapshot)
``_omnigent/elicitation/resolve``  ``resolve_elicitation``
=================================  ==================================================

Sessions opened on a connection (new or load) are relayed by a
:class:`~._session.SessionRelay` each, which also asks the client about every
elicitation. The connection's nursery owns the relays, the permission requests and
the prompts; when the connection ends they are all cancelled, and a prompt cancelled
that way interrupts its turn, which ends ``cancelled``. Each relay also holds the MCP
servers the client passed for its session (:mod:`._mcp_servers` says which are run), so
they stop when the connection ends.

The helpers, each with one job: ``_acp_params`` (reading params), ``_acp_handshake``
(``initialize`` both ways), ``_acp_content`` (prompt blocks), ``_acp_updates`` (events
as updates), ``_acp_outcomes`` (errors and stop reasons) — all pure — and
``_acp_records`` (config options, lists, histories), ``_acp_prompt`` (a prompt's turn,
interrupted if the prompt is cancelled), ``_acp_session`` (the relay),
``_acp_client_tools`` (the client's fs and terminal), ``_acp_mcp`` (the client's MCP
servers). This module is the dispatch, the access checks and the glue between them.

Identity: the connection acts as ``user`` (``local`` for stdio and ``--auth none``);
with ``check_access`` each call checks that user's level on the session as the HTTP
API does (read to load, edit to prompt, cancel, configure or answer).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

import trio

from ...core import EDIT, READ, Agent, Runtime, SessionSnapshot
from ...errors import OmnigentError
from ...rpc import (
    INVALID_REQUEST,
    RESOURCE_NOT_FOUND,
    SERVER_BUSY,
    MessageStream,
    RpcConnection,
    RpcError,
)
from ._client_tools import ClientCapabilities, client_tools
from ._content import prompt_content
from ._handshake import PROTOCOL_VERSION, initialize_answer, mcp_http, read_client
from ._mcp_servers import ClientMcpMode, McpOffer, mcp_notice, offered_servers
from ._outcomes import REFUSED, rpc_error, stop_reason
from ._params import Params
from ._prompt import name_session, run_prompt
from ._records import config_options, history, model_override, session_list
from ._session import SessionRelay
from ._updates import replay_items

__all__ = ["PROTOCOL_VERSION", "AcpAgent", "rpc_error", "serve_acp"]

log = logging.getLogger("omnigent.transports.acp")

_MAX_SESSIONS = 256

AgentResolver = Callable[[], Awaitable[Agent]]


class AcpAgent:
    """One ACP connection's agent side; see the module docstring.

    Args:
        runtime: the open runtime.
        resolve_agent: the agent ``session/new`` creates sessions of (called each time,
            so an agent registered later is found).
        user: who the connection acts as.
        check_access: check ``user``'s level on every session it touches.
        client_mcp: what becomes of the MCP servers the client passes (see
            :mod:`._mcp_servers`): ``operator`` connects them (stdio: the editor started
            omnigent), ``client`` only those the runtime's allowlists name (a remote
            client), ``off`` none (all named in ``_meta.omnigent.ignoredMcpServers``).
    """

    methods = frozenset(
        {
            "initialize",
            "authenticate",
            "session/new",
            "session/load",
            "session/list",
            "session/prompt",
            "session/set_config_option",
            "_omnigent/session/list",
            "_omnigent/session/info",
            "_omnigent/elicitation/resolve",
        }
    )
    notifications = frozenset({"session/cancel"})

    def __init__(
        self,
        runtime: Runtime,
        resolve_agent: AgentResolver,
        *,
        user: str = "local",
        check_access: bool = False,
        client_mcp: ClientMcpMode = "off",
    ) -> None:
        self.runtime = runtime
        self.client_mcp: ClientMcpMode = client_mcp
        self._resolve_agent = resolve_agent
        self.user = user
        self._check_access = check_access
        self.viewer: str | None = user if check_access else None  # see Runtime.subscribe
        self._client: ClientCapabilities | None = None
        self._relays: dict[str, SessionRelay] = {}
        self.asking: dict[str, trio.CancelScope] = {}
        self._connection: RpcConnection | None = None
        self._handlers: dict[str, Callable[[Params], Awaitable[Any]]] = {
            "initialize": self._initialize,
            "authenticate": self._authenticate,
            "session/new": self._new,
            "session/load": self._load,
            "session/list": self._list,
            "session/prompt": self._prompt,
            "session/set_config_option": self._set_config_option,
            "_omnigent/session/list": self._omnigent_list,
            "_omnigent/session/info": self._omnigent_info,
            "_omnigent/elicitation/resolve": self._omnigent_resolve,
        }

    @property
    def connection(self) -> RpcConnection:
        if self._connection is None:
            raise RuntimeError("the agent is not bound to a connection")
        return self._connection

    def bind(self, connection: RpcConnection) -> None:
        self._connection = connection

    # -- dispatch ----------------------------------------------------------------------

    async def handle_request(self, method: str, params: Any) -> Any:
        if method != "initialize" and self._client is None:
            raise RpcError(INVALID_REQUEST, "Invalid Request: call initialize first")
        try:
            return await self._handlers[method](Params(params))
        except OmnigentError as exc:
            raise rpc_error(exc) from exc

    async def handle_notification(self, method: str, params: Any) -> None:
        if method == "session/cancel" and self._client is not None:
            try:
                session_id = Params(params).session_id()
                if session_id in self._relays and await self._may(session_id, EDIT):
                    await self.runtime.interrupt(session_id)
            except (RpcError, OmnigentError) as exc:
                log.info("ignored a session/cancel: %s", exc)

    # -- access ------------------------------------------------------------------------

    async def _may(self, session_id: str, need: int) -> bool:
        if not self._check_access:
            await self.runtime.get_session(session_id)  # it must exist
            return True
        return await self.runtime.access_level(session_id, self.user) >= need

    async def _require(self, session_id: str, need: int) -> SessionSnapshot:
        snapshot = await self.runtime.get_session(session_id, viewer=self.viewer)
        if self._check_access:
            level = await self.runtime.access_level(session_id, self.user)
            if level < READ:
                raise RpcError(
                    RESOURCE_NOT_FOUND,
                    f"session {session_id!r} not found",
                    {"code": "session_not_found"},
                )
            if level < need:
                raise RpcError(
                    REFUSED,
                    f"you may read session {session_id!r} but not change it",
                    {"code": "forbidden"},
                )
        return snapshot

    async def may_answer(self, session_id: str) -> bool:
        try:
            return await self._may(session_id, EDIT)
        except OmnigentError:
            return False

    def _relay(self, session_id: str) -> SessionRelay:
        relay = self._relays.get(session_id)
        if relay is None:
            raise RpcError(
                RESOURCE_NOT_FOUND,
                f"session {session_id!r} is not open on this connection: "
                "call session/new or session/load first",
                {"code": "session_not_open"},
            )
        return relay

    # -- initialize --------------------------------------------------------------------

    async def _initialize(self, params: Params) -> dict[str, Any]:
        self._client = read_client(params)
        extensions = (m for m in self.methods if m[0] == "_")
        return initialize_answer(extensions, mcp_http=mcp_http(self.client_mcp, self.runtime))

    async def _authenticate(self, params: Params) -> dict[str, Any]:
        """Nothing to do: omnigent advertises no auth methods (identity is the transport's).

        Some clients call it anyway after ``initialize``; they get a plain success.
        """
        params.string("methodId", required=False, max_len=200)
        return {}

    # -- sessions ----------------------------------------------------------------------

    async def _new(self, params: Params) -> dict[str, Any]:
        cwd = params.absolute_path("cwd")
        offer = offered_servers(params, self.client_mcp)
        if len(self._relays) >= _MAX_SESSIONS:
            raise RpcError(SERVER_BUSY, f"{_MAX_SESSIONS} sessions are open on this connection")
        agent = await self._resolve_agent()
        session = await self.runtime.create_session(agent.id, owner=self.user, cwd=cwd)
        relay = await self._open(session, offer=offer)
        options = await config_options(self.runtime, session)
        notice = mcp_notice(offer, relay.mcp_report)
        return {"sessionId": session.id, "configOptions": options, **notice}

    async def _open(
        self, snapshot: SessionSnapshot, cwd: str | None = None, *, offer: McpOffer
    ) -> SessionRelay:
        """The session's relay on this connection, started now if it has none.

        A new relay connects the client's MCP servers of ``offer`` for as long as it
        runs; a session already open here keeps the servers it was opened with.
        """
        relay = self._relays.get(snapshot.id)
        if relay is not None:
            return relay
        assert self._client is not None
        relay = SessionRelay(self, snapshot.id, snapshot.cwd or cwd)
        supplied = client_tools(self.connection, relay, self._client)
        servers = offer.servers, self.client_mcp == "client"
        await self.connection.nursery.start(relay.run, snapshot.last_event_id, supplied, servers)
        self._relays[snapshot.id] = relay
        for request in snapshot.pending_elicitations:
            relay.ask(request)
        return relay

    async def _load(self, params: Params) -> dict[str, Any]:
        session_id = params.session_id()
        cwd = params.absolute_path("cwd")
        offer = offered_servers(params, self.client_mcp)
        snapshot = await self._require(session_id, READ)
        if session_id not in self._relays and len(self._relays) >= _MAX_SESSIONS:
            raise RpcError(SERVER_BUSY, f"{_MAX_SESSIONS} sessions are open on this connection")
        items = await history(self.runtime, session_id)
        for update in replay_items(items, snapshot.cwd or cwd):
            await self.connection.notify(
                "session/update", {"sessionId": session_id, "update": update}
            )
        opened = session_id not in self._relays
        relay = await self._open(snapshot, cwd, offer=offer)
        return {
            "configOptions": await config_options(self.runtime, snapshot),
            **mcp_notice(offer, relay.mcp_report if opened else None),
        }

    async def _list(self, params: Params) -> dict[str, Any]:
        try:
            agent_name: str | None = (await self._resolve_agent()).name
        except OmnigentError:
            agent_name = None  # no default agent: every session the user may read
        return await session_list(self.runtime, params, agent_name=agent_name, viewer=self.viewer)

    # -- prompts -----------------------------------------------------------------------

    async def _prompt(self, params: Params) -> dict[str, Any]:
        session_id = params.session_id()
        relay = self._relay(session_id)
        content = prompt_content(params.raw("prompt"))
        snapshot = await self._require(session_id, EDIT)
        if snapshot.title is None:
            await name_session(self.runtime, self.connection, session_id, content)
        terminal = await run_prompt(self.runtime, session_id, content, viewer=self.viewer)
        await relay.wait_relayed(terminal.event_id if terminal is not None else 0)
        return stop_reason(terminal)

    # -- config options ----------------------------------------------------------------

    async def _set_config_option(self, params: Params) -> dict[str, Any]:
        snapshot = await self._require(params.session_id(), EDIT)
        await model_override(self.runtime, snapshot, params)
        snapshot = await self.runtime.get_session(snapshot.id)
        return {"configOptions": await config_options(self.runtime, snapshot)}

    # -- omnigent extensions -----------------------------------------------------------

    async def _omnigent_list(self, params: Params) -> dict[str, Any]:
        page = await self.runtime.list_sessions(
            agent_name=params.optional_string("agentName", max_len=200),
            parent_session_id=params.optional_string("parentSessionId", max_len=200),
            limit=params.integer("limit", low=1, high=100) or 20,
            after=params.optional_string("after", max_len=200),
            viewer=self.viewer,
        )
        return page.to_dict()

    async def _omnigent_info(self, params: Params) -> dict[str, Any]:
        return (await self._require(params.session_id(), READ)).to_dict()

    async def _omnigent_resolve(self, params: Params) -> dict[str, Any]:
        session_id = params.session_id()
        elicitation_id = params.string("elicitationId", max_len=200)
        action = params.string("action", max_len=20)
        await self._require(session_id, EDIT)
        resolved = await self.runtime.resolve_elicitation(
            session_id, elicitation_id, action, params.raw("content")
        )
        return {"resolved": resolved}


async def serve_acp(
    runtime: Runtime,
    stream: MessageStream,
    resolve_agent: AgentResolver,
    *,
    user: str = "local",
    check_access: bool = False,
    client_mcp: ClientMcpMode = "off",
    task_status: trio.TaskStatus[AcpAgent] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve ACP over ``stream`` until it ends; see :class:`AcpAgent` for the options.

    Cancellation: everything the connection started is cancelled with it; prompts in
    flight interrupt their turns, and the client's MCP servers are stopped.
    """
    agent = AcpAgent(
        runtime, resolve_agent, user=user, check_access=check_access, client_mcp=client_mcp
    )
    connection = RpcConnection(stream, agent)
    agent.bind(connection)

    async with trio.open_nursery() as nursery:
        await nursery.start(connection.run)
        task_status.started(agent)
