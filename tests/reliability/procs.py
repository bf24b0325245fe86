"""Processes as ``/proc`` shows them: by pid, start time, group and session — never by name.

A pid alone does not name a process (pids are recycled); a pid with its start time
does. The reliability tests snapshot a server's whole process tree with
:func:`descendants` (while it is frozen with ``SIGSTOP``, so nothing new starts), kill
it, and later check with :func:`stragglers` that nothing of that tree — and nothing in
its process groups or sessions, which covers what those processes started after the
snapshot — still runs.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

import attrs
import trio


@attrs.frozen
class Proc:
    """One process: ``(pid, start)`` names it; ``state`` ``Z`` is a zombie (dead)."""

    pid: int
    start: int
    ppid: int
    pgid: int
    sid: int
    state: str


def read_proc(pid: int) -> Proc | None:
    """The process ``pid`` now, or None if there is none."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    # The command (field 2) is in parentheses and may hold spaces or ')'.
    fields = stat[stat.rfind(b")") + 2 :].split()
    try:
        return Proc(
            pid=pid,
            state=fields[0].decode(),
            ppid=int(fields[1]),
            pgid=int(fields[2]),
            sid=int(fields[3]),
            start=int(fields[19]),
        )
    except (IndexError, ValueError):
        return None


def all_procs() -> list[Proc]:
    """Every process on the machine (those that exit during the scan are skipped)."""
    found = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit() and (proc := read_proc(int(entry.name))) is not None:
            found.append(proc)
    return found


def descendants(root: int) -> list[Proc]:
    """``root`` and every process below it (by parent pid)."""
    procs = all_procs()
    children: dict[int, list[Proc]] = {}
    for proc in procs:
        children.setdefault(proc.ppid, []).append(proc)
    top = next((p for p in procs if p.pid == root), None)
    if top is None:
        return []
    tree, stack = [], [top]
    while stack:
        proc = stack.pop()
        tree.append(proc)
        stack.extend(children.get(proc.pid, ()))
    return tree


def alive(proc: Proc) -> bool:
    """Whether that very process still runs (not a zombie, not a recycled pid)."""
    now = read_proc(proc.pid)
    return now is not None and now.start == proc.start and now.state != "Z"


def stragglers(tree: Iterable[Proc], *, spare: Iterable[int] = ()) -> list[Proc]:
    """Live processes of ``tree``, or in one of its process groups or sessions.

    ``spare``: pids not to count (the test's own process, say).
    """
    tree = list(tree)
    named = {(p.pid, p.start) for p in tree}
    groups = {p.pgid for p in tree} | {p.sid for p in tree}
    spared = set(spare) | {os.getpid()}
    return [
        p
        for p in all_procs()
        if p.state != "Z"
        and p.pid not in spared
        and ((p.pid, p.start) in named or p.pgid in groups or p.sid in groups)
    ]


async def wait_no_stragglers(
    tree: Iterable[Proc], *, timeout: float, spare: Iterable[int] = ()
) -> None:
    """Wait until :func:`stragglers` is empty; fail naming what is left after ``timeout``.

    Each process is waited for on a pidfd (no polling while one is known to run);
    the scan repeats until a whole pass finds nothing.
    """
    tree = list(tree)
    try:
        with trio.fail_after(timeout):
            while left := stragglers(tree, spare=spare):
                await _wait_exit(left[0])
    except trio.TooSlowError:
        raise AssertionError(f"processes outlived their owner: {stragglers(tree)}") from None


async def _wait_exit(proc: Proc) -> None:
    try:
        fd = os.pidfd_open(proc.pid)
    except ProcessLookupError:
        return
    try:
        if alive(proc):
            await trio.lowlevel.wait_readable(fd)
    finally:
        os.close(fd)
