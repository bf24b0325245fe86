"""The subreaper wrapper: a command's whole process tree, where cgroups are not ours.

Run as ``python -I -S _subreaper.py GRACE PARENT -- ARGV…`` (a file of its own: it
imports nothing of omnigent's, so it starts in ~15 ms). It makes itself a *child
subreaper* (``PR_SET_CHILD_SUBREAPER``): a process its command starts that is orphaned
— ``setsid``, ``nohup … &`` in a subshell, a daemon's double fork — is re-parented to
it instead of to PID 1, so every process the command started stays its descendant,
whatever process group or session it moved to. Then:

* it runs ARGV as its child and reaps whatever is re-parented to it;
* when that child exits — or the wrapper gets SIGTERM, SIGINT or SIGHUP, or its parent
  (omnigent) dies, even by ``kill -9`` (``PR_SET_PDEATHSIG``) — it sends SIGTERM (and
  SIGCONT) to every descendant, waits up to GRACE seconds, sends SIGKILL to what is
  left, again until none is left, and exits;
* its exit status is the child's (a child killed by a signal: the wrapper kills itself
  with that signal), so a caller sees the command's own status.

It is what :mod:`._trees` uses when the machine gives omnigent no cgroup of its own
(:mod:`._cgroup`). It is the command's process-group leader, so killing the group
(SIGTERM) reaches it as before, and it takes the escaped descendants with it; its grace
is shorter than its caller's, so it is done before the caller escalates to SIGKILL.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
import time

__all__ = ["main"]

_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36
_ENDING = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
_WATCHED = {signal.SIGCHLD, *_ENDING}


def _prctl(option: int, value: int) -> bool:
    libc = ctypes.CDLL(None, use_errno=True)
    return bool(libc.prctl(option, value, 0, 0, 0) == 0)


def _children() -> dict[int, list[int]]:
    """Every process's children, by parent pid, from ``/proc/*/stat``."""
    tree: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as stat:
                fields = stat.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != b"Z":  # a zombie holds nothing; it is reaped below
            tree.setdefault(int(fields[1]), []).append(int(name))
    return tree


def _descendants() -> list[int]:
    tree, found, pending = _children(), [], [os.getpid()]
    while pending:
        for child in tree.get(pending.pop(), []):
            found.append(child)
            pending.append(child)
    return found


def _signal_all(pids: list[int], sig: signal.Signals) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)
            if sig != signal.SIGKILL:
                os.kill(pid, signal.SIGCONT)


def _reap(main: int, status: list[int]) -> None:
    """Reap every child that has exited; the main child's status goes in ``status``."""
    while True:
        try:
            pid, code = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        if pid == main:
            status.append(code)


def _end_tree(main: int, status: list[int], grace: float) -> None:
    """SIGTERM the whole tree, SIGKILL what is left after ``grace``, until none is."""
    _signal_all(_descendants(), signal.SIGTERM)
    deadline = time.monotonic() + grace
    while (left := _descendants()) and time.monotonic() < deadline:
        signal.sigtimedwait({signal.SIGCHLD}, max(0.0, min(0.05, deadline - time.monotonic())))
        _reap(main, status)
    while left:  # SIGKILL cannot be refused; a fork in between is caught next round
        _signal_all(left, signal.SIGKILL)
        signal.sigtimedwait({signal.SIGCHLD}, 0.05)
        _reap(main, status)
        left = _descendants()
    _reap(main, status)


def main(argv: list[str]) -> int:
    """``GRACE PARENT -- COMMAND…``: run COMMAND and end its whole tree (see above)."""
    grace, parent = float(argv[0]), int(argv[1])
    command = argv[3:]
    signal.pthread_sigmask(signal.SIG_BLOCK, _WATCHED)
    _prctl(_PR_SET_CHILD_SUBREAPER, 1)
    _prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    main_pid = os.fork()
    if main_pid == 0:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, _WATCHED)
        try:
            os.execvp(command[0], command)
        except OSError as exc:
            os.write(2, f"{command[0]}: {exc.strerror}\n".encode())
            os._exit(127)
    status: list[int] = []
    ending = os.getppid() != parent  # omnigent died before PDEATHSIG was armed
    while not status and not ending:
        info = signal.sigwaitinfo(_WATCHED)
        if info.si_signo in _ENDING:
            ending = True
        _reap(main_pid, status)
    _end_tree(main_pid, status, grace)
    code = status[0] if status else 0
    if os.WIFSIGNALED(code):
        sig = os.WTERMSIG(code)
        signal.signal(sig, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {sig})
        os.kill(os.getpid(), sig)
    return os.waitstatus_to_exitcode(code) if status else 128 + signal.SIGTERM


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
