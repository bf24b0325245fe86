"""Opening a path *beneath* a directory, with no window between check and use.

Resolving a path and then opening it leaves a race: swap a directory on the way for
a symlink between the two steps and the open follows it out of the workspace (6 of 150
reads and 2 of 150 writes escaped that way). :func:`open_beneath` never opens by path
from the root of the filesystem. It holds a file descriptor for each directory it has
entered, starting at the working directory, and opens one component at a time
relative to the last of them with ``O_NOFOLLOW`` — so what it checks is exactly what
it opens, whatever changes on disk meanwhile:

* ``..`` returns to the directory it came from (the descriptor below it on the
  stack), and never above the working directory: that is an escape.
* A symbolic link is never followed by the kernel. The walk reads it
  (``readlinkat``) from the directory descriptor it holds and continues with its
  target's components, under the same rules — so a link inside the workspace that
  points inside works, and one pointing out is refused wherever it is (on the way, or
  last, dangling or not). An absolute target counts only if it names a place under
  the working directory; at most :data:`MAX_LINKS` links are followed.
* Missing directories are created on the way when asked (``mkdirat``); if something
  else appears there first, it is opened (or followed) by the same rules.

This is what ``openat2(RESOLVE_BENEATH)`` does in the kernel, written with calls every
POSIX system has (``openat``, ``readlinkat``, ``mkdirat`` via ``dir_fd=``).

Refusals name the path the caller gave, never where it led (a resolved target could
show another user's files or the server's pid, as ``/proc/self`` does).

Blocking filesystem calls: run in a worker thread.
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections import deque
from pathlib import Path
from typing import Final, Literal

import attrs

from ._args import ToolError

__all__ = ["MAX_LINKS", "Hidden", "OpenMode", "WorkingDirectory", "open_beneath"]

MAX_LINKS: Final = 40
"""The most symbolic links one path may go through (Linux's own limit)."""

OpenMode = Literal["read", "write", "edit"]
"""How :func:`open_beneath` opens the file."""


class WorkingDirectory(IsADirectoryError):
    """The path names the working directory itself (``.``, ``sub/..``)."""


_DIR_FLAGS: Final = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# O_NONBLOCK: a FIFO must not hang the worker thread before it is refused as not a
# regular file (it changes nothing for regular files).
_FILE_FLAGS: Final = os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
_MODE_FLAGS: Final = {"read": os.O_RDONLY, "write": os.O_WRONLY, "edit": os.O_RDWR}
_NOT_FOLLOWED: Final = (errno.ELOOP, errno.EMLINK, errno.ENOTDIR)


@attrs.frozen
class Hidden:
    """Names a sandbox hides (``.git``, ``.env``…): the walk refuses to enter or open
    one, wherever it meets it — on the path given, or in a link's target.

    Attributes:
        allow: hidden names that stay visible (``cwd_allow_hidden``; ``*``: all).
        keep: paths the sandbox names explicitly (never hidden themselves).
    """

    allow: frozenset[str]
    keep: frozenset[Path] = frozenset()

    def hides(self, name: str, path: Path) -> bool:
        if not name.startswith(".") or name in (".", ".."):
            return False
        return name not in self.allow and "*" not in self.allow and path not in self.keep


def _parts(path: str) -> list[str]:
    return [part for part in path.split("/") if part not in ("", ".")]


def _outside(raw: str, cwd: Path) -> ToolError:
    return ToolError(f"path {raw!r} is outside the working directory {cwd}; use a path inside it")


def _under(parts: list[str], roots: list[list[str]]) -> list[str] | None:
    """``parts`` of an absolute path relative to the first root it lies under."""
    for root in roots:
        if parts[: len(root)] == root:
            return parts[len(root) :]
    return None


class _Walk:
    """One walk from the working directory; owns the descriptors it opens."""

    def __init__(
        self,
        root_fd: int,
        raw: str,
        cwd: Path,
        roots: list[list[str]],
        hidden: Hidden | None = None,
    ) -> None:
        self.stack = [root_fd]
        self.names: list[str] = []  # the directories entered, below the root
        self.raw = raw
        self.cwd = cwd
        self.roots = roots
        self.hidden = hidden
        self.links = 0

    def check(self, name: str) -> None:
        """Refuse a name the sandbox hides."""
        if self.hidden is not None and self.hidden.hides(
            name, self.cwd.joinpath(*self.names, name)
        ):
            raise ToolError(
                f"path {self.raw!r} is hidden by the sandbox (its names starting with '.' "
                "are, except those os_env.sandbox.cwd_allow_hidden lists)"
            )

    def close(self) -> None:
        for fd in self.stack:
            os.close(fd)
        self.stack = []

    def up(self) -> None:
        if len(self.stack) == 1:
            raise _outside(self.raw, self.cwd)
        os.close(self.stack.pop())
        self.names.pop()

    def follow(self, name: str, pending: deque[str]) -> bool:
        """If ``name`` is a symlink in the current directory, queue its target's parts."""
        try:
            target = os.readlink(name, dir_fd=self.stack[-1])
        except OSError:
            return False  # not a link: the caller reports the original error
        self.links += 1
        if self.links > MAX_LINKS:
            raise ToolError(f"path {self.raw!r} goes through too many symbolic links")
        if target.startswith("/"):
            inside = _under(_parts(target), self.roots)
            if inside is None:
                raise _outside(self.raw, self.cwd)
            while len(self.stack) > 1:
                os.close(self.stack.pop())
            self.names.clear()
            pending.extendleft(reversed(inside))
        else:
            pending.extendleft(reversed(_parts(target)))
        return True

    def enter(self, name: str, pending: deque[str], make_parents: bool) -> None:
        """Open the directory ``name`` (creating it if asked), or follow a link there."""
        self.check(name)
        try:
            self.stack.append(os.open(name, _DIR_FLAGS, dir_fd=self.stack[-1]))
            self.names.append(name)
        except FileNotFoundError:
            if not make_parents:
                raise
            # Made meanwhile? Then it is opened (or followed) by the same rules.
            with contextlib.suppress(FileExistsError):
                os.mkdir(name, 0o777, dir_fd=self.stack[-1])
            pending.appendleft(name)
        except OSError as exc:
            if exc.errno not in _NOT_FOLLOWED or not self.follow(name, pending):
                raise

    def open_last(self, name: str, mode: OpenMode, pending: deque[str]) -> tuple[int, bool] | None:
        """Open the last component; ``None`` when it was a link (its target is queued)."""
        self.check(name)
        flags = _FILE_FLAGS | _MODE_FLAGS[mode]
        try:
            return os.open(name, flags, dir_fd=self.stack[-1]), False
        except FileNotFoundError:
            if mode != "write":
                raise
        except OSError as exc:
            if exc.errno in _NOT_FOLLOWED and self.follow(name, pending):
                return None
            raise
        try:
            fd = os.open(name, flags | os.O_CREAT | os.O_EXCL, 0o666, dir_fd=self.stack[-1])
        except FileExistsError:
            pending.appendleft(name)  # made meanwhile (perhaps a link): look again
            return None
        return fd, True


def open_beneath(
    cwd: Path,
    root: Path,
    raw: str,
    mode: OpenMode,
    *,
    make_parents: bool = False,
    hidden: Hidden | None = None,
) -> tuple[int, bool]:
    """Open ``raw`` (relative to ``cwd``, or absolute inside it) without leaving it.

    Args:
        cwd: the working directory as the caller knows it (named in messages).
        root: ``cwd`` fully resolved; the walk starts at it and never leaves it.
        raw: the path the caller gave.
        mode: ``read`` (``O_RDONLY``), ``write`` (``O_WRONLY``, created if missing,
            not truncated: the caller truncates) or ``edit`` (``O_RDWR``, must exist).
        make_parents: create missing directories on the way (inside ``root``).
        hidden: names a sandbox hides, refused wherever the walk meets them.

    Returns:
        The open file descriptor (the caller owns it) and whether it was created.

    Raises:
        ToolError: the path is empty, holds a NUL byte, leads outside the working
            directory or to a hidden name, or loops through links; named by ``raw``.
        WorkingDirectory: the path names the working directory itself.
        IsADirectoryError: the path names another directory (for ``write``).
        OSError: as ``open`` would raise (missing file, not a directory on the way,
            permission). For ``read`` and ``edit`` a directory opens: the caller
            checks what it opened.
    """
    if "\x00" in raw:
        raise ToolError(f"path {raw!r} contains a NUL byte")
    roots = [_parts(str(root))]
    given = os.path.abspath(cwd)
    if _parts(given) != roots[0]:
        roots.append(_parts(given))
    if raw.startswith("/"):
        inside = _under(_parts(raw), roots)
        if inside is None:
            raise _outside(raw, cwd)
        parts = inside
    else:
        parts = _parts(raw)
    pending = deque(parts)
    walk = _Walk(os.open(root, _DIR_FLAGS & ~os.O_NOFOLLOW), raw, cwd, roots, hidden)
    try:
        while pending:
            name = pending.popleft()
            if name == "..":
                walk.up()
            elif pending:
                walk.enter(name, pending, make_parents)
            else:
                opened = walk.open_last(name, mode, pending)
                if opened is not None:
                    return opened
        if len(walk.stack) == 1:
            raise WorkingDirectory(errno.EISDIR, "is the working directory", raw)
        raise IsADirectoryError(errno.EISDIR, "is a directory", raw)
    finally:
        walk.close()
