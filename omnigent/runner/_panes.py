"""A link's terminals on the runner: the panes the server's sessions started here.

:class:`LinkPanes` serves the ``panes/*`` requests of one link on the runner's private
tmux server (:attr:`~._place.RunnerPlace.tmux`). The server keeps each terminal's life
(its task, its events, the idle watcher: :class:`~omnigent.core.work.SessionTerminals`);
the runner keeps the panes and checks every request against what it has seen, so the
server can only do what the session's spec declared:

* ``panes/directory {session_id, cwd, spec_cwd, raw}`` → ``{path}``: where a terminal
  starts, resolved inside the session's working directory in the workspace;
* ``panes/start {session_id, session_name, cwd, command, args, env}`` → ``{pane_id,
  pid}``: only a terminal the session's spec declares (command, args and env exactly
  as there — the spec this runner checked at the session's last ``turn/run``), in a
  directory inside the workspace, inside the session's sandbox if it has one;
* ``panes/send {session_id, pane_id, text, keys}``, ``panes/capture {session_id,
  pane_id, scrollback}`` → ``{text}``: only a pane this link started for that session;
* ``panes/kill {session_id, session_name}``: ends the terminal and every process of its
  pane.

A failure answers :data:`~._protocol.PANE_FAILED` with ``data.code`` (``tmux_failed``
with ``data.gone``, ``tmux_unavailable``, ``tool_error``). When the link ends,
:meth:`LinkPanes.aclose` kills every pane it started; a runner killed outright leaves
its tmux server to the next runner's sweep (:func:`~._place.open_runner_place`).
"""

from __future__ import annotations

import functools
import logging
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import attrs
import trio

from ..errors import SandboxUnavailable
from ..link import ERROR_CODE, PANE_FAILED, field
from ..processes import HISTORY_LIMIT
from ..processes.sandbox import SandboxPolicy, open_pane_launch, open_sandbox
from ..rpc import INVALID_PARAMS, RpcError
from ..tools import ToolError, resolve_inside
from ..tools import terminals as term
from ._place import RunnerPlace
from ._specs import SessionSpecs

__all__ = ["MAX_PANES", "PANE_METHODS", "LinkPanes"]

log = logging.getLogger("omnigent.runner")

MAX_PANES = 256
"""Panes one link may have at once (a session has at most 32 terminals)."""
PANE_METHODS = frozenset(
    {"panes/directory", "panes/start", "panes/send", "panes/capture", "panes/kill"}
)
_SESSION_NAME = re.compile("[A-Za-z0-9_-]{1,64}")
_PANE_ID = re.compile("%[0-9]{1,10}")
_MAX_TEXT = 1 << 20
_MAX_KEYS = 256
_KILL_TIMEOUT = 30.0


@attrs.define(eq=False)
class _Pane:
    session_id: str
    session_name: str
    pane: term.NewPane | None = None
    ended: trio.Event = attrs.field(factory=trio.Event)  # lets a sandbox's holder go


def _invalid(message: str) -> RpcError:
    return RpcError(INVALID_PARAMS, f"Invalid params: {message}")


def _failed(exc: Exception) -> RpcError:
    if isinstance(exc, term.TmuxFailed):
        data = {ERROR_CODE: "tmux_failed", "gone": exc.gone, "command": exc.command}
        return RpcError(PANE_FAILED, exc.message, data)
    if isinstance(exc, term.TmuxUnavailable):
        return RpcError(PANE_FAILED, str(exc), {ERROR_CODE: "tmux_unavailable"})
    if isinstance(exc, SandboxUnavailable):
        return RpcError(PANE_FAILED, exc.message, {ERROR_CODE: "tool_error"})
    return RpcError(PANE_FAILED, str(exc), {ERROR_CODE: "tool_error"})


def _strings(value: Any, name: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise _invalid(f"{name} must be an array of strings")
    return value


def _env(value: Any) -> dict[str, str]:
    if not isinstance(value, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise _invalid("env must be an object of strings")
    return dict(value)


class LinkPanes:
    """The panes one link started (see the module docstring).

    Args:
        place: the runner's machine (its workspace and tmux server).
        specs: the specs the link's sessions sent (checked by the runner): what their
            panes may run, and the sandbox they run in.
        nursery: where a sandboxed pane's sandbox is held while the pane lives (the
            link's).
    """

    def __init__(
        self, place: RunnerPlace, specs: SessionSpecs, nursery: Callable[[], trio.Nursery]
    ) -> None:
        self._place = place
        self._specs = specs
        self._nursery = nursery
        self._panes: dict[str, _Pane] = {}

    async def handle(self, method: str, params: Any) -> dict[str, Any]:
        """Answer one ``panes/*`` request.

        Raises:
            RpcError: -32602 for a request this link may not make; PANE_FAILED.
        """
        session_id: str = field(params, "session_id", str)
        try:
            if method == "panes/directory":
                return {"path": str(await self._directory(session_id, params))}
            if method == "panes/start":
                return await self._start(session_id, params)
            if method == "panes/kill":
                await self._kill(session_id, field(params, "session_name", str))
                return {}
            pane_id = self._pane_of(session_id, field(params, "pane_id", str))
            tmux = self._place.tmux
            if method == "panes/capture":
                scrollback: int = field(params, "scrollback", int)
                if not 0 <= scrollback <= HISTORY_LIMIT:
                    raise _invalid(f"scrollback must be 0 to {HISTORY_LIMIT}")
                return {"text": await tmux.capture(pane_id, scrollback)}
            text: str = field(params, "text", str)
            keys = _strings(params.get("keys"), "keys")
            if len(text) > _MAX_TEXT or len(keys) > _MAX_KEYS:
                raise _invalid("text or keys too long")
            if text:
                await tmux.send_text(pane_id, text)
            if keys:
                await tmux.send_keys(pane_id, keys)
            return {}
        except (term.TmuxFailed, term.TmuxUnavailable, ToolError, SandboxUnavailable) as exc:
            raise _failed(exc) from None

    async def _directory(self, session_id: str, params: Any) -> Path:
        spec_cwd, raw = params.get("spec_cwd"), params.get("raw")
        cwd = params.get("cwd")
        for name, value in (("spec_cwd", spec_cwd), ("raw", raw), ("cwd", cwd)):
            if value is not None and not isinstance(value, str):
                raise _invalid(f"{name} must be a string or null")
        root = await self._place.workdir(cwd)
        path: Path = await trio.to_thread.run_sync(term.start_directory, root, spec_cwd, raw)
        return path

    def _declared(
        self, session_id: str, command: str, args: list[str], env: dict[str, str]
    ) -> bool:
        spec = self._specs.get(session_id)
        if spec is None:
            return False
        return any(
            t.command == command and list(t.args) == args and dict(t.env) == env
            for t in spec.terminals.values()
        )

    async def _start(self, session_id: str, params: Any) -> dict[str, Any]:
        name: str = field(params, "session_name", str)
        command: str = field(params, "command", str)
        args = _strings(params.get("args"), "args")
        env = _env(params.get("env"))
        raw_cwd: str = field(params, "cwd", str)
        if _SESSION_NAME.fullmatch(name) is None or name in self._panes:
            raise _invalid(f"session_name {name!r} is malformed or taken")
        if not self._declared(session_id, command, args, env):
            raise _invalid(f"session {session_id} declares no terminal running {command!r} so")
        if len(self._panes) >= MAX_PANES:
            raise _invalid(f"this link already runs {MAX_PANES} terminals")
        cwd = await trio.to_thread.run_sync(resolve_inside, self._place.workspace, raw_cwd)
        record = self._panes[name] = _Pane(session_id, name)
        try:
            policy = await self._specs.sandbox(session_id)
            if policy is None:
                record.pane = await self._place.tmux.start_pane(name, cwd, command, args, env)
            else:
                hold = functools.partial(self._hold_sandboxed, record, policy, cwd)
                record.pane = await self._nursery().start(hold, [command, *args], env)
        except BaseException:
            with trio.CancelScope(shield=True):
                await self._kill(session_id, name)
            raise
        return {"pane_id": record.pane.pane_id, "pid": record.pane.pid}

    async def _hold_sandboxed(
        self,
        record: _Pane,
        policy: SandboxPolicy,
        cwd: Path,
        argv: list[str],
        env: dict[str, str],
        *,
        task_status: trio.TaskStatus[term.NewPane],
    ) -> None:
        """Start the pane inside the session's sandbox, and hold the sandbox (its egress
        proxy, its arguments file) until the pane ends."""
        started = False
        try:
            async with (
                open_sandbox(policy) as box,
                open_pane_launch(box, argv, cwd=cwd, env=env) as launch,
            ):
                tmux = self._place.tmux
                if launch is None:
                    pane = await tmux.start_pane(record.session_name, cwd, argv[0], argv[1:], env)
                else:
                    command, *args = launch.argv
                    pane = await tmux.start_pane(record.session_name, cwd, command, args, {})
                task_status.started(pane)
                started = True
                await record.ended.wait()
        except Exception:
            if not started:
                raise  # the start fails with it
            log.warning("the sandbox of terminal %s failed", record.session_name, exc_info=True)

    def _pane_of(self, session_id: str, pane_id: str) -> str:
        if _PANE_ID.fullmatch(pane_id) is not None:
            for record in self._panes.values():
                pane = record.pane
                if record.session_id == session_id and pane is not None and pane.pane_id == pane_id:
                    return pane_id
        raise _invalid(f"pane {pane_id!r} is not a terminal of session {session_id} here")

    async def _kill(self, session_id: str, name: str) -> None:
        record = self._panes.get(name)
        if record is None or record.session_id != session_id:
            return  # never started here, or already ended
        del self._panes[name]
        pid = None if record.pane is None else record.pane.pid
        with trio.move_on_after(_KILL_TIMEOUT, shield=True):
            await self._place.tmux.kill_terminal(name, pid)
        record.ended.set()

    async def aclose(self) -> None:
        """Kill every pane this link started (the link ended).

        Cancellation: shielded, bounded.
        """
        panes, self._panes = self._panes, {}
        with trio.move_on_after(_KILL_TIMEOUT, shield=True):
            async with trio.open_nursery() as nursery:
                for record in panes.values():
                    pid = None if record.pane is None else record.pane.pid
                    kill = functools.partial(
                        self._place.tmux.kill_terminal, record.session_name, pid
                    )
                    nursery.start_soon(kill)
        for record in panes.values():
            record.ended.set()
