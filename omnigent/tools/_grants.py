"""Where the file tools may act inside a sandbox: the same sets its processes get.

Without a sandbox the file tools open paths beneath the working directory only. With
one (``os_env.sandbox``) they enforce, in-process, what the sandbox enforces on a
shell: beneath the working directory they read and write, but never a hidden name
(``.git``, ``.env``… unless ``cwd_allow_hidden`` lists it); outside it they read what
``read_paths``, ``write_paths`` and ``write_files`` grant, and write only what the
last two grant. An absolute path is matched against the grants as written (``~``
expanded), the most specific first, and then opened beneath that grant by the same
race-free walk (:mod:`._beneath`).

The system itself, readable by a sandboxed shell, is not a file-tool grant: the file
tools read what the agent was given, not ``/etc``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

import attrs

from ._args import ToolError
from ._beneath import Hidden, OpenMode

if TYPE_CHECKING:
    from ..processes.sandbox import SandboxPolicy

__all__ = ["FileGrants", "Located", "locate"]


@attrs.frozen
class FileGrants:
    """A sandbox's grants, as the file tools apply them (None: no sandbox)."""

    hidden: Hidden
    reads: tuple[Path, ...]
    writes: tuple[Path, ...]

    @classmethod
    def of(cls, policy: SandboxPolicy | None) -> FileGrants | None:
        if policy is None:
            return None
        return cls(
            Hidden(policy.allow_hidden, policy.named()),
            tuple(policy.read_paths),
            (*policy.write_paths, *policy.write_files),
        )


@attrs.frozen
class Located:
    """Where to open a path: beneath ``cwd`` (as named in messages), given as ``raw``."""

    cwd: Path
    raw: str


def _depth(path: Path) -> int:
    return len(path.parts)


def locate(cwd: Path, raw: str, mode: OpenMode, grants: FileGrants | None) -> Located:
    """The grant ``raw`` falls under (the working directory unless it is an absolute
    path outside it that a grant covers).

    Raises:
        ToolError: an absolute path under a read-only grant, for a write or an edit.
    """
    if grants is None or not raw.startswith("/"):
        return Located(cwd, raw)
    target = Path(os.path.normpath(raw))
    if target.is_relative_to(cwd) or target.is_relative_to(os.path.realpath(cwd)):
        return Located(cwd, raw)
    writable = mode != "read"
    pool = grants.writes if writable else (*grants.writes, *grants.reads)
    covering = [g for g in pool if target == g or target.is_relative_to(g)]
    if covering:
        grant = max(covering, key=_depth)
        return Located(grant.parent, grant.name) if target == grant else Located(grant, raw)
    if writable and any(target == g or target.is_relative_to(g) for g in grants.reads):
        raise ToolError(
            f"path {raw!r} is read-only in the sandbox (os_env.sandbox.read_paths); write "
            "inside the working directory or a write_paths entry"
        )
    return Located(cwd, raw)
