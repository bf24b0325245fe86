"""Process groups a session's tools start, recorded in the store while they live.

A runtime killed with ``kill -9`` cannot kill the shells its tools started; the next
start can, if it knows which they were. :class:`RecordedGroups` is the
:class:`~omnigent.processes._groups.TrackedGroups` a session's shell tool reports to: it
records each group with its leader's start time (from ``/proc``) when it starts and
forgets it when it is gone. Recovery (:mod:`omnigent.core.runtime._recovery`) kills what
is still recorded.

Recording is best effort: a store that fails to take a record is logged, and the tool
runs on.

A stop uses the record too: :meth:`RecordedGroups.terminate` sends SIGTERM to every
group the session has running *before* its tasks are cancelled, so a hundred shells
die together while their tasks unwind, instead of each waiting for its task's turn to
be cancelled and kill it. (Each task still kills its own group as before — SIGTERM,
the grace, SIGKILL — and finds it dying or gone.)
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import signal

import trio

from ...processes import boot_id, process_start_time
from ...stores import ProcessGroupRow, Store

__all__ = ["RecordedGroups", "this_boot"]

log = logging.getLogger(__name__)


@functools.cache
def this_boot() -> str:
    """The kernel's boot id (read once: it does not change while we run)."""
    return boot_id()


class RecordedGroups:
    """The process groups one session's tools have running, as the store knows them."""

    def __init__(self, store: Store, session_id: str) -> None:
        self._store = store
        self._session_id = session_id
        self._started: dict[int, int] = {}

    async def started(self, pgid: int) -> None:
        start = await trio.to_thread.run_sync(process_start_time, pgid)
        if start is None:
            return  # already gone (and reaped): nothing can outlive us
        self._started[pgid] = start
        row = ProcessGroupRow(pgid, start, this_boot(), self._session_id)
        try:
            await self._store.put_process_group(row)
        except Exception:
            log.warning("could not record process group %d", pgid, exc_info=True)

    async def ended(self, pgid: int) -> None:
        start = self._started.pop(pgid, None)
        if start is None:
            return
        try:
            await self._store.delete_process_group(pgid, start)
        except Exception:
            log.warning("could not forget process group %d", pgid, exc_info=True)

    def terminate(self) -> int:
        """SIGTERM every group still recorded as running; returns how many.

        Each leader is checked against its recorded start time first, so a group whose
        leader has just been reaped (and its pid perhaps reused) is never signalled.
        Synchronous: one small ``/proc`` read and one signal per group.
        """
        signalled = 0
        for pgid, start in list(self._started.items()):
            if process_start_time(pgid) != start:
                continue
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, signal.SIGTERM)
                signalled += 1
        return signalled
