"""A link's stdio MCP servers on the runner: started for the server's sessions, held here.

:class:`LinkMcp` serves the ``mcp/*`` requests of one link. A runner-bound session's
stdio MCP servers (``mcp_servers[].command``) run on the runner, in the session's
working directory inside the workspace, as the server would run them for a local
session (:class:`~omnigent.mcp.McpServers`); its HTTP servers stay on the server.

* ``mcp/start {session_id, spec, agent_id}`` → ``{tools}``: checks the spec as
  ``turn/run`` does (the programs its operator allowed, or the spec of its own ``run
  --server``), starts the spec's stdio servers (once per session, inside its sandbox
  if it has one; a second start answers the same tools) and lists their tools
  (``[{name, description, parameters}]``). A server that fails to start answers
  :data:`~._protocol.MCP_FAILED` with its name and stderr tail; nothing stays open.
* ``mcp/call {session_id, name, arguments, in_turn}`` → ``{output}`` (``Error: …`` as
  locally); a session with no servers here answers ``MCP_FAILED`` with ``data.code``
  ``mcp_not_started`` (the link was replaced: the server starts them again).
* ``mcp/close {session_id}`` (notification): stops them.

A server's elicitation comes back to the server as ``mcp/elicit {session_id, params,
in_turn}`` → ``{action, content}`` (a person answers there). When the link ends,
:meth:`LinkMcp.aclose` stops every server it started.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import attrs
import trio

from ..errors import HarnessError, OmnigentError
from ..link import ERROR_CODE, MCP_FAILED, field
from ..mcp import require_mcp
from ..model import ElicitationParams, unstructure
from ..processes.sandbox import SandboxPolicy
from ..rpc import INVALID_PARAMS, ConnectionClosed, RpcConnection, RpcError
from ..spec import AgentSpec
from ..tools import ToolError
from ._place import RunnerPlace
from ._specs import SessionSpecs

if TYPE_CHECKING:
    from ..mcp import McpServers

__all__ = ["MAX_MCP_SESSIONS", "MCP_METHODS", "LinkMcp"]

log = logging.getLogger("omnigent.runner")

MAX_MCP_SESSIONS = 256
"""Sessions whose MCP servers one link may hold at once."""
MCP_METHODS = frozenset({"mcp/start", "mcp/call"})
_ELICIT_TIMEOUT = 24 * 3600.0  # a person may take their time; the link bounds it too


@attrs.define(eq=False)
class _Held:
    servers: McpServers
    ready: trio.Event = attrs.field(factory=trio.Event)
    failure: RpcError | None = None


def _failed(message: str, code: str = "mcp_server_failed") -> RpcError:
    return RpcError(MCP_FAILED, message, {ERROR_CODE: code})


class LinkMcp:
    """The stdio MCP servers one link started (see the module docstring).

    Args:
        place: the runner's machine (its workspace and trust rule).
        connection: the link's JSON-RPC connection: the servers are held in its
            nursery, and elicitations are asked on it.
        specs: the specs the link's sessions sent (an ``mcp/start``'s is remembered
            there): the sandbox the servers run in.
    """

    def __init__(self, place: RunnerPlace, connection: RpcConnection, specs: SessionSpecs) -> None:
        self._place = place
        self._connection = connection
        self._specs = specs
        self._held: dict[str, _Held] = {}

    async def handle(self, method: str, params: Any) -> dict[str, Any]:
        """Answer one ``mcp/*`` request.

        Raises:
            RpcError: -32602 for a malformed request; MCP_FAILED.
        """
        session_id: str = field(params, "session_id", str)
        if method == "mcp/start":
            return await self._start(session_id, params)
        held = self._held.get(session_id)
        if held is None or not held.ready.is_set() or held.failure is not None:
            raise _failed(f"no MCP servers of session {session_id} run here", "mcp_not_started")
        name: str = field(params, "name", str)
        arguments: dict[str, Any] = field(params, "arguments", dict)
        in_turn = params.get("in_turn") is True
        if not held.servers.offers(name):
            return {"output": f"Error: no MCP tool {name!r} on this runner"}
        return {"output": await held.servers.call(name, arguments, in_turn=in_turn)}

    def close(self, session_id: str) -> None:
        """Stop a session's servers (``mcp/close``); their task ends in the background."""
        held = self._held.pop(session_id, None)
        if held is not None:
            held.servers.close()

    async def _start(self, session_id: str, params: Any) -> dict[str, Any]:
        try:
            spec = AgentSpec.from_dict(field(params, "spec", dict))
        except OmnigentError as exc:
            raise RpcError(INVALID_PARAMS, f"Invalid params: spec: {exc.message}") from None
        agent_id = params.get("agent_id")
        try:
            self._place.check_spec(spec, agent_id if isinstance(agent_id, str) else None)
            require_mcp(spec)
        except OmnigentError as exc:
            raise _failed(exc.message, exc.code) from None
        self._specs.remember(session_id, spec)
        held = self._held.get(session_id)
        if held is None:
            if len(self._held) >= MAX_MCP_SESSIONS:
                raise _failed(f"this link already holds {MAX_MCP_SESSIONS} sessions' servers")
            held = self._held[session_id] = _Held(self._servers(session_id, spec))
            try:
                await held.servers.start(self._connection.nursery)
            except HarnessError as exc:
                held.failure = _failed(exc.message)
            except BaseException:
                self._held.pop(session_id, None)
                held.servers.close()
                raise
            finally:
                held.ready.set()
            if held.failure is not None:
                self._held.pop(session_id, None)
                raise held.failure
        else:
            await held.ready.wait()  # a start under way
            if held.failure is not None:
                raise held.failure
        tools = [
            {"name": s.name, "description": s.description, "parameters": dict(s.parameters)}
            for s in held.servers.schemas()
        ]
        return {"tools": tools}

    def _servers(self, session_id: str, spec: AgentSpec) -> McpServers:
        from ..mcp import McpServers  # the optional `mcp` extra (require_mcp said so)

        stdio = tuple(s for s in spec.mcp_servers if s.command)
        os_env = spec.os_env
        cwd = os_env.cwd if os_env is not None else None
        place = self._place

        async def workdir() -> Any:
            try:
                return await place.workdir(cwd)
            except ToolError as exc:
                raise HarnessError(str(exc)) from exc

        async def ask(asked: ElicitationParams, in_turn: bool) -> tuple[str, Any]:
            request = {
                "session_id": session_id,
                "params": unstructure(asked, ElicitationParams),
                "in_turn": in_turn,
            }
            try:
                with trio.fail_after(_ELICIT_TIMEOUT):
                    answer = await self._connection.request("mcp/elicit", request)
            except (ConnectionClosed, RpcError, trio.TooSlowError) as exc:
                log.info("session %s: an MCP elicitation was not answered: %r", session_id, exc)
                return "cancel", None
            if not isinstance(answer, Mapping) or answer.get("action") not in (
                "accept",
                "decline",
                "cancel",
            ):
                return "cancel", None
            return str(answer["action"]), answer.get("content")

        async def sandbox() -> SandboxPolicy | None:
            try:
                return await self._specs.sandbox(session_id)
            except ToolError as exc:
                raise HarnessError(str(exc)) from exc

        return McpServers(stdio, ask=ask, cwd=workdir, sandbox=sandbox)

    async def aclose(self) -> None:
        """Stop every session's servers (the link ended).

        Cancellation: shielded, bounded by each server's own close.
        """
        held, self._held = self._held, {}
        with trio.CancelScope(shield=True):
            for entry in held.values():
                entry.servers.close()
            for entry in held.values():
                if entry.servers.started:
                    await entry.servers.aclose()
