"""Run a shell command in its own process group, and kill the whole group.

Killing only the direct child on cancel (what ``trio.run_process`` does) would let a
grandchild (``sleep &``, a test runner's workers) survive and keep the output pipes
open. So the command runs in a new session (``start_new_session=True``: its own
process group, with the child's pid as the group id) and every way out of
:func:`run_in_group` — normal exit, timeout, cancellation — ends with the group gone:
SIGTERM to the group, then SIGKILL to the group if anything is still alive after a
grace period.

Why the kill is shielded: a shell that dies on SIGTERM while its grandchild ignores it
must not end the wait early, or the SIGKILL step would be skipped and the grandchild
leaked.

After a crash: a process killed with ``kill -9`` runs no ``finally``, so its groups
would live on. A :class:`TrackedGroups` records each group when it starts (its id, and
the leader's start time from ``/proc``) and forgets it when it is gone; the next start
calls :func:`kill_orphaned_group` for what is still recorded, which signals a group
only while its leader is the very process that was recorded (same start time, same
boot), so a recycled pid is never signalled.
"""

from __future__ import annotations

import contextlib
import math
import os
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Protocol

import attrs
import trio

from . import _procfs as procfs
from ._procfs import boot_id, process_start_time
from ._trees import CommandTree

__all__ = [
    "ShellOutcome",
    "TrackedGroups",
    "boot_id",
    "kill_group",
    "kill_orphaned_group",
    "kill_session",
    "process_start_time",
    "run_in_group",
]

_POLL_INTERVAL = 0.02
_SCAN_AFTER = 0.002
_SIGKILL_WAIT = 1.0
_RECORD_TIMEOUT = 5.0


@attrs.frozen
class ShellOutcome:
    """What a command produced. ``exit_code`` is ``None`` when it timed out.

    ``exit_code`` is negative (``-signal``) when the shell was killed by a signal
    that did not come from us.
    """

    stdout: str
    stderr: str
    exit_code: int | None
    timed_out: bool


class _CappedBuffer:
    """Keeps the first ``cap`` bytes of a stream and counts the rest."""

    def __init__(self, cap: int) -> None:
        self._cap = cap
        self._chunks: list[bytes] = []
        self._kept = 0
        self.dropped = 0

    def add(self, chunk: bytes | bytearray) -> None:
        room = self._cap - self._kept
        if room > 0:
            self._chunks.append(bytes(chunk[:room]))
            self._kept += min(room, len(chunk))
        self.dropped += max(len(chunk) - max(room, 0), 0)

    def text(self) -> str:
        text = b"".join(self._chunks).decode("utf-8", errors="replace")
        if self.dropped:
            text += f"\n[… truncated {self.dropped} bytes]"
        return text


# Fields of /proc/<pid>/stat after "pid (comm) ": state ppid pgrp session …


class TrackedGroups(Protocol):
    """Where the process groups a tool starts are recorded while they live."""

    async def started(self, pgid: int) -> None:
        """A group was started (record it before anything can outlive the caller)."""
        ...

    async def ended(self, pgid: int) -> None:
        """The group is gone (killed and reaped)."""
        ...


async def kill_orphaned_group(pgid: int, start_time: int, boot: str, *, grace: float) -> bool:
    """Kill a group a dead runtime started, if it is still the same group.

    The group is signalled only while its leader is alive with the recorded start
    time (in this boot). When the leader has already exited, the members left in
    its group and session that started after it are signalled one by one, each
    checked again just before. Returns whether anything was signalled.

    Cancellation: shielded (as :func:`kill_group`).
    """
    if boot != procfs.boot_id():
        return False  # a reboot took every process of that boot with it
    leader = await trio.to_thread.run_sync(procfs.process_start_time, pgid)
    if leader == start_time:
        await kill_group(pgid, grace=grace)
        return True
    if leader is not None:
        return False  # the pid was recycled: not ours
    members = await trio.to_thread.run_sync(procfs.orphans_of, pgid, start_time)
    for pid in members:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return bool(members)


def _exists(pgid: int) -> bool:
    """Whether process group ``pgid`` has any member at all (zombies included).

    One system call, no thread: the common answer after a kill (the group is gone, its
    leader reaped) costs microseconds.
    """
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _live_members(pgid: int) -> bool:
    """Whether process group ``pgid`` has a member that is not a zombie (scans /proc)."""
    if not _exists(pgid):
        return False
    members = procfs.members(procfs.PGRP, pgid)
    return True if members is None else bool(members)


# One /proc scan answers for every group being waited on: a stop that kills a hundred
# groups at once would otherwise scan a hundred times per poll — or hop to a worker
# thread a hundred times only to find a scan already made. Per Trio run (a RunVar):
# the last scan (when it began, and the groups it saw with a live member), and the
# one in flight, which every waiter shares.
_Scan = tuple[float, "frozenset[int] | None"]


@attrs.define(eq=False)
class _Scans:
    """The ``/proc`` scans of one Trio run: one at a time, each shared by its waiters."""

    last: _Scan = (-math.inf, None)
    running: trio.Event | None = None

    async def since(self, asked: float) -> _Scan:
        """A scan begun at or after ``asked`` (``time.monotonic()``): the last one if
        it qualifies, else the next (at most one thread hop for all who ask)."""
        while self.last[0] < asked:
            if self.running is not None:
                await self.running.wait()  # maybe begun too early for us: look again
                continue
            done = self.running = trio.Event()
            try:
                self.last = await trio.to_thread.run_sync(_scan_now)
            finally:
                self.running = None
                done.set()
        return self.last


_scans: trio.lowlevel.RunVar[_Scans] = trio.lowlevel.RunVar("omnigent_proc_scans")


def _run_scans() -> _Scans:
    try:
        return _scans.get()
    except LookupError:
        scans = _Scans()
        _scans.set(scans)
        return scans


def _scan_now() -> _Scan:
    began = time.monotonic()
    return began, procfs.scan_groups()


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):  # already gone
        os.killpg(pgid, sig)


async def _wait_gone(pgid: int, killed_at: float, leader: trio.Process | None = None) -> None:
    """Return once group ``pgid`` (signalled at ``killed_at``) has no live member.

    ``leader`` (our child, the group's leader) is waited for first: one wake-up when
    it exits, and it is reaped (a zombie leader keeps the group answering).

    Polling, because nothing notifies "the group is empty": a pidfd or wait() covers
    one process, and the grandchildren are not ours to wait for. The poll starts at
    1 ms and doubles to :data:`_POLL_INTERVAL`, checking with one ``killpg(pgid, 0)``:
    a killed group whose members are all reaped is gone at the first look. One that
    still answers after :data:`_SCAN_AFTER` may hold only zombies — common: an
    orphaned grandchild (the ``sleep`` of ``sh -c "sleep 9"``) is reparented to PID 1
    when the shell dies, and some inits reap only every few seconds — which cannot be
    killed and hold nothing; from then on a scan of ``/proc`` decides. A scan begun
    after the kill answers for every group killed before it began, so a hundred groups
    killed together share one (and most need no thread hop at all).
    """
    if leader is not None:
        await leader.wait()
    delay, waited, wanted, scan_at = 0.001, 0.0, killed_at, _SCAN_AFTER
    while _exists(pgid):
        if waited >= scan_at:
            began, alive = await _run_scans().since(wanted)
            if alive is not None and pgid not in alive:
                return  # zombies only, if anything
            # Still alive: the next scan a poll interval on, and a newer one than this.
            wanted, scan_at = began + 1e-9, waited + _POLL_INTERVAL
        await trio.sleep(delay)
        waited += delay
        delay = min(delay * 2, _POLL_INTERVAL)


async def kill_group(pgid: int, *, grace: float, leader: trio.Process | None = None) -> None:
    """SIGTERM the group, wait up to ``grace`` seconds, then SIGKILL what is left.

    Many groups killed at once (a stop of a session with a hundred background shells)
    are killed in parallel, each in its caller's task: no thread, and no wait longer
    than the group takes to go, unless it outlives the first few polls.

    Args:
        pgid: the group (its leader's pid).
        grace: seconds between SIGTERM and SIGKILL.
        leader: the group's leader, when it is our child: it is waited for (and
            reaped) first, woken by the kernel rather than polled — the usual group
            is its leader alone, gone the moment the wait returns.

    Cancellation: shielded — once started it finishes (within ``grace`` plus a poll,
    and after a SIGKILL the moment the kernel takes to end the group), so a cancelled
    caller never leaves the group running.
    """
    with trio.CancelScope(shield=True):
        if not _exists(pgid):
            return  # gone already
        killed_at = time.monotonic()
        _signal_group(pgid, signal.SIGTERM)
        with trio.move_on_after(grace):
            await _wait_gone(pgid, killed_at, leader)
            return
        killed_at = time.monotonic()
        _signal_group(pgid, signal.SIGKILL)
        # SIGKILL cannot be ignored, but dying takes the kernel a moment: return once
        # it is done (bounded, for a process stuck in uninterruptible sleep).
        with trio.move_on_after(_SIGKILL_WAIT):
            await _wait_gone(pgid, killed_at, leader)


def _signal_each(pids: list[int], sig: signal.Signals) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


async def kill_session(sid: int, *, grace: float) -> None:
    """Kill every process of the Unix session ``sid``: SIGTERM, then SIGKILL after ``grace``.

    A terminal's pane process leads its own session, and a shell with job control
    puts each job in a process group of its own within it, so the session — not the
    pane's process group — is what holds everything typed into the terminal (a
    ``nohup``-ed job included). Stopped jobs get SIGCONT so they see the SIGTERM.
    Only a process that started a session of its own (``setsid``, a daemon) escapes.
    Without ``/proc`` this falls back to the process group ``sid``.

    Cancellation: shielded — once started it finishes (within ``grace`` plus a poll).
    """
    with trio.CancelScope(shield=True):
        members = await trio.to_thread.run_sync(procfs.members, procfs.SESSION, sid)
        if members is None:
            await kill_group(sid, grace=grace)
            return
        if not members:
            return
        _signal_each(members, signal.SIGTERM)
        _signal_each(members, signal.SIGCONT)
        with trio.move_on_after(grace):
            while await trio.to_thread.run_sync(procfs.members, procfs.SESSION, sid):  # noqa: ASYNC110
                await trio.sleep(_POLL_INTERVAL)
            return
        left = await trio.to_thread.run_sync(procfs.members, procfs.SESSION, sid)
        _signal_each(left or [], signal.SIGKILL)


async def _drain(stream: trio.abc.ReceiveStream, buffer: _CappedBuffer) -> None:
    async for chunk in stream:
        buffer.add(chunk)


async def _close(stream: trio.abc.ReceiveStream) -> None:
    """Close one of the shell's pipes (the caller has stopped reading it).

    A pipe (:class:`trio.lowlevel.FdStream`) is closed at once: ``aclose`` would add
    a checkpoint per pipe — two scheduler rounds per pipe for a cancelled caller.
    """
    if isinstance(stream, trio.lowlevel.FdStream):
        stream.close()
    else:
        with trio.CancelScope(shield=True):
            await stream.aclose()


@attrs.define(eq=False)
class _Group:
    """One command's process group, killed at most once (whichever way out comes first).

    A killed group can keep answering ``killpg(pgid, 0)`` for seconds (an orphaned
    zombie waiting for PID 1): a second kill would signal it again and wait it out
    again for nothing.
    """

    leader: trio.Process
    grace: float
    tree: CommandTree | None = None
    gone: bool = False

    async def kill(self) -> None:
        """Kill the group (see :func:`kill_group`) unless that was done already.

        The command's tree is sent SIGTERM at the same moment, so what left the group
        has the same grace (its owner ends it, :meth:`CommandTree.end`).
        """
        if not self.gone:
            if self.tree is not None:
                self.tree.terminate()
            await kill_group(self.leader.pid, grace=self.grace, leader=self.leader)
            self.gone = True


async def run_in_group(
    command: str | Sequence[str],
    cwd: Path,
    *,
    timeout: float,
    output_cap: int,
    grace: float = 2.0,
    tracker: TrackedGroups | None = None,
    env: Mapping[str, str] | None = None,
    tree: CommandTree | None = None,
) -> ShellOutcome:
    """Run ``/bin/sh -c command`` (or the argv ``command``) in ``cwd``, stdin ``/dev/null``.

    Processes left in the command's group when the shell exits are killed too. With
    ``tracker``, the group is recorded while it lives (see the module docstring).
    ``env`` is the whole environment (None: inherit ours). A sandbox's launch (an
    argv that starts ``bwrap``) runs the same way: the sandbox's pid namespace dies
    with its ``bwrap`` process, so killing the group ends what escaped it too.
    With ``tree`` (:mod:`._trees`), the command runs inside it, so what leaves the
    group (``setsid``, GNU ``timeout``) is signalled with it; the tree's owner ends the
    rest. The tree goes outside whatever ``command`` is (a sandbox's launcher inside).

    Returns:
        The first ``output_cap`` bytes of each stream (decoded as UTF-8 with
        replacement, plus a truncation marker), and the exit code — or
        ``timed_out=True`` and no exit code if ``timeout`` seconds passed first.

    Raises:
        OSError: the shell could not be started.

    Cancellation: the whole process group is killed (SIGTERM, SIGKILL after
    ``grace`` seconds) and the shell reaped before ``trio.Cancelled`` propagates.

    Why not ``trio.run_process``: its task, its ``deliver_cancel`` task and a task
    waiting for the shell to exit (to kill what it left behind) made three tasks per
    command on top of the two pipe readers, each unwound on a cancel — a stop of a
    session with a hundred background shells spent most of its CPU there. Here the
    calling task waits for the shell itself and kills the group on every way out.
    """
    stdout = _CappedBuffer(output_cap)
    stderr = _CappedBuffer(output_cap)
    argv = ["/bin/sh", "-c", command] if isinstance(command, str) else list(command)
    proc = await trio.lowlevel.open_process(
        argv if tree is None else tree.argv(argv),
        cwd=cwd,
        env=None if env is None else dict(env),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    assert proc.stdout is not None and proc.stderr is not None
    group = _Group(proc, grace, tree)
    try:
        if tracker is not None:
            with trio.move_on_after(_RECORD_TIMEOUT, shield=True):
                await tracker.started(proc.pid)
        with trio.move_on_after(timeout) as deadline:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_drain, proc.stdout, stdout)
                nursery.start_soon(_drain, proc.stderr, stderr)
                await proc.wait()
                # Background jobs the command left behind would hold our pipes open
                # (and outlive the call); once the shell is gone, so is its group.
                await group.kill()
    finally:
        # A timeout, a cancel or an error in a reader: kill (and reap) what runs.
        await group.kill()
        await _close(proc.stdout)
        await _close(proc.stderr)
        if tracker is not None:
            with trio.move_on_after(_RECORD_TIMEOUT, shield=True):
                await tracker.ended(proc.pid)
    timed_out = deadline.cancelled_caught
    exit_code = None if timed_out else proc.returncode
    return ShellOutcome(stdout.text(), stderr.text(), exit_code, timed_out)
