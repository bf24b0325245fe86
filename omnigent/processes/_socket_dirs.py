"""The process manager's private socket directory, and those crashed runtimes left.

Unix socket paths are limited to ~107 bytes, so a runtime's harness sockets live in a
short private (``0700``) directory in the system temp dir, not under a possibly long
``$OMNIGENT_HOME``. It is made on first use (a runtime that runs no external harness
makes none) and removed when the runtime closes; one killed with ``kill -9`` cannot
remove it. So each directory is recorded in ``$OMNIGENT_HOME/run/sockets`` with the
runtime that owns it (pid and start time), and the next runtime on the same home
removes the directories whose owner is gone (:func:`sweep_socket_dirs`) — only
directories this module makes (named ``omnigent-*`` directly in the temp dir, owned
by this user): a record that names anything else is dropped, and nothing else is
touched.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
from contextlib import suppress
from pathlib import Path

import trio

from .._private import private_dir, private_file
from ._procfs import process_start_time

__all__ = ["SocketDir", "sweep_socket_dirs"]

log = logging.getLogger(__name__)

_PREFIX = "omnigent-"


class SocketDir:
    """A runtime's socket directory: made by :meth:`ensure`, removed by :meth:`aclose`.

    Args:
        home: ``$OMNIGENT_HOME``; the record lives in ``home/run/sockets``.
        owner: the runtime's pid and start time (``process_start_time``).
    """

    def __init__(self, home: Path, owner: tuple[int, int | None]) -> None:
        self._records = home / "run" / "sockets"
        self._owner = owner
        self._lock = trio.Lock()
        self.path: Path | None = None

    async def ensure(self) -> Path:
        """The directory, made (and recorded) the first time."""
        async with self._lock:
            if self.path is None:
                self.path = await trio.to_thread.run_sync(self._make)
            return self.path

    def _make(self) -> Path:
        path = Path(tempfile.mkdtemp(prefix=_PREFIX))  # mkdtemp makes it 0700
        data = {"socket_dir": str(path), "owner_pid": self._owner[0]}
        data["owner_start_time"] = self._owner[1]
        try:
            record = private_file(private_dir(self._records) / f"{path.name}.json")
            record.write_text(json.dumps(data), encoding="utf-8")
        except OSError:
            log.warning("could not record the socket directory %s", path, exc_info=True)
        return path

    async def aclose(self) -> None:
        """Remove the directory and its record, if made.

        Cancellation: shielded; the removal runs in a worker thread.
        """
        path = self.path
        if path is None:
            return
        with trio.CancelScope(shield=True):
            await trio.to_thread.run_sync(_remove, path, self._records / f"{path.name}.json")


def _remove(path: Path, record: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)
    with suppress(OSError):
        record.unlink()


async def sweep_socket_dirs(home: Path) -> int:
    """Remove the recorded directories whose owning runtime is gone; returns how many."""
    return await trio.to_thread.run_sync(_sweep, home / "run" / "sockets")


def _sweep(records: Path) -> int:
    removed = 0
    try:
        entries = sorted(records.glob("*.json"))
    except OSError:
        return 0
    for record in entries:
        try:
            data = json.loads(record.read_text(encoding="utf-8"))
            pid, start, path = data["owner_pid"], data["owner_start_time"], data["socket_dir"]
        except (OSError, ValueError, KeyError, TypeError):
            data = None
        if data is not None and isinstance(pid, int) and process_start_time(pid) == start:
            continue  # its runtime is alive
        if data is not None and isinstance(path, str) and _ours(Path(path)):
            log.info("removing the socket directory %s of a runtime that is gone", path)
            shutil.rmtree(path, ignore_errors=True)
            removed += 1
        with suppress(OSError):
            record.unlink()
    return removed


def _ours(path: Path) -> bool:
    """Whether ``path`` is a directory this module made (and this user owns)."""
    try:
        stat = path.lstat()
    except OSError:
        return False
    return (
        path.parent == Path(tempfile.gettempdir())
        and path.name.startswith(_PREFIX)
        and not path.is_symlink()
        and path.is_dir()
        and stat.st_uid == os.getuid()
    )
