"""A runner-bound session's harness and tools on the server: they forward to the runner.

:class:`RunnerHarness` is the harness the server's turn runs for a session bound to a
runner. Its ``run_turn`` waits for the runner (``launching`` meanwhile, at most the
hub's ``wait``: then the turn fails ``runner_offline``), sends it the
:class:`~omnigent.harnesses.base.TurnRequest` with ``turn/run``, and serves the turn's
calls back (:class:`~._peer.ServedTurn`) until the runner answers. The server's turn
keeps its lifecycle: it publishes ``running``, ``response.created`` and the one terminal
pair, from how ``run_turn`` ended — returned, raised (the runner's failure keeps its
slug: :class:`~omnigent.errors.RunnerFailed`; a link that ends first is
:class:`~omnigent.errors.RunnerDisconnected`) or cancelled (an interrupt cancels
``turn/run`` on the runner too, so its harness and its shells stop).

:class:`RunnerWorkplace` runs a session's OS tools on its runner (``tool/run``), after
the server's policies have let the call through, and holds its terminals' panes there
(:class:`~._panes.RemotePanes`).
"""

from __future__ import annotations

import contextlib
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

import outcome
import trio

from ...._ids import new_id
from ....errors import RunnerDisconnected, RunnerFailed, RunnerOffline
from ....harnesses.base import HarnessEnv, TurnContext, TurnRequest
from ....link import TURN_FAILED, turn_failure
from ....model import Item, unstructure
from ....observability import carrier
from ....rpc import ConnectionClosed, RpcError
from ....spec import AgentSpec
from ._mcp import RemoteMcp
from ._panes import RemotePanes
from ._peer import ServedTurn

if TYPE_CHECKING:
    from ....core.tools import McpAsk
    from .._hub import ConnectedRunner, RunnerHub

__all__ = ["RunnerHarness", "RunnerWorkplace", "encode_request"]

log = logging.getLogger("omnigent.transports.runner")

_FINALISE_TIMEOUT = 10.0
_CLOSE_TIMEOUT = 2.0


def encode_request(request: TurnRequest) -> dict[str, Any]:
    """A turn's request as ``turn/run`` carries it (its spec travels beside it)."""
    return {
        "response_id": request.response_id,
        "turn_number": request.turn_number,
        "history": [unstructure(item, Item) for item in request.history],
        "input": [unstructure(item, Item) for item in request.input],
        "instructions": request.instructions,
        "model": request.model,
        "tools": [
            {"name": t.name, "description": t.description, "parameters": dict(t.parameters)}
            for t in request.tools
        ],
    }


class RunnerHarness:
    """The server-side harness of a session bound to a runner (module docstring).

    Args:
        hub: the runners connected to this server.
        runner_id: the session's runner.
        env: what the server would have built the real harness from: its spec, its
            config (with the session's model override), its stored state.
        agent_id: the session's agent (a runner trusts its own uploaded agent).
    """

    def __init__(
        self, hub: RunnerHub, runner_id: str, env: HarnessEnv, agent_id: str | None = None
    ) -> None:
        self._hub = hub
        self.runner_id = runner_id
        self._env = env
        self._agent_id = agent_id
        self._runner: ConnectedRunner | None = None

    async def _reach(self, ctx: TurnContext) -> ConnectedRunner:
        runner = self._hub.get(self.runner_id)
        if runner is not None:
            return runner
        async with ctx.launching():  # waiting for the runner to connect
            return await self._hub.wait_for(self.runner_id)

    async def run_turn(self, request: TurnRequest, ctx: TurnContext) -> None:
        """Run the turn on the runner, serving its calls; see the module docstring.

        Raises:
            RunnerOffline: the runner did not connect in time.
            RunnerDisconnected: its link ended during the turn.
            RunnerFailed: its harness failed (its slug and message).

        Cancellation: ``turn/run`` is cancelled on the runner (best effort, bounded);
        a message that streamed but was never added is kept ``incomplete``.
        """
        runner = await self._reach(ctx)
        self._runner = runner
        env = self._env
        spec_model = env.spec.executor.config.model
        turn_id = new_id("rturn")
        trace = carrier()  # the turn's span: the runner's spans of it are its children
        params = {
            "turn": turn_id,
            "session_id": request.session_id,
            "harness": env.harness_name,
            "spec": env.spec.to_dict(),
            "agent_id": self._agent_id,
            "model_override": env.config.model if env.config.model != spec_model else None,
            "request": encode_request(request),
            "trace": trace,
        }
        result: outcome.Outcome[Any] | None = None
        async with trio.open_nursery() as nursery:
            served = ServedTurn(turn_id, ctx, nursery, env.state, trace)
            try:
                with runner.peer.serving(served):
                    try:
                        result = outcome.Value(await runner.connection.request("turn/run", params))
                    except (ConnectionClosed, RpcError) as exc:
                        result = outcome.Error(exc)  # raised below, outside the nursery
            finally:
                with trio.move_on_after(_FINALISE_TIMEOUT, shield=True):
                    await served.keep_partial_messages()
                nursery.cancel_scope.cancel()
        assert result is not None
        try:
            answer = result.unwrap()
        except ConnectionClosed:
            raise RunnerDisconnected(self.runner_id) from None
        except RpcError as error:
            if error.code == TURN_FAILED:
                raise RunnerFailed(*turn_failure(error)) from None
            raise RunnerFailed(
                "harness_error", f"the runner refused the turn: {error.message}"
            ) from None
        reported = answer.get("reported") if isinstance(answer, dict) else None
        if isinstance(reported, list) and len(reported) == 2 and isinstance(reported[0], str):
            error_text = reported[1] if isinstance(reported[1], str) else None
            ctx.report_response_status(reported[0], error_text)

    async def aclose(self) -> None:
        """Tell the runner the session is done with its harness (best effort)."""
        runner, self._runner = self._runner, None
        if runner is None or not runner.online:
            return
        with trio.move_on_after(_CLOSE_TIMEOUT):
            with contextlib.suppress(ConnectionClosed):
                await runner.connection.notify(
                    "session/close", {"session_id": self._env.session_id}
                )


class RunnerWorkplace:
    """Where a runner-bound session's OS tools run: on its runner (``tool/run``).

    Args:
        hub: the runners connected to this server.
        runner_id: the session's runner.
        session_id: the session.
        spec: the session's spec as the runner is given it: its ``os_env.cwd`` is
            resolved there, inside the workspace, and its ``os_env.sandbox`` (an
            ancestor's, when it has none of its own) confines what runs there.
        agent_id: the session's agent (a runner trusts its own uploaded agent).
    """

    def __init__(
        self,
        hub: RunnerHub,
        runner_id: str,
        session_id: str,
        spec: AgentSpec,
        agent_id: str | None = None,
    ) -> None:
        self._hub = hub
        self.runner_id = runner_id
        self._session_id = session_id
        self._spec = spec
        os_env = spec.os_env
        self._cwd = (os_env.cwd or None) if os_env is not None else None
        self._sandboxed = os_env is not None and os_env.sandbox.confined
        self._agent_id = agent_id
        self._panes = RemotePanes(hub, runner_id, session_id, self._cwd)

    @property
    def spec(self) -> AgentSpec:
        return self._spec

    def mcp_servers(self, ask: McpAsk) -> RemoteMcp:
        """The spec's stdio MCP servers, run on the runner."""
        return RemoteMcp(
            self._hub, self.runner_id, self._session_id, self._spec, self._agent_id, ask
        )

    @property
    def panes(self) -> RemotePanes:
        """The runner's tmux server, for this session's terminals."""
        return self._panes

    async def start_directory(self, spec_cwd: str | None, raw: str | None) -> Path:
        """Where a terminal starts, resolved on the runner.

        Raises:
            ToolError: the directory cannot be used, or the runner is not reachable.
        """
        return await self._panes.start_directory(spec_cwd, raw)

    async def run_tool(self, name: str, args: dict[str, Any]) -> str:
        """The tool's output, from the runner; its failures as ``Error: …`` strings.

        Cancellation: the call is cancelled on the runner (a shell's group is killed).
        """
        try:
            runner = await self._hub.wait_for(self.runner_id)
        except RunnerOffline as exc:
            return f"Error: {exc.message}"
        params = {
            "session_id": self._session_id,
            "name": name,
            "args": args,
            "cwd": self._cwd,
            "sandboxed": self._sandboxed,
        }
        try:
            answer = await runner.connection.request("tool/run", params)
        except ConnectionClosed:
            return f"Error: runner {self.runner_id!r} disconnected while {name} ran"
        except RpcError as error:
            return f"Error: the runner refused {name}: {error.message}"
        output = answer.get("output") if isinstance(answer, dict) else None
        if not isinstance(output, str):
            return f"Error: runner {self.runner_id!r} answered {name} without an output"
        return output
