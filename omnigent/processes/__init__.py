"""Child processes: reading ``/proc``, process groups, pid files, socket directories, tmux.

Everything omnigent knows about the operating system's processes lives here, below the
core: running a command in its own process group and killing the whole group
(:func:`run_in_group`), the harness process manager that owns long-lived child processes
(:func:`open_process_manager`), the pid files and socket directories that let the next
start end what a ``kill -9`` left behind, the runtime's private tmux server for
terminals, and the process trees that hold everything a command starts, whatever
process group it moves to (:func:`open_process_trees`: a cgroup v2 per session and
command where the machine allows, a subreaper wrapper elsewhere).
:mod:`omnigent.processes.sandbox` is the OS sandbox every process a session starts
runs in (``os_env.sandbox``). It imports nothing from the core, the transports or the
harnesses.
"""

from ._group_files import GroupFiles
from ._groups import TrackedGroups, boot_id, kill_orphaned_group, process_start_time, run_in_group
from ._manager import (
    DEFAULT_GRACE,
    DEFAULT_IDLE_TIMEOUT,
    ManagedProcess,
    ProcessManager,
    ProcessSpec,
    base_environment,
    open_process_manager,
)
from ._tmux import (
    HISTORY_LIMIT,
    MAX_KEYS,
    MAX_TEXT_CHARS,
    IdleDetector,
    NewPane,
    capture_argv,
    check_session_key,
    parse_keys,
    resource_id,
    screen_digest,
    send_keys_argv,
    send_text_argv,
    trim_screen,
)
from ._tmux_server import TmuxFailed, TmuxServer, TmuxUnavailable, default_base, open_tmux_server
from ._trees import CommandTree, ProcessTrees, SessionTrees, TreeMode, open_process_trees

__all__ = [
    "DEFAULT_GRACE",
    "DEFAULT_IDLE_TIMEOUT",
    "HISTORY_LIMIT",
    "MAX_KEYS",
    "MAX_TEXT_CHARS",
    "CommandTree",
    "GroupFiles",
    "IdleDetector",
    "ManagedProcess",
    "NewPane",
    "ProcessManager",
    "ProcessSpec",
    "ProcessTrees",
    "SessionTrees",
    "TmuxFailed",
    "TmuxServer",
    "TmuxUnavailable",
    "TrackedGroups",
    "TreeMode",
    "base_environment",
    "boot_id",
    "capture_argv",
    "check_session_key",
    "default_base",
    "kill_orphaned_group",
    "open_process_manager",
    "open_process_trees",
    "open_tmux_server",
    "parse_keys",
    "process_start_time",
    "resource_id",
    "run_in_group",
    "screen_digest",
    "send_keys_argv",
    "send_text_argv",
    "trim_screen",
]
