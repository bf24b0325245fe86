"""cgroup v2, where the machine lets us: a group per command that no process can leave.

A process can leave its process group (``setsid``, ``setpgid``: GNU ``timeout`` does)
and its parent (a double fork), but not its cgroup: only a write to another cgroup's
``cgroup.procs`` moves it, and that needs write access there. So a command started
inside a cgroup of its own keeps everything it starts — daemonised, ``nohup``-ed,
``setsid``-ed — in that cgroup, and ``cgroup.kill`` ends all of them at once.

Where it works: a cgroup v2 hierarchy (``cgroup2`` in ``/proc/self/mountinfo``, at
``/sys/fs/cgroup`` or ``/sys/fs/cgroup/unified``) in which the cgroup this process is
in may have children and move processes into them — as root, or in a subtree systemd
delegated (``Delegate=yes``, a user service or ``systemd-run --user --scope -p
Delegate=yes``). :func:`find_cgroup_base` checks that by doing it once (a short
``/bin/sh`` moves itself into a probe cgroup, :func:`make_probe`); without it omnigent
falls back to its subreaper wrapper (:mod:`._subreaper`).

The layout, under the cgroup this process is in::

    omnigent-<pid>-<start time>/        one per process (several runtimes share it)
        <key>/                          one per session (its id, made path-safe)
            <n>/                        one per command; removed when it ends

A process killed with ``kill -9`` leaves its directory behind: the next start kills
what is in it and removes it (:func:`sweep_stale`), recognising a live owner by its
pid and start time.

Blocking (filesystem writes): async callers use ``trio.to_thread.run_sync``, except
for the small writes the module documents as cheap.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Final, NamedTuple

from ._procfs import process_start_time

__all__ = [
    "PREFIX",
    "PROBE_TIMEOUT",
    "Probe",
    "find_cgroup_base",
    "join_argv",
    "kill_cgroup",
    "make_probe",
    "populated",
    "remove_cgroup",
    "remove_probe",
    "sweep_stale",
]

PREFIX: Final = "omnigent-"
PROBE_TIMEOUT: Final = 10.0
"""Seconds the probe's process may take to move itself into its cgroup."""
_OWNER = re.compile(r"^omnigent-(\d+)-(\d+)$")
# A command's first act, before it runs anything: move itself into its cgroup.
_JOIN = 'echo 0 > "$0" || exit 126; exec "$@"'


def join_argv(cgroup: Path, argv: list[str]) -> list[str]:
    """``argv`` run inside ``cgroup``: a ``/bin/sh`` that moves itself there, then
    ``exec``s it (so everything the command starts starts inside). Exit 126 with the
    shell's message if the move is refused."""
    return ["/bin/sh", "-c", _JOIN, str(cgroup / "cgroup.procs"), *argv]


def _mount_point() -> Path | None:
    """Where the cgroup v2 hierarchy is mounted, from ``/proc/self/mountinfo``."""
    try:
        lines = Path("/proc/self/mountinfo").read_text(encoding="utf-8").splitlines()
    except OSError:
        return None
    for line in lines:
        fields = line.split(" - ", 1)
        if len(fields) == 2 and fields[1].split(" ", 1)[0] == "cgroup2":
            return Path(fields[0].split(" ")[4])
    return None


def _own_cgroup() -> str | None:
    """This process's cgroup v2 path (the ``0::/…`` line of ``/proc/self/cgroup``)."""
    try:
        lines = Path("/proc/self/cgroup").read_text(encoding="utf-8").splitlines()
    except OSError:
        return None
    for line in lines:
        if line.startswith("0::"):
            return line[3:]
    return None


class Probe(NamedTuple):
    """A probe cgroup, made: ``argv`` moves itself into ``directory`` (under ``base``)
    and exits 0 if it got there. Removed with :func:`remove_probe`."""

    base: Path
    directory: Path
    argv: list[str]


def make_probe() -> Probe | None:
    """Make the probe cgroup under this process's own cgroup, and the command that
    tries it; ``None`` where it cannot even be made (no cgroup v2, no write access, no
    ``cgroup.kill``). A few small reads and one ``mkdir``.

    The try itself — a process moved into a cgroup — waits on the kernel's cgroup
    migration (10–35 ms here): a caller that must not wait runs it as a child process
    it can cancel (:mod:`._trees`); :func:`find_cgroup_base` runs it in place.
    """
    mount, own = _mount_point(), _own_cgroup()
    if mount is None or own is None:
        return None
    base = mount / own.lstrip("/")
    probe = base / f"{PREFIX}probe-{os.getpid()}"
    try:
        probe.mkdir(exist_ok=True)
    except OSError:
        return None
    if not (probe / "cgroup.kill").exists():
        remove_probe(probe)
        return None  # before Linux 5.14: no atomic kill
    check = f'echo 0 > "$0" && grep -qx "0::{own.rstrip("/")}/{probe.name}" /proc/self/cgroup'
    return Probe(base, probe, ["/bin/sh", "-c", check, str(probe / "cgroup.procs")])


def remove_probe(directory: Path) -> None:
    """Remove a probe cgroup (once the process moved into it has ended)."""
    with contextlib.suppress(OSError):
        directory.rmdir()


def find_cgroup_base() -> Path | None:
    """This process's own cgroup directory if commands can be given cgroups under it.

    Tries it: makes a probe cgroup, moves a short ``/bin/sh`` into it and checks that it
    went, then removes the probe. ``None`` on any failure (no cgroup v2, no write
    access, a subtree whose controllers forbid it, no ``cgroup.kill``). Blocking: up
    to the probe's 10 s timeout.
    """
    probe = make_probe()
    if probe is None:
        return None
    try:
        done = subprocess.run(
            probe.argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=PROBE_TIMEOUT,
            check=False,
        )
        return probe.base if done.returncode == 0 else None
    except (OSError, subprocess.SubprocessError):
        return None
    finally:
        remove_probe(probe.directory)


def populated(cgroup: Path) -> bool:
    """Whether any process is in ``cgroup`` or below it (``cgroup.events``); a cgroup
    that is gone holds nothing. One small read."""
    try:
        events = (cgroup / "cgroup.events").read_text(encoding="ascii")
    except OSError:
        return False
    return "populated 1" in events


def _pids(cgroup: Path) -> list[int]:
    """The processes in ``cgroup`` and below it."""
    found: list[int] = []
    for directory, _, _ in os.walk(cgroup):
        with contextlib.suppress(OSError):
            text = (Path(directory) / "cgroup.procs").read_text(encoding="ascii")
            found.extend(int(pid) for pid in text.split())
    return found


def signal_cgroup(cgroup: Path, sig: signal.Signals) -> int:
    """Send ``sig`` (and SIGCONT, so a stopped process sees it) to every process in
    ``cgroup`` and below; returns how many."""
    pids = _pids(cgroup)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)
            os.kill(pid, signal.SIGCONT)
    return len(pids)


def kill_cgroup(cgroup: Path) -> None:
    """SIGKILL every process in ``cgroup`` and below, at once (``cgroup.kill``: no
    process can fork its way out of it)."""
    with contextlib.suppress(OSError):
        (cgroup / "cgroup.kill").write_text("1", encoding="ascii")


def remove_cgroup(cgroup: Path) -> bool:
    """Remove ``cgroup`` and the cgroups below it, deepest first; whether it is gone.

    A cgroup that still holds a process (or a child that does) stays.
    """
    for directory, _, _ in _walk_up(cgroup):
        with contextlib.suppress(OSError):
            directory.rmdir()
    return not cgroup.exists()


def _walk_up(cgroup: Path) -> Iterator[tuple[Path, list[str], list[str]]]:
    for directory, dirs, files in os.walk(cgroup, topdown=False):
        yield Path(directory), dirs, files


def sweep_stale(base: Path) -> list[Path]:
    """Kill and remove what processes that died without closing left under ``base``.

    A directory ``omnigent-<pid>-<start>`` belongs to a live process only while that
    pid runs with that start time; the others are killed (``cgroup.kill`` reaches
    every session and command below) and removed. Returns those swept.
    """
    swept = []
    with contextlib.suppress(OSError):
        for entry in base.iterdir():
            match = _OWNER.match(entry.name)
            if match is None or not entry.is_dir():
                continue
            pid, start = int(match.group(1)), int(match.group(2))
            if process_start_time(pid) == start:
                continue  # its owner lives (this process, or another runtime's)
            kill_cgroup(entry)
            swept.append(entry)
    return swept
