"""Where a session's OS tools act: :class:`ToolPlace` (the runtime's directories),
:func:`working_directory` (one session's, resolved from its spec and its client), and
:func:`sandbox_policy` (what confines everything the session starts there)."""

from __future__ import annotations

import functools
import logging
import os
import shutil
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

import attrs
import trio

from ...spec import AgentSpec, OsEnv, SandboxSpec
from ...tools import ToolError, workspace_for
from ...tools import os as os_tools

if TYPE_CHECKING:
    from ...processes.sandbox import SandboxPolicy

__all__ = [
    "ToolPlace",
    "directory_problem",
    "effective_sandbox",
    "in_session_workspaces",
    "purge_workspaces",
    "sandbox_policy",
    "spec_for_runner",
    "working_directory",
]

log = logging.getLogger(__name__)


@attrs.frozen
class ToolPlace:
    """Where a session's OS tools act: the runtime's start directory and home.

    ``default_cwd``, when set, is where the OS tools of an agent whose spec names no
    ``os_env.cwd`` act, instead of a per-session workspace (``omnigent run``: the
    directory it was run in). ``purge_workspaces``: deleting a session deletes its
    per-session workspace too (``serve --purge-workspaces``; off by default).

    ``roots`` fences the directories clients name for their sessions (ACP's ``cwd``):
    each must be inside one of them, and neither inside nor around ``home`` (which
    holds the database and every session's workspace). ``None``: no fence — the
    library's and ``omnigent stdio``'s caller is the operator. ``serve`` sets its
    workspace, or its ``--workspace-root`` directories (:func:`directory_problem`).
    """

    workspace: Path
    home: Path
    default_cwd: Path | None = None
    purge_workspaces: bool = False
    roots: tuple[Path, ...] | None = None


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def directory_problem(
    place: ToolPlace, directory: str | Path, *, own_workspaces: bool = False
) -> str | None:
    """Why a client may not name ``directory`` for a session (``None``: it may).

    Judged on the real path (symbolic links resolved, as far as it exists), against
    the real paths of the roots and of the home. ``own_workspaces``: a per-session
    workspace (``home/workspaces/…``) passes too — where a sub-agent works when its
    parent does (omnigent named it, not a client). Blocking (it resolves paths): run
    it in a worker thread.
    """
    if place.roots is None:
        return None
    try:
        real = os.path.realpath(directory, strict=False)
    except (OSError, RuntimeError) as exc:  # a /proc link to a process not ours, a loop
        return f"{directory} cannot be resolved ({type(exc).__name__}); name a project directory"
    if own_workspaces and in_session_workspaces(place, real):
        return None
    roots = [os.path.realpath(root) for root in place.roots]
    if not any(_under(real, root) for root in roots):
        shown = ", ".join(str(root) for root in place.roots) or "none"
        return (
            f"{directory} is outside the server's workspace ({shown}); the operator can "
            "add a tree with `serve --workspace-root DIR`"
        )
    home = os.path.realpath(place.home)
    if _under(real, home) or _under(home, real):
        return (
            f"{directory} is or holds omnigent's own directory ($OMNIGENT_HOME: the "
            "database and every session's workspace); name a project directory"
        )
    return None


def in_session_workspaces(place: ToolPlace, directory: str | Path) -> bool:
    """Whether ``directory`` is (inside) a per-session workspace,
    ``home/workspaces/…``, judged on real paths: a directory omnigent made for one
    session's tree, never one a client may name. Blocking: run it in a worker thread.
    """
    try:
        real = os.path.realpath(directory, strict=False)
    except (OSError, RuntimeError):
        return False
    return _under(real, os.path.realpath(place.home / "workspaces"))


async def purge_workspaces(home: Path, session_ids: Iterable[str]) -> int:
    """Delete the per-session workspaces of ``session_ids`` (``home/workspaces/<id>``).

    Only those: a session's own directory (ACP's ``cwd``) or an ``os_env.cwd`` is its
    client's or the operator's, never removed. Symbolic links inside are removed, not
    followed. A folder that cannot be removed is logged and left. Returns how many were
    removed.

    Cancellation: each removal runs in a worker thread and finishes once begun.
    """
    removed = 0
    for session_id in session_ids:
        folder = workspace_for(home, session_id).parent
        try:
            await trio.to_thread.run_sync(shutil.rmtree, folder)
        except FileNotFoundError:
            continue
        except OSError:
            log.warning("could not remove the workspace %s", folder, exc_info=True)
            continue
        removed += 1
    return removed


def _resolved(path: Path) -> Path:
    """``path`` with its links resolved as far as it exists (as it is left on error)."""
    try:
        return path.resolve()
    except (OSError, RuntimeError):
        return path


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

    Raises:
        ToolError: the session's own directory is outside ``place.roots`` now.
    """
    os_env = spec.os_env
    base = session_cwd
    if base is not None:
        # Checked again now that it is used, on the very path the tools get: it may
        # have changed since the session was made (a directory swapped for a link).
        base = await trio.to_thread.run_sync(_resolved, base)
        problem = await trio.to_thread.run_sync(
            functools.partial(directory_problem, place, base, own_workspaces=True)
        )
        if problem is not None:
            raise ToolError(f"the working directory is refused: {problem}")
    if os_env is not None and os_env.cwd:
        target = Path(os_env.cwd)
        if target.is_absolute():
            target = base or place.default_cwd or target
        else:
            target = (base or place.workspace) / target
    else:
        target = base or place.default_cwd or workspace_for(place.home, session_id)
    if target != base:
        # A per-session workspace lives in $OMNIGENT_HOME: private, as the home is.
        await os_tools.ensure_dir(target, private=target.is_relative_to(place.home))
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
    block = effective_sandbox(spec, inherited)
    if block is None:
        return None
    from ...processes.sandbox import block_policy  # with the first sandboxed session

    return block_policy(block, cwd, hide=(place.home,))


def effective_sandbox(spec: AgentSpec, inherited: SandboxSpec | None) -> SandboxSpec | None:
    """The sandbox block a session of ``spec`` runs in: its own, else ``inherited`` (its
    nearest sandboxed ancestor's); None if neither confines anything."""
    os_env = spec.os_env
    if os_env is not None and os_env.sandbox.confined:
        return os_env.sandbox
    if inherited is not None and inherited.confined:
        return inherited
    return None


def spec_for_runner(spec: AgentSpec, inherited: SandboxSpec | None) -> AgentSpec:
    """``spec`` as a runner is given it: with the sandbox the session runs in (an
    ancestor's, when it has none of its own), so the runner confines what it starts
    for the session as this server would (``docs/runners.md``)."""
    block = effective_sandbox(spec, inherited)
    if block is None or (spec.os_env is not None and spec.os_env.sandbox is block):
        return spec
    os_env = spec.os_env if spec.os_env is not None else OsEnv()
    return attrs.evolve(spec, os_env=attrs.evolve(os_env, sandbox=block))
