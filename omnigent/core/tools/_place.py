"""Where a session's OS tools act: :class:`ToolPlace` (the runtime's directories),
:func:`working_directory` (one session's, resolved from its spec and its client), and
:func:`sandbox_policy` (what confines everything the session starts there)."""

from __future__ import annotations

from pathlib import Path

import attrs
import trio

from ...errors import SandboxUnavailable
from ...processes.sandbox import SandboxPolicy, backend_for
from ...spec import AgentSpec, SandboxSpec
from ...tools import os as os_tools
from ...tools import workspace_for

__all__ = ["ToolPlace", "sandbox_policy", "working_directory"]


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

    The directory the session's client chose (``create_session(cwd=...)``), or the one
    the command line chose (the runtime's ``default_cwd``: ``omnigent run``), wins
    over an absolute ``os_env.cwd`` — as in the original omnigent, an absolute spec
    directory is where a session starts when nobody chose one, not an override of
    the workspace it was given; without such a choice it is used as is. A relative
    ``os_env.cwd`` (``.`` included) is relative to the session's own directory if it
    has one, else to the directory the runtime was started in. Without ``os_env.cwd``
    the session works in its own directory, else in the runtime's ``default_cwd``
    if it has one, else in a workspace under ``$OMNIGENT_HOME/workspaces``. A
    session's own directory belongs to its client and is never created here (a
    tool then reports it missing); the others are created.
    """
    os_env = spec.os_env
    base = session_cwd
    if os_env is not None and os_env.cwd:
        target = Path(os_env.cwd)
        if target.is_absolute():
            target = base or place.default_cwd or target
        else:
            target = (base or place.workspace) / target
    else:
        target = base or place.default_cwd or workspace_for(place.home, session_id)
    if target != base:
        await os_tools.ensure_dir(target)
    return await trio.to_thread.run_sync(target.resolve)


def sandbox_policy(
    spec: AgentSpec, cwd: Path, place: ToolPlace, *, inherited: SandboxSpec | None = None
) -> SandboxPolicy | None:
    """The sandbox of a session of ``spec`` working in ``cwd`` (None: ``type: none``).

    A spec without a sandbox of its own gets ``inherited`` (its nearest sandboxed
    ancestor session's), resolved for its own working directory. Beside the user's
    home, ``$OMNIGENT_HOME`` is hidden whole: the database, the provider keys and
    every other session's workspace live there.

    Raises:
        SandboxUnavailable: ``type: auto`` on a platform with no sandbox.
    """
    os_env = spec.os_env
    if os_env is not None and os_env.sandbox.confined:
        block = os_env.sandbox
    elif inherited is not None and inherited.confined:
        block = inherited
    else:
        return None
    backend = backend_for(block.type)
    if backend is None:
        raise SandboxUnavailable(
            "os_env.sandbox.type auto: this platform has no sandbox omnigent can use "
            "(linux_bwrap on Linux, darwin_seatbelt on macOS); nothing was run"
        )
    return SandboxPolicy.resolve(
        backend,
        cwd,
        read_paths=block.read_paths,
        write_paths=block.write_paths,
        write_files=block.write_files,
        allow_network=block.allow_network,
        egress_rules=block.egress_rules,
        allow_private=block.egress_allow_private_destinations,
        allow_hidden=block.cwd_allow_hidden,
        hidden_scan_max=block.cwd_hidden_scan_max_entries,
        hidden_overflow=block.cwd_hidden_scan_overflow,
        env_passthrough=block.env_passthrough,
        hide=(place.home,),
    )
