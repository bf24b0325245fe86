"""Files and directories only the user omnigent runs as may read.

``$OMNIGENT_HOME`` holds the database (every user's sessions, the specs with their
keys), the per-session workspaces and the records of running processes. Created with
the process's umask (usually ``022``) they were world-readable: another local user read
an ``api_key`` from ``omnigent.db`` and a file from a workspace. So whatever omnigent
creates for itself is made private whatever the umask:

* :func:`private_dir` creates each missing directory of a path ``0700``;
* :func:`private_file` creates a missing file ``0600`` (SQLite then gives its ``-wal``
  and ``-shm`` files the database's mode);
* :func:`too_wide` says which existing ones are wider (group or others have any
  access), for the warning ``serve`` and ``stdio`` print at start — an existing file's
  mode is the user's to change, not ours.

Blocking (filesystem calls): async callers use ``trio.to_thread.run_sync``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import stat
from collections.abc import Iterable
from pathlib import Path
from typing import Final

__all__ = [
    "PRIVATE_DIR",
    "PRIVATE_FILE",
    "private_dir",
    "private_file",
    "too_wide",
    "warn_if_shared",
]

log = logging.getLogger("omnigent")

PRIVATE_DIR: Final = 0o700
PRIVATE_FILE: Final = 0o600


def private_dir(path: str | os.PathLike[str]) -> Path:
    """Create ``path`` and its missing parents, each new one ``0700``; return it.

    Directories that exist are left as they are (see :func:`too_wide`).
    """
    folder = Path(path)
    missing: list[Path] = []
    current = folder
    while not current.exists():
        missing.append(current)
        if current.parent == current:
            break
        current = current.parent
    for directory in reversed(missing):
        with contextlib.suppress(FileExistsError):  # made meanwhile: theirs to keep
            os.mkdir(directory, PRIVATE_DIR)
            os.chmod(directory, PRIVATE_DIR)  # the umask may have taken bits away, never added
    return folder


def private_file(path: str | os.PathLike[str]) -> Path:
    """Create ``path`` empty and ``0600`` if it does not exist (its directory must)."""
    with contextlib.suppress(FileExistsError):
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_FILE)
        os.close(fd)
    return Path(path)


def too_wide(paths: Iterable[str | os.PathLike[str]]) -> list[tuple[Path, int]]:
    """The existing ``paths`` that group or others may access, with their modes."""
    wide = []
    for raw in paths:
        path = Path(raw)
        try:
            mode = stat.S_IMODE(path.stat().st_mode)
        except OSError:
            continue
        if mode & 0o077:
            wide.append((path, mode))
    return wide


def warn_if_shared(home: Path, db_url: str) -> int:
    """Log a warning for each of omnigent's own files other users may read.

    Checks ``home``, its ``workspaces`` folder and, for ``sqlite:///PATH``, the
    database file and its ``-wal``/``-shm`` files. Returns how many were too wide.
    """
    paths = [home, home / "workspaces"]
    if db_url.startswith("sqlite:///"):
        db = Path(db_url.removeprefix("sqlite:///")).expanduser()
        paths += [db, db.with_name(db.name + "-wal"), db.with_name(db.name + "-shm")]
    wide = too_wide(paths)
    for path, mode in wide:
        want = PRIVATE_DIR if path.is_dir() else PRIVATE_FILE
        log.warning(
            "%s is readable by other users (mode %03o); it holds sessions, specs and their "
            "keys: chmod %03o %s",
            path,
            mode,
            want,
            path,
        )
    return len(wide)
