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
  directory inside the workspace;
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
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import attrs
import trio

from ..processes import HISTORY_LIMIT
from ..rpc import INVALID_PARAMS, RpcError
from ..spec import AgentSpec
from ..tools import ToolError, resolve_inside
from ..tools import terminals as term
from ._place import RunnerPlace
from ._protocol import ERROR_CODE, PANE_FAILED, field

__all__ = ["MAX_PANES", "PANE_METHODS", "LinkPanes"]

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


def _invalid(message: str) -> RpcError:
    return RpcError(INVALID_PARAMS, f"Invalid params: {message}")


def _failed(exc: Exception) -> RpcError:
    if isinstance(exc, term.TmuxFailed):
        data = {ERROR_CODE: "tmux_failed", "gone": exc.gone, "command": exc.command}
        return RpcError(PANE_FAILED, exc.message, data)
    if isinstance(exc, term.TmuxUnavailable):
        return RpcError(PANE_FAILED, str(exc), {ERROR_CODE: "tmux_unavailable"})
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
        spec_of: the spec a session's last ``turn/run`` on this link carried (checked
            by the runner), or None.
    """

    def __init__(self, place: RunnerPlace, spec_of: Callable[[str], AgentSpec | None]) -> None:
        self._place = place
        self._spec_of = spec_of
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
        except (term.TmuxFailed, term.TmuxUnavailable, ToolError) as exc:
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
        spec = self._spec_of(session_id)
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
            record.pane = await self._place.tmux.start_pane(name, cwd, command, args, env)
        except BaseException:
            with trio.CancelScope(shield=True):
                await self._kill(session_id, name)
            raise
        return {"pane_id": record.pane.pane_id, "pid": record.pane.pid}

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
