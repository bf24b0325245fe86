"""Built-in ``sys_*`` tools, as plain async functions the core binds to a session.

The OS family (``sys_os_read``, ``sys_os_write``, ``sys_os_edit``, ``sys_os_shell``)
acts in an explicit working directory; see ``docs/tools.md`` for the contracts.
"""

from ._paths import workspace_for
from .os import (
    OS_TOOL_SCHEMAS,
    ensure_dir,
    is_mutating,
    sys_os_edit,
    sys_os_read,
    sys_os_shell,
    sys_os_write,
)

__all__ = [
    "OS_TOOL_SCHEMAS",
    "ensure_dir",
    "is_mutating",
    "sys_os_edit",
    "sys_os_read",
    "sys_os_shell",
    "sys_os_write",
    "workspace_for",
]
