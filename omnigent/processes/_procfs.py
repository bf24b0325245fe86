"""Reading ``/proc``: which process a pid names now, and who is in a group or session.

Pure reads, blocking (callers in Trio run them in a worker thread, or where a few
``stat`` calls do not matter). Everything answers ``None`` (or nothing) where there is
no ``/proc`` — the callers then signal nothing they cannot identify.

A pid alone does not name a process (pids are recycled); a pid *and its start time*
(field 22 of ``/proc/PID/stat``, clock ticks since boot) *in this boot* does.
"""

from __future__ import annotations

from pathlib import Path

__all__ = [
    "PGRP",
    "SESSION",
    "boot_id",
    "members",
    "orphans_of",
    "process_start_time",
    "scan_groups",
    "stat_fields",
]

PGRP, SESSION = 2, 3
"""Indices of the process group and session in :func:`stat_fields`."""
_START_TIME = 19  # field 22 of stat: starttime
_PROC = Path("/proc")


def stat_fields(pid: int) -> list[str] | None:
    """``/proc/PID/stat`` after the command name (field 3 onwards), or None."""
    try:
        stat = (_PROC / str(pid) / "stat").read_text()
    except (OSError, ValueError):
        return None
    return _after_comm(stat)


def _after_comm(stat: str) -> list[str]:
    # "pid (comm) state ppid pgrp session …"; comm may contain spaces and parentheses.
    return stat[stat.rfind(")") + 2 :].split()


def process_start_time(pid: int) -> int | None:
    """When process ``pid`` started, in clock ticks since boot (None: no such process)."""
    fields = stat_fields(pid)
    if fields is None or len(fields) <= _START_TIME:
        return None
    try:
        return int(fields[_START_TIME])
    except ValueError:
        return None


def boot_id() -> str:
    """The kernel's id for this boot (start times count from it)."""
    try:
        return (_PROC / "sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return "unknown"


def _processes() -> list[tuple[int, list[str]]]:
    """Every process's pid and stat fields (those that exit meanwhile are skipped)."""
    found = []
    for entry in _PROC.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue  # exited while we looked
        found.append((int(entry.name), _after_comm(stat)))
    return found


def orphans_of(pgid: int, started_after: int) -> list[int]:
    """Members of group ``pgid`` (in its session) that started after its leader did."""
    return [
        pid
        for pid, fields in _processes()
        if len(fields) > _START_TIME
        and fields[0] != "Z"
        and int(fields[PGRP]) == pgid
        and int(fields[SESSION]) == pgid
        and int(fields[_START_TIME]) >= started_after
    ]


def members(field: int, ident: int) -> list[int] | None:
    """Pids of the non-zombie processes whose ``field`` (:data:`PGRP` or
    :data:`SESSION`) is ``ident``; ``None`` where there is no ``/proc``.

    A zombie cannot be killed and holds no pipes; counting one as alive would only
    make a caller wait out its grace period (orphans whose reaper is slow stay
    zombies).
    """
    if not _PROC.is_dir():
        return None
    return [
        pid
        for pid, fields in _processes()
        if len(fields) > field and int(fields[field]) == ident and fields[0] != "Z"
    ]


def scan_groups() -> frozenset[int] | None:
    """The process groups that have a member which is not a zombie (None: no /proc)."""
    if not _PROC.is_dir():
        return None
    return frozenset(
        int(fields[PGRP]) for _, fields in _processes() if len(fields) > PGRP and fields[0] != "Z"
    )
