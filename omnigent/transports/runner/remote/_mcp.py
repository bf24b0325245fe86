"""A runner-bound session's stdio MCP servers, as the server's tools see them.

:class:`RemoteMcp` is the :class:`~omnigent.core.tools.ToolServers` of a session's stdio
MCP servers when the session is bound to a runner: the runner starts and holds them
(:mod:`omnigent.runner._mcp`), the server offers their tools and calls them through the
session's one tool path (policies included). Like the local
:class:`~omnigent.mcp.McpServers`, it is started as each turn is prepared — one task
of the session's nursery holds it until :meth:`RemoteMcp.close`, and then tells the
runner to stop them (``mcp/close``).

A server's elicitation on the runner comes back as ``mcp/elicit`` and is asked here
(:meth:`RemoteMcp.elicit`, found through the hub). A runner that took a new link has
lost the servers: the next call starts them again (once) and retries.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import trio

from ....errors import RunnerDisconnected, RunnerFailed, RunnerOffline
from ....harnesses.base import ToolSchema
from ....link import ERROR_CODE, MCP_FAILED, turn_failure
from ....model import ElicitationParams
from ....rpc import ConnectionClosed, RpcError
from ....spec import AgentSpec

if TYPE_CHECKING:
    from ....core.tools import McpAsk
    from .._hub import RunnerHub

__all__ = ["RemoteMcp"]

log = logging.getLogger("omnigent.transports.runner")

_CLOSE_TIMEOUT = 2.0


def _not_started(error: RpcError) -> bool:
    """Whether the runner answered that it holds no MCP servers of the session."""
    data = error.data if isinstance(error.data, Mapping) else {}
    return error.code == MCP_FAILED and data.get(ERROR_CODE) == "mcp_not_started"


class RemoteMcp:
    """A session's stdio MCP servers on its runner (see the module docstring).

    Args:
        hub: the runners connected to this server.
        runner_id: the session's runner.
        session_id: the session.
        spec: its spec (the runner checks it, and starts its stdio servers).
        agent_id: its agent (a runner trusts the spec of its own ``run --server``).
        ask: asks the session's person (a server's elicitation).
    """

    def __init__(
        self,
        hub: RunnerHub,
        runner_id: str,
        session_id: str,
        spec: AgentSpec,
        agent_id: str | None,
        ask: McpAsk,
    ) -> None:
        self._hub = hub
        self.runner_id = runner_id
        self._session_id = session_id
        self._spec = spec
        self._agent_id = agent_id
        self._ask = ask
        self._tools: dict[str, ToolSchema] = {}
        self._scope: trio.CancelScope | None = None
        self._started = False
        self._in_turn = 0

    @property
    def started(self) -> bool:
        return self._started

    def schemas(self) -> tuple[ToolSchema, ...]:
        return tuple(self._tools.values())

    def offers(self, name: str) -> bool:
        return name in self._tools

    async def start(self, nursery: trio.Nursery) -> None:
        """Have the runner start the servers (once); hold them in a task of ``nursery``.

        Raises:
            RunnerOffline: the runner did not connect in time.
            RunnerFailed: a server did not start, or the runner refused the spec.
            RunnerDisconnected: the runner's link ended meanwhile.
        """
        if not self._started:
            await nursery.start(self._hold)
            self._started = True

    def close(self) -> None:
        if self._scope is not None:
            self._scope.cancel()

    async def _hold(self, task_status: trio.TaskStatus[None]) -> None:
        with trio.CancelScope() as scope:
            self._scope = scope
            await self._start_there()
            self._hub.mcp_sessions[self._session_id] = self
            try:
                task_status.started()
                await trio.sleep_forever()
            finally:
                if self._hub.mcp_sessions.get(self._session_id) is self:
                    del self._hub.mcp_sessions[self._session_id]
                runner = self._hub.get(self.runner_id)
                if runner is not None:
                    with (
                        trio.move_on_after(_CLOSE_TIMEOUT, shield=True),
                        contextlib.suppress(ConnectionClosed),
                    ):
                        await runner.connection.notify(
                            "mcp/close", {"session_id": self._session_id}
                        )

    async def _start_there(self) -> None:
        """Start the servers on the runner and learn their tools (see :meth:`start`)."""
        runner = await self._hub.wait_for(self.runner_id)
        params = {
            "session_id": self._session_id,
            "spec": self._spec.to_dict(),
            "agent_id": self._agent_id,
        }
        try:
            answer = await runner.connection.request("mcp/start", params)
        except ConnectionClosed:
            raise RunnerDisconnected(self.runner_id) from None
        except RpcError as error:
            if error.code == MCP_FAILED:
                raise RunnerFailed(*turn_failure(error)) from None
            raise RunnerFailed("harness_error", f"the runner refused: {error.message}") from None
        tools: dict[str, ToolSchema] = {}
        listed = answer.get("tools") if isinstance(answer, dict) else None
        for tool in listed if isinstance(listed, list) else ():
            name, about, schema = (tool.get(k) for k in ("name", "description", "parameters"))
            if isinstance(name, str) and isinstance(about, str) and isinstance(schema, dict):
                tools[name] = ToolSchema(name, about, schema)
        self._tools = tools

    async def call(self, name: str, arguments: Mapping[str, Any], *, in_turn: bool) -> str:
        """Call a tool on the runner; its output, failures as ``Error: …`` strings.

        Cancellation: the call is cancelled on the runner too.
        """
        self._in_turn += in_turn
        try:
            try:
                return await self._call_there(name, arguments, in_turn)
            except RpcError as error:
                if not _not_started(error):
                    return f"Error: the runner refused {name}: {error.message}"
            # The runner took a new link: the servers went with the old one.
            try:
                await self._start_there()
            except (RunnerOffline, RunnerFailed, RunnerDisconnected) as exc:
                return f"Error: the MCP servers did not start again: {exc.message}"
            try:
                return await self._call_there(name, arguments, in_turn)
            except RpcError as error:
                return f"Error: the runner refused {name}: {error.message}"
        finally:
            self._in_turn -= in_turn

    async def _call_there(self, name: str, arguments: Mapping[str, Any], in_turn: bool) -> str:
        runner = self._hub.get(self.runner_id)
        if runner is None:
            return f"Error: runner {self.runner_id!r} is offline"
        params = {
            "session_id": self._session_id,
            "name": name,
            "arguments": dict(arguments),
            "in_turn": in_turn,
        }
        try:
            answer = await runner.connection.request("mcp/call", params)
        except ConnectionClosed:
            return f"Error: runner {self.runner_id!r} disconnected while {name} ran"
        output = answer.get("output") if isinstance(answer, dict) else None
        if not isinstance(output, str):
            return f"Error: runner {self.runner_id!r} answered {name} without an output"
        return output

    async def elicit(self, params: ElicitationParams, in_turn: bool) -> tuple[str, Any]:
        """Ask the session's person for one of its servers (``mcp/elicit``)."""
        return await self._ask(params, in_turn or self._in_turn > 0)
