"""The safe defaults: what a person is asked about when no policy has an opinion.

``omnigent run`` (and a server that opts in: ``serve --ask-by-default``,
``open_runtime(safe_defaults=True)``) asks before the agent runs a command or writes
outside its working directory — the way Claude Code and Codex ask — unless a policy
of the agent (or of the operator) already decided: an ``allow_tools`` for
``sys_os_shell`` runs shells unasked, a ``deny_tools`` refuses them, and
``omnigent run --yes`` answers every question yes.

They are policies like any other, consulted last and only at ``PHASE_TOOL_CALL``
when every other policy answered UNSPECIFIED; an ASK names the policy it comes from:

* ``ask_before_commands`` — a command: ``sys_os_shell``, text typed into a terminal
  (``sys_terminal_send``), a native agent's shell (Claude Code's ``Bash``, Codex's
  ``exec_command``);
* ``ask_before_writes_outside_workspace`` — a file written outside the working
  directory the call names in its context (``sys_os_write``/``sys_os_edit`` with a
  path a sandbox's ``write_paths`` grants, Claude Code's ``Write``, ``Edit``,
  ``MultiEdit`` and ``NotebookEdit``, Codex's ``apply_patch``).

Pure: no I/O, no clock.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from typing import Any, Final

from ._policies import PHASE_TOOL_CALL, PolicyEvent, Verdict

__all__ = ["ASK_COMMANDS", "ASK_WRITES", "safe_default"]

ASK_COMMANDS: Final = "ask_before_commands"
ASK_WRITES: Final = "ask_before_writes_outside_workspace"

_COMMANDS: Final = {
    "sys_os_shell": "command",
    "sys_terminal_send": "text",
    "Bash": "command",
    "exec_command": "command",
}
_WRITE_KEYS: Final = {
    "sys_os_write": "path",
    "sys_os_edit": "path",
    "Write": "file_path",
    "Edit": "file_path",
    "MultiEdit": "file_path",
    "NotebookEdit": "notebook_path",
}
_SHOWN = 200


def _shown(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _SHOWN else text[: _SHOWN - 1] + "…"


def _written(name: str, arguments: Mapping[str, Any]) -> Iterator[str]:
    """The paths a call writes, as it names them."""
    if name in _WRITE_KEYS:
        path = arguments.get(_WRITE_KEYS[name])
        if isinstance(path, str) and path:
            yield path
    elif name == "apply_patch":
        changes = arguments.get("changes")
        for change in changes if isinstance(changes, list) else ():
            path = change.get("path") if isinstance(change, Mapping) else None
            if isinstance(path, str) and path:
                yield path


def _outside(path: str, cwd: str) -> bool:
    target = os.path.normpath(os.path.join(cwd, path))
    return os.path.commonpath([target, os.path.normpath(cwd)]) != os.path.normpath(cwd)


def safe_default(event: PolicyEvent) -> Verdict | None:
    """The safe defaults' ASK for ``event``, or None when they have no opinion.

    A write is judged against ``event.context["cwd"]``; without one (a caller that
    does not say where it works) a write is not asked about.
    """
    if event.type != PHASE_TOOL_CALL:
        return None
    name = event.tool_name
    arguments = event.tool_input
    if name in _COMMANDS:
        what = arguments.get(_COMMANDS[name]) or arguments.get("keys") or ""
        shown = f": {_shown(what)}" if isinstance(what, str) and what else ""
        return Verdict("ASK", ASK_COMMANDS, f"run a command{shown}?")
    cwd = (event.context or {}).get("cwd")
    if not isinstance(cwd, str) or not cwd:
        return None
    for path in _written(name, arguments):
        if _outside(path, cwd):
            return Verdict("ASK", ASK_WRITES, f"write {_shown(path)}, outside {cwd}?")
    return None
