"""The Agent Client Protocol (ACP v1) mapped onto the core: the same for stdio and WebSocket.

:class:`AcpAgent` answers one connection's ACP requests with calls on the public
:class:`~omnigent.Runtime`; :func:`serve_acp` runs it over any message stream (see
:mod:`.stdio` and :mod:`.websocket`). The wire contract is API.md, "stdio and
WebSocket: ACP v1"; ``docs/editors.md`` shows it from an editor's side.

=================================  ==================================================
ACP                                core
=================================  ==================================================
``authenticate``                   nothing to do (``authMethods`` is empty)
``initialize``                     capabilities both ways (``loadSession``, images and
                                   embedded context, ``session/list``; the client's
                                   ``fs`` and ``terminal``)
``session/new {cwd, mcpServers}``  ``create_session(agent, cwd=cwd)``
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
:class:`~._acp_session.SessionRelay` each, which also asks the client about every
elicitation. The connection's nursery owns the relays, the permission requests and
the prompts; when the connection ends they are all cancelled, and a prompt cancelled
that way interrupts its turn, which ends ``cancelled``.

Identity: the connection acts as ``user`` (``local`` for stdio and ``--auth none``);
with ``check_access`` each call checks that user's level on the session as the HTTP
API does (read to load, edit to prompt, cancel, configure or answer).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

import trio

from .. import __version__
from ..core import Agent, Runtime, SessionSnapshot
from ..errors import InvalidInput, NotFound, OmnigentError
from ..model import (
    TERMINAL_STATUSES,
    Event,
    Item,
    ResponseCancelled,
    ResponseCompleted,
    ResponseFailed,
    SessionStatus,
)
from ._acp_client_tools import ClientCapabilities, client_tools
from ._acp_content import prompt_content, prompt_title
from ._acp_params import Params, invalid
from ._acp_session import SessionRelay
from ._acp_updates import replay_items
from ._rpc_connection import ConnectionClosed, MessageStream, RpcConnection
from .jsonrpc import (
    INTERNAL_ERROR,
    INVALID_REQUEST,
    RESOURCE_NOT_FOUND,
    SERVER_BUSY,
    RpcError,
)

__all__ = ["PROTOCOL_VERSION", "AcpAgent", "rpc_error", "serve_acp"]

log = logging.getLogger("omnigent.transports.acp")

PROTOCOL_VERSION = 1
# A refusal that is neither bad params nor a missing resource (forbidden, conflict,
# closing): JSON-RPC leaves -32000..-32099 to servers; ``data.code`` has the slug.
REFUSED = -32001
_READ, _EDIT = 1, 2
_MAX_SESSIONS = 256
_LIST_PAGE = 50
_INTERRUPT_TIMEOUT = 5.0
_LENGTH_CODES = ("max_tokens", "max_output_tokens")
_REFUSAL_CODES = ("refusal", "content_filter")

AgentResolver = Callable[[], Awaitable[Agent]]


def rpc_error(exc: OmnigentError) -> RpcError:
    """The JSON-RPC error for an omnigent error (5xx causes are logged, never sent)."""
    data: dict[str, Any] = {"code": exc.code}
    if isinstance(exc, InvalidInput) and exc.details:
        data["details"] = [{"loc": d.loc, "msg": d.msg} for d in exc.details]
    if exc.status in (400, 422):
        return RpcError.invalid_params(exc.message, data)
    if isinstance(exc, NotFound):
        return RpcError(RESOURCE_NOT_FOUND, exc.message, data)
    if exc.status == 500:
        log.error("internal error answered over ACP", exc_info=exc)
        return RpcError(INTERNAL_ERROR, "Internal error", {"code": "internal_error"})
    return RpcError(REFUSED, exc.message, data)


def _iso(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp, tz=UTC).isoformat().replace("+00:00", "Z")


class AcpAgent:
    """One ACP connection's agent side; see the module docstring.

    Args:
        runtime: the open runtime.
        resolve_agent: the agent ``session/new`` creates sessions of (called each time,
            so an agent registered later is found).
        user: who the connection acts as.
        check_access: check ``user``'s level on every session it touches.
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
    ) -> None:
        self.runtime = runtime
        self._resolve_agent = resolve_agent
        self.user = user
        self._check_access = check_access
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
                if session_id in self._relays and await self._may(session_id, _EDIT):
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
        snapshot = await self.runtime.get_session(session_id)
        if self._check_access:
            level = await self.runtime.access_level(session_id, self.user)
            if level < _READ:
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
            return await self._may(session_id, _EDIT)
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
        version = params.integer("protocolVersion", low=0, high=65535)
        if version is None:
            raise invalid("protocolVersion", "expected an integer")
        caps = params.object("clientCapabilities")
        fs = caps.object("fs")
        self._client = ClientCapabilities(
            read=fs.flag("readTextFile"),
            write=fs.flag("writeTextFile"),
            terminal=caps.flag("terminal"),
        )
        return {
            "protocolVersion": PROTOCOL_VERSION,
            "agentCapabilities": {
                "loadSession": True,
                "promptCapabilities": {"image": True, "audio": False, "embeddedContext": True},
                "mcpCapabilities": {"http": False, "sse": False},
                "sessionCapabilities": {"list": {}},
                "_meta": {"omnigent": {"methods": sorted(m for m in self.methods if m[0] == "_")}},
            },
            "agentInfo": {"name": "omnigent", "title": "omnigent", "version": __version__},
            "authMethods": [],
        }

    async def _authenticate(self, params: Params) -> dict[str, Any]:
        """Nothing to do: omnigent advertises no auth methods (identity is the transport's).

        Some clients call it anyway after ``initialize``; they get a plain success.
        """
        params.string("methodId", required=False, max_len=200)
        return {}

    # -- sessions ----------------------------------------------------------------------

    def _client_mcp_servers(self, params: Params) -> list[str]:
        """The names of the MCP servers the client offered (which omnigent cannot use yet).

        Editors forward every MCP server the user installed in them (Zed does) to every
        agent; refusing the session would make omnigent unusable there, so they are
        left out — logged, and named in the answer's ``_meta`` — and the agent keeps
        the MCP servers of its own spec.
        """
        servers = params.array("mcpServers", required=False, max_len=100)
        names = [str(s.get("name", "?")) if isinstance(s, dict) else "?" for s in servers]
        if names:
            log.warning(
                "the client offered MCP servers omnigent does not connect yet (%s); "
                "list them in the agent spec's mcp_servers instead",
                ", ".join(names),
            )
        return names

    def _mcp_notice(self, names: list[str]) -> dict[str, Any]:
        if not names:
            return {}
        return {"_meta": {"omnigent": {"ignoredMcpServers": names}}}

    async def _new(self, params: Params) -> dict[str, Any]:
        cwd = params.absolute_path("cwd")
        ignored = self._client_mcp_servers(params)
        if len(self._relays) >= _MAX_SESSIONS:
            raise RpcError(SERVER_BUSY, f"{_MAX_SESSIONS} sessions are open on this connection")
        agent = await self._resolve_agent()
        session = await self.runtime.create_session(agent.id, owner=self.user, cwd=cwd)
        await self._open(session)
        options = await self._config_options(session)
        return {"sessionId": session.id, "configOptions": options, **self._mcp_notice(ignored)}

    async def _open(self, snapshot: SessionSnapshot, cwd: str | None = None) -> SessionRelay:
        relay = self._relays.get(snapshot.id)
        if relay is not None:
            return relay
        assert self._client is not None
        relay = SessionRelay(self, snapshot.id, snapshot.cwd or cwd)
        providers = client_tools(self.connection, relay, self._client)
        await self.connection.nursery.start(relay.run, snapshot.last_event_id, providers)
        self._relays[snapshot.id] = relay
        for request in snapshot.pending_elicitations:
            relay.ask(request)
        return relay

    async def _load(self, params: Params) -> dict[str, Any]:
        session_id = params.session_id()
        cwd = params.absolute_path("cwd")
        ignored = self._client_mcp_servers(params)
        snapshot = await self._require(session_id, _READ)
        if session_id not in self._relays and len(self._relays) >= _MAX_SESSIONS:
            raise RpcError(SERVER_BUSY, f"{_MAX_SESSIONS} sessions are open on this connection")
        items = await self._history(session_id)
        for update in replay_items(items, snapshot.cwd or cwd):
            await self.connection.notify(
                "session/update", {"sessionId": session_id, "update": update}
            )
        await self._open(snapshot, cwd)
        return {"configOptions": await self._config_options(snapshot), **self._mcp_notice(ignored)}

    async def _history(self, session_id: str) -> list[Item]:
        items: list[Item] = []
        after: str | None = None
        while True:
            page = await self.runtime.list_items(session_id, limit=1000, after=after)
            items.extend(page.data)
            if not page.has_more:
                return items
            after = page.last_id

    async def _list(self, params: Params) -> dict[str, Any]:
        cwd = params.absolute_path("cwd", required=False)
        cursor = params.optional_string("cursor", max_len=200)
        try:
            agent_name: str | None = (await self._resolve_agent()).name
        except OmnigentError:
            agent_name = None  # no default agent: every session the user may read
        try:
            page = await self.runtime.list_sessions(
                agent_name=agent_name,
                limit=_LIST_PAGE,
                after=cursor,
                viewer=self.user if self._check_access else None,
                cwd=cwd,
            )
        except InvalidInput as exc:
            raise invalid("cursor", "not a cursor this listing gave out") from exc
        sessions = [
            {
                "sessionId": s.id,
                "cwd": s.cwd,
                "title": s.title,
                "updatedAt": _iso(s.updated_at or s.created_at),
                "_meta": {"omnigent": {"status": s.status, "agentName": s.agent_name}},
            }
            for s in page.data
            if s.parent_session_id is None and s.cwd is not None
        ]
        answer: dict[str, Any] = {"sessions": sessions}
        if page.has_more and page.data:
            answer["nextCursor"] = page.data[-1].id
        return answer

    # -- prompts -----------------------------------------------------------------------

    async def _prompt(self, params: Params) -> dict[str, Any]:
        session_id = params.session_id()
        relay = self._relay(session_id)
        content = prompt_content(params.raw("prompt"))
        snapshot = await self._require(session_id, _EDIT)
        if snapshot.title is None:
            await self._name_session(session_id, content)
        terminal = await self._run_prompt(session_id, content)
        await relay.wait_relayed(terminal.event_id if terminal is not None else 0)
        return self._stop_reason(terminal)

    async def _run_prompt(self, session_id: str, content: list[dict[str, Any]]) -> Event | None:
        """Send the prompt and follow its turn to the end; the turn's terminal event.

        Cancellation: the connection went away (or the client cancelled the request):
        the turn is interrupted, so it ends ``cancelled`` rather than running on.
        """
        terminal: Event | None = None
        try:
            async with self.runtime.open_turn_stream(session_id, content) as (_accepted, events):
                async for event in events:
                    terminal = event
        except trio.Cancelled:
            if not _is_terminal(terminal):
                with (
                    trio.move_on_after(_INTERRUPT_TIMEOUT, shield=True),
                    contextlib.suppress(OmnigentError),
                ):
                    await self.runtime.interrupt(session_id)
            raise
        return terminal

    def _stop_reason(self, terminal: Event | None) -> dict[str, Any]:
        if isinstance(terminal, ResponseCompleted):
            return {"stopReason": "end_turn"}
        if isinstance(terminal, ResponseCancelled | SessionStatus):
            return {"stopReason": "cancelled"}
        if isinstance(terminal, ResponseFailed):
            if terminal.error.code in _LENGTH_CODES:
                return {"stopReason": "max_tokens"}
            if terminal.error.code in _REFUSAL_CODES:
                return {"stopReason": "refusal"}
            if terminal.error.code == "max_steps":
                return {"stopReason": "max_turn_requests"}
            raise RpcError(INTERNAL_ERROR, terminal.error.message, {"code": terminal.error.code})
        raise RpcError(
            REFUSED, "the session ended before answering (was it deleted?)", {"code": "gone"}
        )

    async def _name_session(self, session_id: str, content: list[dict[str, Any]]) -> None:
        """Title an untitled session after its first prompt, and tell the client."""
        title = prompt_title(content)
        if title is None:
            return
        snapshot = await self.runtime.update_session(session_id, title=title)
        update = {
            "sessionUpdate": "session_info_update",
            "title": title,
            "updatedAt": _iso(snapshot.updated_at or snapshot.created_at),
        }
        with contextlib.suppress(ConnectionClosed):
            await self.connection.notify(
                "session/update", {"sessionId": session_id, "update": update}
            )

    # -- config options ----------------------------------------------------------------

    async def _config_options(self, snapshot: SessionSnapshot) -> list[dict[str, Any]]:
        spec = await self.runtime.get_agent_spec(snapshot.agent_id)
        default = spec.model or "default"
        current = snapshot.model_override or default
        options = [
            {
                "value": default,
                "name": f"{spec.model} (agent default)" if spec.model else "Agent default",
            }
        ]
        if current != default:
            options.append({"value": current, "name": current})
        return [
            {
                "id": "model",
                "name": "Model",
                "description": "The model this session's turns use (any model name is accepted)",
                "category": "model",
                "type": "select",
                "currentValue": current,
                "options": options,
            }
        ]

    async def _set_config_option(self, params: Params) -> dict[str, Any]:
        session_id = params.session_id()
        config_id = params.string("configId", max_len=200)
        if config_id != "model":
            raise invalid(
                "configId", f"unknown config option {config_id!r} (this agent has: model)"
            )
        if params.raw("type") == "boolean" or isinstance(params.raw("value"), bool):
            raise invalid("value", "model is a select option: give a model name")
        value = params.string("value", max_len=200)
        snapshot = await self._require(session_id, _EDIT)
        spec = await self.runtime.get_agent_spec(snapshot.agent_id)
        override = None if value in ("default", spec.model) else value
        try:
            snapshot = await self.runtime.update_session(session_id, model_override=override)
        except InvalidInput as exc:
            raise invalid("value", "must match ^[A-Za-z0-9._:/@-]{1,200}$") from exc
        return {"configOptions": await self._config_options(snapshot)}

    # -- omnigent extensions -----------------------------------------------------------

    async def _omnigent_list(self, params: Params) -> dict[str, Any]:
        page = await self.runtime.list_sessions(
            agent_name=params.optional_string("agentName", max_len=200),
            parent_session_id=params.optional_string("parentSessionId", max_len=200),
            limit=params.integer("limit", low=1, high=100) or 20,
            after=params.optional_string("after", max_len=200),
            viewer=self.user if self._check_access else None,
        )
        return page.to_dict()

    async def _omnigent_info(self, params: Params) -> dict[str, Any]:
        return (await self._require(params.session_id(), _READ)).to_dict()

    async def _omnigent_resolve(self, params: Params) -> dict[str, Any]:
        session_id = params.session_id()
        elicitation_id = params.string("elicitationId", max_len=200)
        action = params.string("action", max_len=20)
        await self._require(session_id, _EDIT)
        resolved = await self.runtime.resolve_elicitation(
            session_id, elicitation_id, action, params.raw("content")
        )
        return {"resolved": resolved}


def _is_terminal(event: Event | None) -> bool:
    if isinstance(event, ResponseCompleted | ResponseFailed | ResponseCancelled):
        return True
    return isinstance(event, SessionStatus) and event.status in TERMINAL_STATUSES


async def serve_acp(
    runtime: Runtime,
    stream: MessageStream,
    resolve_agent: AgentResolver,
    *,
    user: str = "local",
    check_access: bool = False,
    task_status: trio.TaskStatus[AcpAgent] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve ACP over ``stream`` until it ends; see :class:`AcpAgent` for the options.

    Cancellation: everything the connection started is cancelled with it; prompts in
    flight interrupt their turns.
    """
    agent = AcpAgent(runtime, resolve_agent, user=user, check_access=check_access)
    connection = RpcConnection(stream, agent)
    agent.bind(connection)

    async with trio.open_nursery() as nursery:
        await nursery.start(connection.run)
        task_status.started(agent)
