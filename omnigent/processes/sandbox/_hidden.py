"""Finding the hidden entries (``.git``, ``.env``, …) a sandbox masks under its roots.

A hidden entry is one whose name starts with ``.``. Under every root the sandbox
exposes (the workspace, ``write_paths``, ``read_paths``) each one is masked — an empty
read-only directory, an empty file — unless its name is in ``cwd_allow_hidden`` (or
that list holds ``*``), so granting a broad directory does not grant the credentials
kept in it. The walk is breadth first, does not follow symbolic links (what a link
shows is governed by where it leads, which has its own mounts), and does not descend
into what it masks. Directories named in :data:`DEFERRED` (``node_modules``: many
entries, many package dotfiles, seldom a secret) are walked last, so a capped scan
spends its budget on the rest of the tree first. It visits at most ``max_entries``
entries; past that, ``overflow`` decides: ``error`` refuses to run, ``warn`` masks
what was found and logs, ``unlimited`` has no cap.

Blocking (``os.scandir``): run it in a worker thread.
"""

from __future__ import annotations

import collections
import enum
import logging
import os
from collections.abc import Iterable
from pathlib import Path

import attrs

__all__ = ["DEFERRED", "HiddenEntries", "HiddenScanOverflow", "Overflow", "scan_hidden"]

DEFERRED = frozenset({"node_modules"})

log = logging.getLogger(__name__)


class Overflow(enum.Enum):
    """What a hidden-entry scan does past its entry cap (``cwd_hidden_scan_overflow``)."""

    ERROR = "error"
    WARN = "warn"
    UNLIMITED = "unlimited"


class HiddenScanOverflow(Exception):
    """The scan met more entries than its cap with ``overflow: error``."""

    def __init__(self, root: Path, cap: int) -> None:
        super().__init__(
            f"the hidden-file scan of {root} passed {cap} entries "
            "(os_env.sandbox.cwd_hidden_scan_max_entries); raise the limit, or set "
            "cwd_hidden_scan_overflow to 'warn' or 'unlimited'"
        )
        self.root = root
        self.cap = cap


@attrs.frozen
class HiddenEntries:
    """What to mask: hidden directories and hidden non-directories, by absolute path."""

    dirs: tuple[Path, ...] = ()
    files: tuple[Path, ...] = ()
    truncated: bool = False


def _hidden(name: str, allow: frozenset[str]) -> bool:
    return name.startswith(".") and name not in allow and "*" not in allow


def scan_hidden(
    roots: Iterable[Path],
    *,
    allow: frozenset[str],
    max_entries: int,
    overflow: Overflow,
    keep: frozenset[Path] = frozenset(),
) -> HiddenEntries:
    """Every hidden entry under ``roots`` (each a directory; missing ones skipped).

    Args:
        roots: the directories the sandbox exposes.
        allow: names that stay visible (``cwd_allow_hidden``).
        max_entries: the cap on entries visited, over all roots.
        overflow: what to do past the cap.
        keep: paths named explicitly elsewhere (a ``read_paths`` entry such as
            ``~/.databrickscfg``): never masked themselves.

    Raises:
        HiddenScanOverflow: past the cap with ``Overflow.ERROR``.
    """
    dirs: list[Path] = []
    files: list[Path] = []
    seen: set[tuple[int, int]] = set()
    visited = 0
    capped = overflow is not Overflow.UNLIMITED
    later: collections.deque[Path] = collections.deque()
    for root in roots:
        queue = collections.deque([root])
        while queue or later:
            folder = queue.popleft() if queue else later.popleft()
            try:
                info = folder.stat()
                if (info.st_dev, info.st_ino) in seen:
                    continue
                seen.add((info.st_dev, info.st_ino))
                entries = list(os.scandir(folder))
            except (FileNotFoundError, NotADirectoryError, PermissionError):
                continue  # gone, not a folder, or unreadable: the sandbox sees no more
            for entry in entries:
                visited += 1
                if capped and visited > max_entries:
                    if overflow is Overflow.ERROR:
                        raise HiddenScanOverflow(root, max_entries)
                    log.warning(
                        "sandbox: the hidden-file scan of %s stopped at %d entries; "
                        "hidden files past it stay visible",
                        root,
                        max_entries,
                    )
                    return HiddenEntries(tuple(dirs), tuple(files), truncated=True)
                path = Path(entry.path)
                try:
                    is_dir = entry.is_dir(follow_symlinks=False)
                    is_link = entry.is_symlink()
                except OSError:
                    continue
                if is_link:
                    continue
                if _hidden(entry.name, allow) and path not in keep:
                    (dirs if is_dir else files).append(path)
                elif is_dir:
                    (later if entry.name in DEFERRED else queue).append(path)
    return HiddenEntries(tuple(dirs), tuple(files))
