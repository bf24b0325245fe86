"""Process groups recorded in files, for a process with no store: :class:`GroupFiles`.

A server records the groups its shells start in its store (``process_groups``), so the
next start kills what a ``kill -9`` left. A runner has no store: it records each group
as a file ``<dir>/<pgid>-<start>.json`` naming the group's leader (pid, start time,
boot) and the runner that started it, deleted when the group is gone. At start
:meth:`GroupFiles.sweep` kills the groups of files whose runner is dead — each only
while its leader is the very process recorded (:func:`~._groups.kill_orphaned_group`),
so a recycled pid is never signalled — and removes the files. Files of a live runner
are left alone.

Recording is best effort: a file that cannot be written is logged, and the command
runs on.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import trio

from ._groups import kill_orphaned_group
from ._procfs import boot_id, process_start_time

__all__ = ["GroupFiles"]

log = logging.getLogger("omnigent.processes")


class GroupFiles:
    """The process groups one process has running, as files in ``directory``.

    Implements :class:`~._groups.TrackedGroups`.
    """

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._owner = (os.getpid(), process_start_time(os.getpid()))
        self._started: dict[int, Path] = {}

    async def started(self, pgid: int) -> None:
        start = await trio.to_thread.run_sync(process_start_time, pgid)
        if start is None:
            return  # already gone (and reaped): nothing can outlive us
        record = {
            "pgid": pgid,
            "start_time": start,
            "boot_id": boot_id(),
            "owner_pid": self._owner[0],
            "owner_start_time": self._owner[1],
        }
        path = self.directory / f"{pgid}-{start}.json"

        def write() -> None:
            self.directory.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(record), encoding="utf-8")

        try:
            await trio.to_thread.run_sync(write)
        except OSError:
            log.warning("could not record process group %d in %s", pgid, path, exc_info=True)
            return
        self._started[pgid] = path

    async def ended(self, pgid: int) -> None:
        path = self._started.pop(pgid, None)
        if path is not None:
            await trio.to_thread.run_sync(lambda: path.unlink(missing_ok=True))

    async def sweep(self, grace: float) -> int:
        """Kill the groups a dead owner recorded; returns how many were signalled.

        Cancellation: each kill is shielded (as :func:`~._groups.kill_group`).
        """
        paths = await trio.to_thread.run_sync(lambda: sorted(self.directory.glob("*.json")))
        killed = 0
        for path in paths:
            record = _read(path)
            if record is None:
                path.unlink(missing_ok=True)
                continue
            if _owner_lives(record):
                continue  # not an orphan
            pgid, start, boot = record.get("pgid"), record.get("start_time"), record.get("boot_id")
            if (
                isinstance(pgid, int)
                and isinstance(start, int)
                and isinstance(boot, str)
                and await kill_orphaned_group(pgid, start, boot, grace=grace)
            ):
                log.warning("killed process group %s, left by a runner that died", pgid)
                killed += 1
            path.unlink(missing_ok=True)
        return killed


def _owner_lives(record: dict[str, object]) -> bool:
    owner, owner_start = record.get("owner_pid"), record.get("owner_start_time")
    return (
        isinstance(owner, int)
        and owner_start is not None
        and process_start_time(owner) == owner_start
    )


def _read(path: Path) -> dict[str, object] | None:
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None
