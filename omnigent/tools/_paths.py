"""Containment of paths in a working directory, and per-session workspaces.

:func:`resolve_inside` resolves a path — symlinks included — and requires the result
inside the resolved working directory. It is for callers that *name* a directory to
something that is not contained anyway (a terminal's start directory: the shell can go
anywhere). The file tools do not use it: resolving, then opening, leaves a window in
which a swapped symlink leads out; they open beneath the directory instead
(:mod:`._beneath`).

Refusals name the path as given and the working directory as configured, never the
resolved target (it could show another user's files, or a pid through ``/proc/self``).

Error handling: failures are :class:`~._args.ToolError` with a message for the model.
The functions here do blocking filesystem calls; callers run them in a worker thread.
"""

from __future__ import annotations

import re
from pathlib import Path

from ._args import ToolError

__all__ = ["resolve_inside", "resolve_root", "sanitise_session_id", "workspace_for"]

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


def resolve_root(cwd: Path) -> Path:
    """The working directory, fully resolved; it must exist and be a directory.

    Raises:
        ToolError: the working directory is missing or not a directory.
    """
    try:
        root = cwd.resolve(strict=True)
    except (OSError, RuntimeError) as exc:
        raise ToolError(f"the working directory {cwd} is not available ({exc})") from exc
    if not root.is_dir():
        raise ToolError(f"the working directory {cwd} is not a directory")
    return root


def resolve_inside(cwd: Path, raw: str) -> Path:
    """Resolve ``raw`` (relative to ``cwd``, or absolute) to a path inside ``cwd``.

    The target need not exist; the nearest existing ancestor and any symlinks on the
    way are resolved all the same.

    Raises:
        ToolError: the path is empty or malformed, loops through symlinks, or resolves
            outside the working directory.
    """
    root = resolve_root(cwd)
    if "\x00" in raw:
        raise ToolError(f"path {raw!r} contains a NUL byte")
    candidate = Path(raw)
    if not candidate.is_absolute():
        candidate = root / candidate
    try:
        target = candidate.resolve()
    except RuntimeError as exc:  # a symlink loop, up to Python 3.12
        raise ToolError(f"cannot resolve path {raw!r}: it loops through symbolic links") from exc
    except OSError as exc:  # the message only: its file name may be the resolved target
        raise ToolError(f"cannot resolve path {raw!r}: {exc.strerror or 'error'}") from exc
    if not target.is_relative_to(root):
        raise ToolError(
            f"path {raw!r} is outside the working directory {cwd}; use a path inside it"
        )
    return target


def sanitise_session_id(session_id: str) -> str:
    """``session_id`` as one safe path component: ``[A-Za-z0-9._-]``, never ``.``/``..``."""
    safe = _UNSAFE.sub("_", session_id)
    # "." and ".." are made of allowed characters but would not be a directory of
    # their own; an empty id would collapse the level entirely.
    if not safe.strip("."):
        safe = "_" * max(len(safe), 1)
    return safe


def workspace_for(home: Path, session_id: str) -> Path:
    """The per-session workspace: ``home/workspaces/<sanitised id>/workspace``.

    Pure: nothing is created (see :func:`omnigent.tools.ensure_dir`).
    """
    return home / "workspaces" / sanitise_session_id(session_id) / "workspace"
