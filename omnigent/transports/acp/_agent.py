"""The Agent Client Protocol (ACP v1) mapped onto the core: the same for stdio and WebSocket.

:class:`AcpAgent` answers one connection's ACP requests with calls on the public
:class:`~omnigent.Runtime`; :func:`serve_acp` runs it over any message stream (see
:mod:`._stdio` and :mod:`omnigent.transports.http._websocket`). The wire contract is
API.md, "stdio and WebSocket: ACP v1"; ``docs/acp.md`` is the reference,
``docs/editors.md`` shows it from an editor's side. What it advertises follows ACP v1's
schema 1.21.

=================================  ==================================================
ACP                                core
=================================  ==================================================
``initialize``                     capabilities both ways (:mod:`._handshake`)
``authenticate``                   checks the model's key is there (the one method)
``session/new`` … ``delete``       :mod:`._sessions` (new, load, resume, fork,
                                   close, delete)
``session/list {cwd?, cursor?}``   ``list_sessions(agent_name, cwd=…)``, top level only
``session/prompt``                 ``open_turn_stream``; ``stopReason`` from its end
``session/cancel``                 ``interrupt`` (the prompt answers ``cancelled``)
``session/set_config_option``      the model, temperature, standing answers for edits
``_omnigent/session/list``         ``list_sessions`` (every field, children included)
``_omnigent/session/info``         ``get_session`` (the snapshot)
``_omnigent/elicitation/resolve``  ``resolve_elicitation``
=================================  ==================================================

Sessions opened on a connection are relayed by a :class:`~._session.SessionRelay`
each, which also asks the client about every elicitation. The connection's nursery
owns the relays, the permission requests and the prompts; when the connection ends
they are all cancelled, and a prompt cancelled that way interrupts its turn, which
ends ``cancelled``. Each relay also holds the MCP servers the client passed for its
session (:mod:`._mcp_servers` says which are run), so they stop when the connection
ends. Requests take effect in the order they arrived (:attr:`AcpAgent.ordered`); when
the input ends, the prompts in flight are interrupted and answered before the
connection closes (:meth:`AcpAgent.input_ended`).

The helpers, each with one job: ``_params`` (reading params), ``_handshake``
(``initialize`` both ways), ``_content`` (prompt blocks), ``_updates`` (events
as updates), ``_elicit`` (forms), ``_outcomes`` (errors and stop reasons) — all
pure — and ``_records`` (config options, lists, histories), ``_sessions`` (the
open sessions, opened and closed), ``_prompt`` (a prompt's turn), ``_session``
(the relay), ``_client_tools`` (the client's fs and terminal), ``_mcp_servers`` (the
client's MCP servers). This module is the dispatch, the access checks and the glue.

Identity: the connection acts as ``user`` (``local`` for stdio and ``--auth none``);
with ``check_access`` each call checks that user's level on the session as the HTTP
API does (read to load, resume or fork, edit to prompt, cancel, configure, answer or
close, manage to delete).
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
    Admit,
    MessageStream,
    RpcConnection,
    RpcError,
)
from ._content import prompt_content
from ._handshake import (
    AUTH_METHOD_ID,
    PROTOCOL_VERSION,
    ClientCapabilities,
    initialize_answer,
    mcp_http,
    missing_model_key,
    read_client,
)
from ._mcp_servers import ClientMcpMode
from ._outcomes import REFUSED, rpc_error, stop_reason
from ._params import Params, invalid
from ._prompt import name_session, run_prompt
from ._records import config_options, session_list, set_config_option
from ._sessions import OpenSessions

__all__ = ["PROTOCOL_VERSION", "AcpAgent", "rpc_error", "serve_acp"]

log = logging.getLogger("omnigent.transports.acp")

# ACP's "authentication required".
AUTH_REQUIRED = -32000

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
        runner_id: the runner the connection's new sessions run on (``/v1/ws?runner=``:
            an editor's ``omnigent stdio`` beside a server, its work on the editor's
            machine); ``None``: this process.
    """

    methods = frozenset(
        {
            "initialize",
            "authenticate",
            "session/new",
            "session/load",
            "session/resume",
            "session/fork",
            "session/close",
            "session/delete",
            "session/list",
            "session/prompt",
            "session/set_config_option",
            "_omnigent/session/list",
            "_omnigent/session/info",
            "_omnigent/elicitation/resolve",
        }
    )
    notifications = frozenset({"session/cancel"})
    # Everything takes effect in the order it arrived (a client may pipeline): a
    # prompt lets the next message in once its own is accepted, the rest when done.
    ordered = methods | notifications

    def __init__(
        self,
        runtime: Runtime,
        resolve_agent: AgentResolver,
        *,
        user: str = "local",
        check_access: bool = False,
        client_mcp: ClientMcpMode = "off",
        runner_id: str | None = None,
    ) -> None:
        self.runtime = runtime
        self.client_mcp: ClientMcpMode = client_mcp
        self.runner_id = runner_id
        self._resolve_agent = resolve_agent
        self.user = user
        self._check_access = check_access
        self.viewer: str | None = user if check_access else None  # see Runtime.subscribe
        self._client: ClientCapabilities | None = None
        self.sessions = OpenSessions(self)
        self.asking: dict[str, trio.CancelScope] = {}
        # Set when nothing more will be read: the prompts in flight are interrupted.
        self._winding_down = trio.Event()
        self._connection: RpcConnection | None = None
        self._handlers: dict[str, Callable[[Params], Awaitable[Any]]] = {
            "initialize": self._initialize,
            "authenticate": self._authenticate,
            "session/new": self.sessions.new,
            "session/load": self.sessions.load,
            "session/resume": self.sessions.resume,
            "session/fork": self.sessions.fork,
            "session/close": self.sessions.close,
            "session/delete": self.sessions.delete,
            "session/list": self._list,
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

    @property
    def client(self) -> ClientCapabilities:
        """What the client said in ``initialize`` (every other request comes after it)."""
        if self._client is None:
            raise RpcError(INVALID_REQUEST, "Invalid Request: call initialize first")
        return self._client

    def resolve_agent(self) -> Awaitable[Agent]:
        return self._resolve_agent()

    # -- dispatch ----------------------------------------------------------------------

    async def handle_request(self, method: str, params: Any, admit: Admit) -> Any:
        if method != "initialize" and self._client is None:
            raise RpcError(INVALID_REQUEST, "Invalid Request: call initialize first")
        try:
            if method == "session/prompt":
                return await self._prompt(Params(params), admit)
            return await self._handlers[method](Params(params))
        except OmnigentError as exc:
            raise rpc_error(exc) from exc

    async def input_ended(self) -> None:
        """The client will say nothing more: interrupt the prompts in flight.

        Each answers ``stopReason: cancelled`` once its turn has ended (the connection
        waits for the answers before it closes).
        """
        self._winding_down.set()

    async def handle_notification(self, method: str, params: Any) -> None:
        if method == "session/cancel" and self._client is not None:
            try:
                session_id = Params(params).session_id()
                if session_id in self.sessions and await self._may(session_id, EDIT):
                    await self.runtime.interrupt(session_id)
            except (RpcError, OmnigentError) as exc:
                log.info("ignored a session/cancel: %s", exc)

    # -- access ------------------------------------------------------------------------

    async def _may(self, session_id: str, need: int) -> bool:
        if not self._check_access:
            await self.runtime.get_session(session_id)  # it must exist
            return True
        return await self.runtime.access_level(session_id, self.user) >= need

    async def require(self, session_id: str, need: int) -> SessionSnapshot:
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

    # -- initialize --------------------------------------------------------------------

    async def _initialize(self, params: Params) -> dict[str, Any]:
        self._client = read_client(params)
        extensions = (m for m in self.methods if m[0] == "_")
        return initialize_answer(extensions, mcp_http=mcp_http(self.client_mcp, self.runtime))

    async def _authenticate(self, params: Params) -> dict[str, Any]:
        """Check the one method omnigent offers: the model's key is in its environment.

        Identity itself belongs to the transport (stdio: the editor's user; the
        WebSocket: the HTTP API's). A client that sends no ``methodId`` gets a plain
        success, as before authentication methods were offered.

        Raises:
            RpcError: ``-32602`` for another method; ``-32000`` (authentication
            required) naming what to set when the key is missing.
        """
        method_id = params.string("methodId", required=False, max_len=200)
        if method_id not in ("", AUTH_METHOD_ID):
            raise invalid("methodId", f"unknown authentication method (offered: {AUTH_METHOD_ID})")
        if method_id:
            agent = await self._resolve_agent()
            missing = missing_model_key(await self.runtime.get_agent_spec(agent.id))
            if missing is not None:
                raise RpcError(AUTH_REQUIRED, f"Authentication required: {missing}")
        return {}

    # -- sessions ----------------------------------------------------------------------

    async def _list(self, params: Params) -> dict[str, Any]:
        try:
            agent_name: str | None = (await self._resolve_agent()).name
        except OmnigentError:
            agent_name = None  # no default agent: every session the user may read
        return await session_list(self.runtime, params, agent_name=agent_name, viewer=self.viewer)

    # -- prompts -----------------------------------------------------------------------

    async def _prompt(self, params: Params, admit: Admit) -> dict[str, Any]:
        session_id = params.session_id()
        relay = self.sessions.relay(session_id)
        content = prompt_content(params.raw("prompt"))
        snapshot = await self.require(session_id, EDIT)
        if snapshot.title is None:
            await name_session(self.runtime, session_id, content)
        terminal = await run_prompt(
            self.runtime,
            session_id,
            content,
            viewer=self.viewer,
            admit=admit,
            winding_down=self._winding_down,
        )
        await relay.wait_relayed(terminal.event_id if terminal is not None else 0)
        return stop_reason(terminal)

    # -- config options ----------------------------------------------------------------

    async def _set_config_option(self, params: Params) -> dict[str, Any]:
        snapshot = await self.require(params.session_id(), EDIT)
        await set_config_option(self.runtime, snapshot, params, self.client)
        snapshot = await self.runtime.get_session(snapshot.id)
        return {"configOptions": await config_options(self.runtime, snapshot, self.client)}

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
        return (await self.require(params.session_id(), READ)).to_dict()

    async def _omnigent_resolve(self, params: Params) -> dict[str, Any]:
        session_id = params.session_id()
        elicitation_id = params.string("elicitationId", max_len=200)
        action = params.string("action", max_len=20)
        await self.require(session_id, EDIT)
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
    drain_timeout: float = 10.0,
    runner_id: str | None = None,
    task_status: trio.TaskStatus[AcpAgent] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve ACP over ``stream`` until it ends; see :class:`AcpAgent` for the options.

    ``drain_timeout`` is how long the requests in flight when the input ends get to be
    answered (:class:`~omnigent.rpc.RpcConnection`): prompts are interrupted and
    answer ``cancelled``; ``0`` cancels everything at once (a transport closed both ways).

    Cancellation: everything the connection started is cancelled with it; prompts in
    flight interrupt their turns, and the client's MCP servers are stopped.
    """
    agent = AcpAgent(
        runtime,
        resolve_agent,
        user=user,
        check_access=check_access,
        client_mcp=client_mcp,
        runner_id=runner_id,
    )
    connection = RpcConnection(stream, agent, drain_timeout=drain_timeout)
    agent.bind(connection)

    async with trio.open_nursery() as nursery:
        await nursery.start(connection.run)
        task_status.started(agent)
