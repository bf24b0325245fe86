"""What a runner serves the server on one link: turns and tool calls.

:class:`RunnerService` is the JSON-RPC handler of the runner's side of a link:

* ``turn/run`` — run one turn of a session: its harness (built on the session's first
  turn, kept for the next ones, rebuilt if the harness or model changes) with a
  :class:`~._turn.RemoteTurn` whose calls go back to the server. A failure answers
  :data:`~._protocol.TURN_FAILED` with the error's slug in ``data.code``; the text of an
  unexpected exception stays in this runner's log.
* ``tool/run`` — run one of the OS tools of a session in its working directory inside
  the workspace (a shell records its process group, for the next start to kill).
* ``panes/*`` — the session's terminals' panes, on the runner's tmux server
  (:class:`~._panes.LinkPanes`: only what the session's spec declares).
* ``mcp/*`` — the session's stdio MCP servers, held on the runner
  (:class:`~._mcp.LinkMcp`).
* ``session/close`` — the session's actor on the server went idle or away: close its
  harness. ``mcp/close`` stops its MCP servers.

Lifetimes: every request runs in the link's RPC connection, in its own cancel scope: the
server's ``$/cancel_request`` (an interrupt) cancels just that turn or tool call, and the
end of the link cancels them all. The harnesses it built are closed, and the panes it
started killed, with :meth:`RunnerService.aclose` when the link ends.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import attrs
import trio

from .._cancellation import only_exceptions, split_cancellation
from ..errors import (
    HarnessError,
    InternalError,
    InvalidInput,
    OmnigentError,
    SandboxUnavailable,
)
from ..harnesses.base import Harness, HarnessEnv, ToolSchema, TurnRequest
from ..link import ERROR_CODE, TURN_FAILED, field, optional_str
from ..model import MessageItem, item_from_dict
from ..observability import continued
from ..processes.sandbox import SandboxPolicy
from ..rpc import INVALID_PARAMS, Admit, RpcConnection, RpcError
from ..spec import AgentSpec
from ..tools import ToolError
from ..tools import os as os_tools
from ._mcp import MCP_METHODS, LinkMcp
from ._panes import PANE_METHODS, LinkPanes
from ._place import RunnerPlace
from ._specs import SessionSpecs
from ._turn import RemoteTurn

__all__ = ["CRASHED", "RunnerService"]

log = logging.getLogger("omnigent.runner")

CRASHED = "the harness failed unexpectedly on the runner; the cause is in the runner's log"
_CLOSE_TIMEOUT = 5.0
_OS_TOOLS = frozenset(os_tools.OS_TOOL_SCHEMAS)


@attrs.define(eq=False)
class _SessionHarness:
    """A session's harness on this runner, and the turn it runs now (if any)."""

    harness: Harness
    key: tuple[str, str | None]
    turn: RemoteTurn | None = None


class _RemoteState:
    """A session's harness state, kept on the server (read and written during a turn)."""

    def __init__(self, service: RunnerService, session_id: str) -> None:
        self._service = service
        self._session_id = session_id

    def _turn(self) -> RemoteTurn:
        entry = self._service.sessions.get(self._session_id)
        if entry is None or entry.turn is None:
            raise HarnessError("a harness's state can be read and written only during a turn")
        return entry.turn

    async def get(self, key: str) -> str | None:
        answer = await self._service.connection.request(
            "turn/state_get", {"turn": self._turn().turn_id, "key": key}
        )
        value = answer.get("value") if isinstance(answer, dict) else None
        return value if isinstance(value, str) else None

    async def set(self, key: str, value: str | None) -> None:
        await self._service.connection.request(
            "turn/state_set", {"turn": self._turn().turn_id, "key": key, "value": value}
        )


def _failure(exc: BaseException) -> RpcError:
    """The ``turn/run`` error for a harness that raised ``exc`` (a leaf, not a group)."""
    if isinstance(exc, OmnigentError) and not isinstance(exc, InternalError):
        return RpcError(TURN_FAILED, exc.message, {ERROR_CODE: exc.code})
    return RpcError(TURN_FAILED, CRASHED, {ERROR_CODE: "harness_crashed"})


def _leaf(exc: BaseException) -> BaseException:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


class RunnerService:
    """The runner's side of one link (see the module docstring)."""

    methods = frozenset({"turn/run", "tool/run", *PANE_METHODS, *MCP_METHODS})
    notifications = frozenset({"session/close", "mcp/close"})
    # Calls stand alone; notifications (in the reader) keep their arrival order anyway.
    ordered: frozenset[str] = frozenset()

    def __init__(self, place: RunnerPlace) -> None:
        self.place = place
        self.sessions: dict[str, _SessionHarness] = {}
        # The spec each session last sent (checked): what its panes may run, and the
        # sandbox everything it starts here runs in.
        self.specs = SessionSpecs(place)
        self.panes = LinkPanes(place, self.specs, lambda: self.connection.nursery)
        self._connection: RpcConnection | None = None
        self._mcp: LinkMcp | None = None

    def bind(self, connection: RpcConnection) -> None:
        """The connection this service answers on (it calls the server back on it)."""
        self._connection = connection
        self._mcp = LinkMcp(self.place, connection, self.specs)

    @property
    def mcp(self) -> LinkMcp:
        assert self._mcp is not None, "bind() the service to its connection first"
        return self._mcp

    @property
    def connection(self) -> RpcConnection:
        assert self._connection is not None, "bind() the service to its connection first"
        return self._connection

    async def handle_notification(self, method: str, params: Any) -> None:
        session_id = params.get("session_id") if isinstance(params, Mapping) else None
        if method == "mcp/close":
            if isinstance(session_id, str):
                self.mcp.close(session_id)
            return
        if isinstance(session_id, str):
            self.specs.forget(session_id)
            entry = self.sessions.pop(session_id, None)
            if entry is not None and entry.turn is None:
                self.connection.nursery.start_soon(_close, entry.harness, session_id)
            elif entry is not None:
                self.sessions[session_id] = entry  # a turn runs: closed when it ends

    async def input_ended(self) -> None:
        """The server is gone for good (the link ended): nothing here waits on its
        next word, and the connection cancels what is in flight at once."""

    async def handle_request(self, method: str, params: Any, admit: Admit) -> Any:
        if method == "tool/run":
            return await self._tool_run(params)
        if method in PANE_METHODS:
            return await self.panes.handle(method, params)
        if method in MCP_METHODS:
            return await self.mcp.handle(method, params)
        return await self._turn_run(params)

    # -- tool/run ----------------------------------------------------------------------

    async def _tool_run(self, params: Any) -> dict[str, Any]:
        name: str = field(params, "name", str)
        args: dict[str, Any] = field(params, "args", dict)
        if name not in _OS_TOOLS:
            raise RpcError(INVALID_PARAMS, f"Invalid params: {name!r} is not a runner tool")
        session_id: str = field(params, "session_id", str)
        try:
            workdir = await self.place.workdir(optional_str(params, "cwd"))
            sandboxed = params.get("sandboxed") is True
            sandbox = await self.specs.sandbox(session_id, required=sandboxed)
        except ToolError as exc:
            return {"output": f"Error: {exc}"}
        except SandboxUnavailable as exc:
            return {"output": f"Error: {exc.message}"}
        tool = getattr(os_tools, name)
        if name == "sys_os_shell":
            output: str = await tool(workdir, args, tracker=self.place.groups, sandbox=sandbox)
        else:
            output = await tool(workdir, args, sandbox=sandbox)
        return {"output": output}

    # -- turn/run ----------------------------------------------------------------------

    async def _turn_run(self, params: Any) -> dict[str, Any]:
        turn_id: str = field(params, "turn", str)
        session_id: str = field(params, "session_id", str)
        try:
            harness_name, spec, request, model = self._read_turn(params, session_id)
            self.specs.remember(session_id, spec)
            entry = await self._harness_for(session_id, harness_name, spec, model, params)
        except OmnigentError as exc:
            raise _failure(exc) from None
        turn = RemoteTurn(self.connection, turn_id, session_id, request.response_id)
        entry.turn = turn
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(turn.run_flusher)
                # The server's turn span is the parent of what this turn opens here.
                with continued(params.get("trace")):
                    await entry.harness.run_turn(request, turn)
                await turn.flush()
                nursery.cancel_scope.cancel()
        except BaseException as exc:
            cancel, failure = split_cancellation(exc)
            if failure is None or not only_exceptions(failure):
                raise
            leaf = _leaf(failure)
            if not isinstance(leaf, OmnigentError) or isinstance(leaf, InternalError):
                log.exception(
                    "session %s: harness %r crashed", session_id, harness_name, exc_info=failure
                )
            if cancel is not None:
                raise cancel from None
            raise _failure(leaf) from None
        finally:
            entry.turn = None
            if self.sessions.get(session_id) is not entry:  # closed meanwhile
                with trio.CancelScope(shield=True):
                    await _close(entry.harness, session_id)
        reported = turn.reported
        return {"reported": None if reported is None else list(reported)}

    def _read_turn(
        self, params: Any, session_id: str
    ) -> tuple[str, AgentSpec, TurnRequest, str | None]:
        """The turn's harness name, spec, request and model override, checked.

        Raises:
            SpecError: the spec is invalid, or asks for what this runner refuses.
            InvalidInput: the request is malformed.
        """
        harness_name: str = field(params, "harness", str)
        spec = AgentSpec.from_dict(field(params, "spec", dict))
        self.place.check_spec(spec, optional_str(params, "agent_id"))
        raw: dict[str, Any] = field(params, "request", dict)
        try:
            history = tuple(item_from_dict(i) for i in field(raw, "history", list))
            taken = tuple(item_from_dict(i) for i in field(raw, "input", list))
            tools = tuple(
                ToolSchema(
                    field(t, "name", str),
                    field(t, "description", str),
                    field(t, "parameters", dict),
                )
                for t in field(raw, "tools", list)
            )
            request = TurnRequest(
                session_id=session_id,
                response_id=field(raw, "response_id", str),
                turn_number=field(raw, "turn_number", int),
                history=history,
                input=tuple(m for m in taken if isinstance(m, MessageItem)),
                instructions=field(raw, "instructions", str),
                model=optional_str(raw, "model"),
                tools=tools,
                spec=spec,
            )
        except RpcError as exc:
            raise InvalidInput(exc.message) from None
        return harness_name, spec, request, optional_str(params, "model_override")

    async def _harness_for(
        self,
        session_id: str,
        name: str,
        spec: AgentSpec,
        model: str | None,
        params: Mapping[str, Any],
    ) -> _SessionHarness:
        """The session's harness: the one it had if it runs the same harness and model."""
        key = (name, model)
        entry = self.sessions.get(session_id)
        if entry is not None and entry.key == key:
            return entry
        if entry is not None:
            del self.sessions[session_id]
            await _close(entry.harness, session_id)
        config = spec.executor.config
        if model is not None and model != config.model:
            config = attrs.evolve(config, model=model)
        os_env = spec.os_env
        cwd = os_env.cwd if os_env is not None else None
        place = self.place

        async def workdir() -> Any:
            try:
                return await place.workdir(cwd)
            except ToolError as exc:
                raise HarnessError(str(exc)) from exc

        async def sandbox() -> SandboxPolicy | None:
            try:
                return await self.specs.sandbox(session_id)
            except ToolError as exc:
                raise HarnessError(str(exc)) from exc

        env = HarnessEnv(
            session_id,
            spec,
            config,
            place.http,
            harness_name=name,
            processes=place.processes,
            working_directory=workdir,
            state=_RemoteState(self, session_id),
            data_dir=place.home / "harnesses" / name,
            sandbox=sandbox,
        )
        harness = place.harnesses.create(name, env)
        entry = _SessionHarness(harness, key)
        self.sessions[session_id] = entry
        return entry

    async def aclose(self) -> None:
        """Close every harness this link built and kill its panes (the link ended).

        Cancellation: shielded, bounded per harness.
        """
        sessions, self.sessions = self.sessions, {}
        with trio.CancelScope(shield=True):
            await self.panes.aclose()
            if self._mcp is not None:
                await self._mcp.aclose()
            for session_id, entry in sessions.items():
                await _close(entry.harness, session_id)


async def _close(harness: Harness, session_id: str) -> None:
    with trio.move_on_after(_CLOSE_TIMEOUT, shield=True):
        try:
            await harness.aclose()
        except Exception:
            log.warning("closing the harness of %s failed", session_id, exc_info=True)
