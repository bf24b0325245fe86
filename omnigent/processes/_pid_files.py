"""Pid files: a record of every harness process, so the next start can end what a
crashed runtime left (``kill -9`` runs no ``finally``).

Each spawn writes ``<pid_dir>/<pid>.json`` with the process's pid and start time and
its runtime's own (pid, start time); it is removed when the process is gone. At start
:meth:`PidFiles.sweep` ends the groups of files whose runtime is dead, but only while
the pid is still the recorded process (same start time): a recycled pid is never
signalled.
"""

from __future__ import annotations

import json
import logging
import os
import signal
from collections.abc import Sequence
from contextlib import suppress
from pathlib import Path

import trio

from .._private import private_dir, private_file
from ._procfs import process_start_time

__all__ = ["PidFiles", "killpg"]

log = logging.getLogger("omnigent.processes")


class PidFiles:
    """The pid files of one runtime's process manager, in ``directory``."""

    def __init__(self, directory: Path, owner: tuple[int, int | None]) -> None:
        self.directory = directory
        self._owner = owner

    def write(self, pid: int, argv: Sequence[str], key: str | None) -> Path | None:
        """Record a spawned process (blocking); the file's path, or None if it could not
        be written (logged: the process runs, unswept after a crash)."""
        record = {
            "pid": pid,
            "start_time": process_start_time(pid),
            "argv": list(argv),
            "key": key,
            "owner_pid": self._owner[0],
            "owner_start_time": self._owner[1],
        }
        path = self.directory / f"{pid}.json"
        try:
            private_dir(self.directory)
            private_file(path).write_text(json.dumps(record), encoding="utf-8")
        except OSError:
            log.warning("could not write the pid file %s", path, exc_info=True)
            return None
        return path

    async def sweep(self, grace: float) -> int:
        """Signal what a crashed runtime left: returns how many groups were signalled.

        For each pid file in ``directory`` whose owning runtime is gone: if its pid is
        still the same process (same start time), SIGTERM its group, SIGKILL after
        the grace; then remove the file. Files of a live runtime are left alone.
        """
        swept = 0
        paths = await trio.to_thread.run_sync(lambda: sorted(self.directory.glob("*.json")))
        for path in paths:
            record = _read_record(path)
            if record is None:
                path.unlink(missing_ok=True)
                continue
            owner_pid, owner_start = record.get("owner_pid"), record.get("owner_start_time")
            if (
                isinstance(owner_pid, int)
                and owner_start is not None
                and process_start_time(owner_pid) == owner_start
            ):
                continue  # its runtime is alive: not an orphan
            pid, start = record.get("pid"), record.get("start_time")
            if isinstance(pid, int) and start is not None and process_start_time(pid) == start:
                log.warning("ending orphaned process group %s (%s)", pid, record.get("argv"))
                await _end_orphan(pid, start, grace)
                swept += 1
            path.unlink(missing_ok=True)
        return swept


def _read_record(path: Path) -> dict[str, object] | None:
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


async def _end_orphan(pid: int, start: object, grace: float) -> None:
    """SIGTERM the group led by ``pid``; SIGKILL it if the leader outlives ``grace``.

    The leader is not our child, so its exit is watched through a pidfd (opened after
    the start time matched: it pins that very process, whatever happens to the pid).
    """
    try:
        pidfd = os.pidfd_open(pid)
    except OSError:
        return  # gone already
    try:
        if process_start_time(pid) != start:
            return  # the pid was recycled between the check and the open
        killpg(pid, signal.SIGTERM)
        with trio.move_on_after(grace):
            await trio.lowlevel.wait_readable(pidfd)
            return
        killpg(pid, signal.SIGKILL)
    finally:
        os.close(pidfd)


def killpg(pgid: int, signum: int) -> None:
    """Signal a process group that may be gone already (or not ours to signal)."""
    with suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signum)
