"""Built-in ``sys_*`` tools, as plain async functions the core binds to a session.

The OS family (``sys_os_read``, ``sys_os_write``, ``sys_os_edit``, ``sys_os_shell``)
acts in an explicit working directory; see ``docs/tools.md`` for the contracts. The
terminal family (``sys_terminal_launch``, ``_send``, ``_read``, ``_list``, ``_close``)
acts on a session's live terminals, tmux panes on a private server; see
:mod:`omnigent.tools.terminals` and ``docs/terminals.md``.
"""

from ._args import ArgField, ToolError, check_args, non_empty_string, string
from ._beneath import open_beneath
from ._paths import resolve_inside, resolve_root, sanitise_session_id, workspace_for
from .os import (
    OS_TOOL_SCHEMAS,
    ensure_dir,
    is_mutating,
    sys_os_edit,
    sys_os_read,
    sys_os_shell,
    sys_os_write,
)
from .terminals import (
    TERMINAL_TOOL_SCHEMAS,
    sys_terminal_close,
    sys_terminal_launch,
    sys_terminal_list,
    sys_terminal_read,
    sys_terminal_send,
)

__all__ = [
    "OS_TOOL_SCHEMAS",
    "TERMINAL_TOOL_SCHEMAS",
    "ArgField",
    "ToolError",
    "check_args",
    "ensure_dir",
    "is_mutating",
    "non_empty_string",
    "open_beneath",
    "resolve_inside",
    "resolve_root",
    "sanitise_session_id",
    "string",
    "sys_os_edit",
    "sys_os_read",
    "sys_os_shell",
    "sys_os_write",
    "sys_terminal_close",
    "sys_terminal_launch",
    "sys_terminal_list",
    "sys_terminal_read",
    "sys_terminal_send",
    "workspace_for",
]
