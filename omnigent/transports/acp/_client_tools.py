"""Tools the ACP client runs: its files (unsaved buffers included) and its terminal.

When the client advertises ``fs.readTextFile`` / ``fs.writeTextFile``, the session's
``sys_os_read`` / ``sys_os_write`` go through ``fs/read_text_file`` /
``fs/write_text_file``; with ``terminal``, ``sys_os_shell`` runs ``/bin/sh -c`` in a
client terminal (``terminal/create``, then ``wait_for_exit``, ``output``,
``release``), shown live in the tool call. Each answers in the same shape as the
built-in tool, so the model cannot tell the difference — except that it sees what the
editor sees.

Paths are confined to the session's working directory *lexically* (``..`` and
absolute paths elsewhere are refused): the files are the client's, and the client
resolves them. Every failure is an ``Error: …`` output the model can act on.
"""

from __future__ import annotations

import functools
import json
import logging
import posixpath
from collections.abc import Awaitable, Callable
from typing import Any, ParamSpec, Protocol

import trio

from ...core import ClientTool
from ...rpc import ConnectionClosed, RpcConnection, RpcError
from ._handshake import ClientCapabilities
from ._updates import Translator

__all__ = ["RelayView", "client_tools"]

log = logging.getLogger("omnigent.transports.acp")

_READ_LIMIT = 2000
_SHELL_TIMEOUT = 120.0
_MAX_SHELL_TIMEOUT = 3600.0
_OUTPUT_LIMIT = 100_000
_RELEASE_TIMEOUT = 5.0
_COMMAND = "'command' must be a non-empty string"
_TIMEOUT = f"'timeout' must be a number in (0, {_MAX_SHELL_TIMEOUT:g}]"


class RelayView(Protocol):
    """What the tools need from the session's relay."""

    session_id: str
    cwd: str | None
    translator: Translator

    async def catch_up(self) -> None:
        """Wait (briefly) until the client has been sent every event so far."""
        ...


def client_tools(
    connection: RpcConnection, relay: RelayView, caps: ClientCapabilities
) -> dict[str, ClientTool]:
    """The session's tools the client will run (none without a working directory)."""
    if relay.cwd is None:
        return {}
    tools = _Tools(connection, relay, relay.cwd)
    supplied: dict[str, ClientTool] = {}
    if caps.read:
        supplied["sys_os_read"] = tools.read
    if caps.write:
        supplied["sys_os_write"] = tools.write
    if caps.terminal:
        supplied["sys_os_shell"] = tools.shell
    return supplied


class _Invalid(Exception):
    """A failure the model can act on; its text is the tool's ``Error: …`` output."""


_P = ParamSpec("_P")


def _reports(fn: Callable[_P, Awaitable[str]]) -> Callable[_P, Awaitable[str]]:
    """Turn an :class:`_Invalid` raised in ``fn`` into its output."""

    @functools.wraps(fn)
    async def wrapper(*args: _P.args, **kwargs: _P.kwargs) -> str:
        try:
            return await fn(*args, **kwargs)
        except _Invalid as problem:
            return str(problem)

    return wrapper


def _path(args: dict[str, Any], cwd: str, tool: str) -> tuple[str, str]:
    raw = args.get("path")
    if not isinstance(raw, str) or not raw:
        raise _Invalid(f"Error: invalid arguments for {tool}: 'path' must be a non-empty string")
    if "\x00" in raw:
        raise _Invalid(f"Error: path {raw!r} contains a NUL byte")
    target = posixpath.normpath(raw if posixpath.isabs(raw) else posixpath.join(cwd, raw))
    root = posixpath.normpath(cwd)
    if target != root and not target.startswith(root.rstrip("/") + "/"):
        raise _Invalid(
            f"Error: path {raw!r} is outside the working directory {root}; "
            "use a path inside the working directory"
        )
    return raw, target


def _only(args: dict[str, Any], tool: str, allowed: set[str]) -> None:
    extra = sorted(set(args) - allowed)
    if extra:
        raise _Invalid(f"Error: invalid arguments for {tool}: unknown argument {extra[0]!r}")


def _count(value: Any, name: str, tool: str, *, low: int, default: int) -> int:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise _Invalid(f"Error: invalid arguments for {tool}: '{name}' must be an integer >= {low}")
    return value


class _Tools:
    def __init__(self, connection: RpcConnection, relay: RelayView, cwd: str) -> None:
        self._connection = connection
        self._relay = relay
        self._session_id = relay.session_id
        self._cwd = cwd

    async def _call(self, method: str, params: dict[str, Any], what: str) -> Any:
        try:
            return await self._connection.request(method, {"sessionId": self._session_id, **params})
        except RpcError as error:
            raise _Invalid(f"Error: cannot {what}: {error.message}") from error
        except ConnectionClosed as exc:
            raise _Invalid(f"Error: cannot {what}: the editor disconnected") from exc

    @_reports
    async def read(self, args: dict[str, Any]) -> str:
        _only(args, "sys_os_read", {"path", "offset", "limit"})
        raw, path = _path(args, self._cwd, "sys_os_read")
        offset = _count(args.get("offset"), "offset", "sys_os_read", low=0, default=0)
        limit = _count(args.get("limit"), "limit", "sys_os_read", low=1, default=_READ_LIMIT)
        await self._relay.catch_up()  # the client hears of the call before running it
        # The whole text, so total_lines is exact (as the built-in reports it).
        result = await self._call("fs/read_text_file", {"path": path}, f"read {raw!r}")
        content = result.get("content") if isinstance(result, dict) else None
        if not isinstance(content, str):
            raise _Invalid(f"Error: cannot read {raw!r}: the editor answered no content")
        lines = content.splitlines(keepends=True)
        window = lines[offset : offset + limit]
        return json.dumps(
            {
                "path": raw,
                "content": "".join(window),
                "encoding": "utf-8",
                "offset": offset,
                "limit": limit,
                "returned_lines": len(window),
                "total_lines": len(lines),
            },
            ensure_ascii=False,
        )

    @_reports
    async def write(self, args: dict[str, Any]) -> str:
        _only(args, "sys_os_write", {"path", "content"})
        raw, path = _path(args, self._cwd, "sys_os_write")
        content = args.get("content")
        if not isinstance(content, str):
            raise _Invalid("Error: invalid arguments for sys_os_write: 'content' must be a string")
        if path == posixpath.normpath(self._cwd):
            raise _Invalid(f"Error: cannot write {raw!r}: it is the working directory; name a file")
        await self._relay.catch_up()
        params = {"path": path, "content": content}
        await self._call("fs/write_text_file", params, f"write {raw!r}")
        return json.dumps(
            {"path": raw, "bytes_written": len(content.encode("utf-8")), "created": None},
            ensure_ascii=False,
        )

    @_reports
    async def shell(self, args: dict[str, Any]) -> str:
        _only(args, "sys_os_shell", {"command", "timeout"})
        command = args.get("command")
        if not isinstance(command, str) or not command:
            raise _Invalid(f"Error: invalid arguments for sys_os_shell: {_COMMAND}")
        timeout = args.get("timeout", _SHELL_TIMEOUT)
        if (
            isinstance(timeout, bool)
            or not isinstance(timeout, int | float)
            or not 0 < timeout <= _MAX_SHELL_TIMEOUT
        ):
            raise _Invalid(f"Error: invalid arguments for sys_os_shell: {_TIMEOUT}")
        await self._relay.catch_up()
        created = await self._call(
            "terminal/create",
            {
                "command": "/bin/sh",
                "args": ["-c", command],
                "cwd": self._cwd,
                "outputByteLimit": _OUTPUT_LIMIT,
            },
            "start a terminal",
        )
        terminal_id = created.get("terminalId") if isinstance(created, dict) else None
        if not isinstance(terminal_id, str):
            raise _Invalid("Error: cannot start a terminal: the editor answered no terminalId")
        return await self._in_terminal(args, command, terminal_id, float(timeout))

    async def _in_terminal(
        self, args: dict[str, Any], command: str, terminal_id: str, timeout: float
    ) -> str:
        ref = {"terminalId": terminal_id}
        try:
            await self._show_terminal(args, terminal_id)
            timed_out = False
            with trio.move_on_after(timeout) as waited:
                exited = await self._call("terminal/wait_for_exit", ref, "wait for the command")
            if waited.cancelled_caught:
                timed_out = True
                await self._call("terminal/kill", ref, "stop the command")
                exited = {}
            output = await self._call("terminal/output", ref, "read the command's output")
        finally:
            with trio.move_on_after(_RELEASE_TIMEOUT, shield=True):
                try:
                    await self._call("terminal/release", ref, "release the terminal")
                except _Invalid:
                    log.info("could not release terminal %s", terminal_id)
        status = exited if isinstance(exited, dict) else {}
        if isinstance(output, dict) and isinstance(output.get("exitStatus"), dict):
            status = output["exitStatus"]
        text = output.get("output") if isinstance(output, dict) else None
        return json.dumps(
            {
                "stdout": text if isinstance(text, str) else "",
                "stderr": "",
                "exit_code": None if timed_out else status.get("exitCode"),
                "signal": status.get("signal"),
                "timed_out": timed_out,
                "truncated": bool(isinstance(output, dict) and output.get("truncated")),
                "shell": "/bin/sh",
                "cwd": self._cwd,
                "terminal": True,
                "command": command,
            },
            ensure_ascii=False,
        )

    async def _show_terminal(self, args: dict[str, Any], terminal_id: str) -> None:
        """Embed the terminal in the tool call the client shows (when we know which)."""
        call_id = self._relay.translator.find_call("sys_os_shell", args)
        if call_id is None:
            return
        update = {
            "sessionUpdate": "tool_call_update",
            "toolCallId": call_id,
            "status": "in_progress",
            "content": [{"type": "terminal", "terminalId": terminal_id}],
        }
        try:
            await self._connection.notify(
                "session/update", {"sessionId": self._session_id, "update": update}
            )
        except ConnectionClosed as exc:
            raise _Invalid("Error: cannot run the command: the editor disconnected") from exc
