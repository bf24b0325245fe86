"""Where a session's OS tools act: :class:`ToolPlace` (the runtime's directories) and
:func:`working_directory` (one session's, resolved from its spec and its client)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import attrs
import trio

from ...spec import AgentSpec
from ...tools import os as os_tools
from ...tools import workspace_for

if TYPE_CHECKING:
    pass

__all__ = ["ToolPlace", "working_directory"]


@attrs.frozen
class ToolPlace:
    """Where a session's OS tools act: the runtime's start directory and home.

    ``default_cwd``, when set, is where the OS tools of an agent whose spec names no
    ``os_env.cwd`` act, instead of a per-session workspace (``omnigent run``: the
    directory it was run in).
    """

    workspace: Path
    home: Path
    default_cwd: Path | None = None


async def working_directory(
    spec: AgentSpec, session_cwd: Path | None, place: ToolPlace, session_id: str
) -> Path:
    """Where a session's OS tools act (and the MCP servers it starts run), resolved.

    An absolute ``os_env.cwd`` is used as is; a relative one (``.`` included) is
    relative to the session's own directory (``create_session(cwd=...)``) if it has
    one, else to the directory the runtime was started in. Without ``os_env.cwd``
    the session works in its own directory, else in the runtime's ``default_cwd``
    if it has one, else in a workspace under ``$OMNIGENT_HOME/workspaces``. A
    session's own directory belongs to its client and is never created here (a
    tool then reports it missing); the others are created.
    """
    os_env = spec.os_env
    base = session_cwd
    if os_env is not None and os_env.cwd:
        target = Path(os_env.cwd)
        if not target.is_absolute():
            target = (base or place.workspace) / target
    else:
        target = base or place.default_cwd or workspace_for(place.home, session_id)
    if target != base:
        await os_tools.ensure_dir(target)
    return await trio.to_thread.run_sync(target.resolve)
