"""The terminal tools: ``sys_terminal_launch/send/read/list/close``.

Each tool is a plain async function over a :class:`TerminalControl` — the live terminals
of one session, which the core provides — and the model's argument object. What happens
here is the argument handling: every argument is checked before anything is touched, the
terminal must be declared in the spec, a session key must be a safe name, a launch
``cwd`` must resolve inside the working directory (the OS tools' rule, see
:mod:`._paths`), and every result is rendered as the tool's output string — JSON on
success, ``Error: …`` for anything the model can fix. The tmux plumbing itself is in
:mod:`omnigent.processes._tmux` (pure) and :mod:`omnigent.processes._tmux_server`
(processes), re-exported here for the core.

Error handling: a failure the model can act on is raised inside as
:class:`~._args.ToolError` (by this module or by the control) and comes back as
``Error: …``. Anything unexpected raises.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, ParamSpec, Protocol

import attrs

from ..processes import (
    HISTORY_LIMIT,
    MAX_TEXT_CHARS,
    IdleDetector,
    NewPane,
    TmuxFailed,
    TmuxServer,
    TmuxUnavailable,
    capture_argv,
    check_session_key,
    default_base,
    open_tmux_server,
    parse_keys,
    resource_id,
    screen_digest,
    send_keys_argv,
    send_text_argv,
    trim_screen,
)
from ..spec import TerminalSpec
from ._args import ArgField, ToolError, check_args, non_negative_int, string
from ._paths import resolve_inside, resolve_root
from ._terminal_schemas import TERMINAL_TOOL_SCHEMAS

__all__ = [
    "HISTORY_LIMIT",
    "TERMINAL_TOOLS",
    "TERMINAL_TOOL_SCHEMAS",
    "IdleDetector",
    "NewPane",
    "Screen",
    "TerminalControl",
    "TerminalInfo",
    "TmuxFailed",
    "TmuxServer",
    "TmuxUnavailable",
    "ToolError",
    "capture_argv",
    "default_base",
    "open_tmux_server",
    "resource_id",
    "screen_digest",
    "send_keys_argv",
    "send_text_argv",
    "start_directory",
    "sys_terminal_close",
    "sys_terminal_launch",
    "sys_terminal_list",
    "sys_terminal_read",
    "sys_terminal_send",
    "trim_screen",
]

TERMINAL_TOOLS = tuple(TERMINAL_TOOL_SCHEMAS)

_P = ParamSpec("_P")


@attrs.frozen
class TerminalInfo:
    """A running terminal, as ``sys_terminal_list`` shows it."""

    terminal: str
    session: str
    command: str
    cwd: str

    @property
    def resource_id(self) -> str:
        return resource_id(self.terminal, self.session)

    def to_dict(self) -> dict[str, Any]:
        return {
            "terminal": self.terminal,
            "session": self.session,
            "resource_id": self.resource_id,
            "command": self.command,
            "cwd": self.cwd,
            "running": True,
        }


@attrs.frozen
class Screen:
    """What a terminal shows: ``text`` (its last MAX_SCREEN_CHARS characters)."""

    text: str
    scrollback: int
    truncated: bool


class TerminalControl(Protocol):
    """The live terminals of one session (implemented by the core).

    Each method raises :class:`ToolError` for what the model can fix: a terminal
    that is not running, tmux missing, a pane that failed.
    """

    @property
    def specs(self) -> Mapping[str, TerminalSpec]:
        """The terminals the spec declares, by name."""
        ...

    async def start_directory(self, spec_cwd: str | None, raw: str | None) -> Path:
        """Where a terminal starts: ``raw`` (the call's ``cwd``), else the spec's, else
        the session's working directory (see :func:`start_directory`).

        Raises:
            ToolError: naming the directory and what is wrong with it.
        """
        ...

    async def launch(self, terminal: str, session: str, cwd: Path) -> tuple[TerminalInfo, bool]:
        """Start it in ``cwd``; returns it and whether it was already running."""
        ...

    async def send(self, terminal: str, session: str, text: str, keys: Sequence[str]) -> None: ...

    async def read(self, terminal: str, session: str, scrollback: int) -> Screen: ...

    def running(self) -> list[TerminalInfo]:
        """The running terminals, in launch order."""
        ...

    async def close(self, terminal: str, session: str) -> bool:
        """Close it and wait until it is gone; False if it was not running."""
        ...


def _reports_tool_errors(fn: Callable[_P, Awaitable[str]]) -> Callable[_P, Awaitable[str]]:
    @functools.wraps(fn)
    async def wrapper(*args: _P.args, **kwargs: _P.kwargs) -> str:
        try:
            return await fn(*args, **kwargs)
        except ToolError as exc:
            return exc.render()

    return wrapper


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _session_key(value: Any) -> str | None:
    return string(value) or check_session_key(value)


def _text(value: Any) -> str | None:
    if not isinstance(value, str):
        return string(value)
    if len(value) > MAX_TEXT_CHARS:
        return f"must be at most {MAX_TEXT_CHARS} characters, got {len(value)}"
    if "\x00" in value:
        return "must not contain NUL characters"
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return "is not valid Unicode text (a lone surrogate)"
    return None


def _keys(value: Any) -> str | None:
    if not isinstance(value, str):
        return string(value)
    try:
        parse_keys(value)
    except ValueError as exc:
        return f"has a problem: {exc}"
    return None


def _scrollback(value: Any) -> str | None:
    problem = non_negative_int(value)
    if problem is None and value > HISTORY_LIMIT:
        return f"must be at most {HISTORY_LIMIT}, got {value}"
    return problem


_TARGET = (
    ArgField("terminal", string, required=True),
    ArgField("session", _session_key, required=True),
)
_LAUNCH_ARGS = (*_TARGET, ArgField("cwd", string))
_SEND_ARGS = (*_TARGET, ArgField("text", _text), ArgField("keys", _keys))
_READ_ARGS = (*_TARGET, ArgField("scrollback", _scrollback))


def _target(control: TerminalControl, tool: str, args: Any, fields: Sequence[ArgField]) -> str:
    """Check ``args`` and that the terminal is declared; returns its name."""
    check_args(tool, args, fields)
    name: str = args["terminal"]
    if name not in control.specs:
        declared = ", ".join(sorted(control.specs)) or "none"
        raise ToolError(f"unknown terminal {name!r} (declared in the spec: {declared})")
    return name


def start_directory(root: Path, spec_cwd: str | None, raw: str | None) -> Path:
    """Where a terminal starts: ``raw``, else the spec's ``cwd``, else ``root``.

    Both are relative to the working directory ``root`` (or absolute inside it), and
    must be existing directories inside it. Blocking: call it in a worker thread.

    Raises:
        ToolError: naming the directory and what is wrong with it.
    """
    chosen = raw if raw is not None else spec_cwd
    if chosen is None:
        return resolve_root(root)
    where = "cwd" if raw is not None else "the terminal's cwd in the spec"
    try:
        target = resolve_inside(root, chosen)
    except ToolError as exc:
        raise ToolError(f"{where} {chosen!r} is not usable: {exc.message}") from exc
    if not target.is_dir():
        raise ToolError(f"{where} {chosen!r} is not an existing directory")
    return target


@_reports_tool_errors
async def sys_terminal_launch(control: TerminalControl, args: Mapping[str, Any]) -> str:
    """Start a declared terminal, or report that it already runs (idempotent)."""
    name = _target(control, "sys_terminal_launch", args, _LAUNCH_ARGS)
    cwd = await control.start_directory(control.specs[name].cwd, args.get("cwd"))
    info, already = await control.launch(name, args["session"], cwd)
    return _json(
        {
            "terminal": info.terminal,
            "session": info.session,
            "resource_id": info.resource_id,
            "status": "already_running" if already else "launched",
            "cwd": info.cwd,
        }
    )


@_reports_tool_errors
async def sys_terminal_send(control: TerminalControl, args: Mapping[str, Any]) -> str:
    """Type ``text``, then press ``keys`` (``Enter`` unless given; ``""`` presses none)."""
    name = _target(control, "sys_terminal_send", args, _SEND_ARGS)
    keys = parse_keys(args.get("keys", "Enter"))
    await control.send(name, args["session"], args.get("text", ""), keys)
    return _json({"terminal": name, "session": args["session"], "status": "sent"})


@_reports_tool_errors
async def sys_terminal_read(control: TerminalControl, args: Mapping[str, Any]) -> str:
    """The terminal's screen (and ``scrollback`` lines of history above it)."""
    name = _target(control, "sys_terminal_read", args, _READ_ARGS)
    screen = await control.read(name, args["session"], args.get("scrollback", 0))
    return _json(
        {
            "terminal": name,
            "session": args["session"],
            "screen": screen.text,
            "scrollback_lines": screen.scrollback,
            "truncated": screen.truncated,
        }
    )


@_reports_tool_errors
async def sys_terminal_list(control: TerminalControl, args: Mapping[str, Any]) -> str:
    """Every running terminal of the session."""
    check_args("sys_terminal_list", args, ())
    return _json([info.to_dict() for info in control.running()])


@_reports_tool_errors
async def sys_terminal_close(control: TerminalControl, args: Mapping[str, Any]) -> str:
    """Close a terminal (``not_found`` if it was not running)."""
    name = _target(control, "sys_terminal_close", args, _TARGET)
    closed = await control.close(name, args["session"])
    return _json(
        {
            "terminal": name,
            "session": args["session"],
            "status": "closed" if closed else "not_found",
        }
    )
