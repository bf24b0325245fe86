"""A runner-bound session's terminals on the server: their panes are on the runner.

:class:`RemotePanes` is the :class:`~omnigent.core.work.Panes` of a session bound to a
runner: each call is a ``panes/*`` request on the runner's link (the runner checks it
against the session's spec, :mod:`omnigent.runner._panes`). The terminal's life — its
task in the session's nursery, its ``session.resource.*`` events, the idle watcher —
stays on the server, as for a local terminal.

The runner's answers become what :class:`~omnigent.tools.terminals.TmuxServer` raises:
``TmuxFailed`` (gone or not), ``TmuxUnavailable`` — also when the runner is offline or
its link ends, so a terminal whose runner went away ends like one whose pane exited —
and ``ToolError`` for a start directory the runner cannot use.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import trio

from ....link import ERROR_CODE, PANE_FAILED
from ....rpc import ConnectionClosed, RpcError
from ....tools import ToolError
from ....tools.terminals import NewPane, TmuxFailed, TmuxUnavailable

if TYPE_CHECKING:
    from .._hub import RunnerHub

__all__ = ["RemotePanes"]

_KILL_TIMEOUT = 35.0  # the runner's own bound (30 s) and the way there and back


class RemotePanes:
    """The panes of one runner-bound session, on its runner (see the module docstring).

    Args:
        hub: the runners connected to this server.
        runner_id: the session's runner.
        session_id: the session.
        cwd: the spec's ``os_env.cwd`` (resolved by the runner, inside its workspace).
    """

    def __init__(self, hub: RunnerHub, runner_id: str, session_id: str, cwd: str | None) -> None:
        self._hub = hub
        self._runner_id = runner_id
        self._session_id = session_id
        self._cwd = cwd

    async def _call(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """The runner's answer to ``method``.

        Raises:
            TmuxFailed, TmuxUnavailable, ToolError: see the module docstring.
        """
        runner = self._hub.get(self._runner_id)
        if runner is None:
            raise TmuxUnavailable(f"runner {self._runner_id!r} is offline")
        try:
            answer = await runner.connection.request(
                method, {"session_id": self._session_id, **params}
            )
        except ConnectionClosed:
            raise TmuxUnavailable(f"runner {self._runner_id!r} disconnected") from None
        except RpcError as error:
            data = error.data if isinstance(error.data, Mapping) else {}
            code = data.get(ERROR_CODE) if error.code == PANE_FAILED else None
            if code == "tool_error":
                raise ToolError(error.message) from None
            if code == "tmux_unavailable":
                raise TmuxUnavailable(error.message) from None
            command = data.get("command")
            shown = [command] if isinstance(command, str) else [method]
            raise TmuxFailed(shown, f"the runner: {error.message}") from None
        return answer if isinstance(answer, dict) else {}

    async def start_directory(self, spec_cwd: str | None, raw: str | None) -> Path:
        """Where a terminal starts, resolved by the runner in its workspace.

        Raises:
            ToolError: the directory cannot be used, or the runner is not reachable.
        """
        params = {"cwd": self._cwd, "spec_cwd": spec_cwd, "raw": raw}
        try:
            answer = await self._call("panes/directory", params)
        except (TmuxFailed, TmuxUnavailable) as exc:
            raise ToolError(str(exc)) from exc
        path = answer.get("path")
        if not isinstance(path, str):
            raise ToolError(f"runner {self._runner_id!r} answered without a directory")
        return Path(path)

    async def start_pane(
        self,
        session_name: str,
        cwd: Path,
        command: str,
        args: Sequence[str],
        env: Mapping[str, str],
    ) -> NewPane:
        params = {
            "session_name": session_name,
            "cwd": str(cwd),
            "command": command,
            "args": list(args),
            "env": dict(env),
        }
        answer = await self._call("panes/start", params)
        pane_id, pid = answer.get("pane_id"), answer.get("pid")
        if not isinstance(pane_id, str) or not isinstance(pid, int) or isinstance(pid, bool):
            raise TmuxFailed(["new-session"], "the runner answered without a pane")
        return NewPane(pane_id, pid)

    async def send_text(self, pane_id: str, text: str) -> None:
        await self._call("panes/send", {"pane_id": pane_id, "text": text, "keys": []})

    async def send_keys(self, pane_id: str, keys: Sequence[str]) -> None:
        await self._call("panes/send", {"pane_id": pane_id, "text": "", "keys": list(keys)})

    async def capture(self, pane_id: str, scrollback: int = 0) -> str:
        answer = await self._call("panes/capture", {"pane_id": pane_id, "scrollback": scrollback})
        text = answer.get("text")
        if not isinstance(text, str):
            raise TmuxFailed(["capture-pane"], "the runner answered without a screen")
        return text

    async def kill_terminal(self, session_name: str, pane_pid: int | None) -> None:
        """Have the runner end the terminal (the runner kills by its own record of the
        pane; ``pane_pid`` is not sent). A runner that is gone has ended it already.

        Cancellation: shielded and bounded.
        """
        with trio.move_on_after(_KILL_TIMEOUT, shield=True):
            with contextlib.suppress(TmuxFailed, TmuxUnavailable, ToolError):
                await self._call("panes/kill", {"session_name": session_name})
