"""Which process a pid names now: its start time, from ``/proc``."""

from __future__ import annotations

__all__ = ["process_start_time"]


def process_start_time(pid: int) -> int | None:
    """The start time of ``pid`` in clock ticks since boot, or None if it is gone.

    Read from ``/proc/<pid>/stat`` (field 22); a pid with the same number but another
    start time is another process. ``None`` as well where ``/proc`` is not available:
    the sweep then signals nothing.
    """
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read()
    except OSError:
        return None
    # The command name (field 2) is in parentheses and may itself hold spaces or ')'.
    fields = stat[stat.rfind(b")") + 2 :].split()
    try:
        return int(fields[19])
    except (IndexError, ValueError):
        return None
