"""Process trees: everything a command started, ended with it, however it hid.

``sys_os_shell`` runs its command in a process group of its own and kills the group
(:mod:`._groups`). A process that leaves the group — ``setsid``, ``nohup … &`` in a
subshell, GNU ``timeout`` (so ``timeout 600 npm run dev &``) — outlived the tool call,
``stop_session``, shutdown and a ``kill -9`` restart. A :class:`ProcessTrees` (one per
runtime) gives each command a tree that holds *every* process it starts:

* :attr:`TreeMode.CGROUP` — a cgroup v2 per session and one per command under it, where
  the machine lets this process make them (root, or a subtree systemd delegated; see
  :mod:`._cgroup`). No process can leave a cgroup on its own; ``cgroup.kill`` ends the
  lot at once.
* :attr:`TreeMode.SUBREAPER` — elsewhere on Linux: the command runs under a small
  wrapper that is its *child subreaper* (:mod:`._subreaper`), so orphaned descendants
  are re-parented to it, not to PID 1; it ends them all when the command ends or it is
  told to (or omnigent dies).
* :attr:`TreeMode.GROUP` — no ``/proc`` (not Linux): the process group alone, as before.

How a command is wrapped to run elsewhere (a sandbox's ``bwrap`` argv) is not this
module's business: :meth:`CommandTree.argv` takes whatever argv the caller built and
puts the tracking in front, so the two compose.

Lifetime: a :class:`CommandTree` is opened around one command
(:meth:`ProcessTrees.open_command`) and ended when it ends — every process still in it
gets SIGTERM, SIGKILL after the grace — whichever way the command ends (exit, timeout,
cancel). After a ``kill -9`` of omnigent: cgroups are swept at the next start (by
their owner's pid and start time); a subreaper wrapper notices its parent died and
ends its tree at once.
"""

from __future__ import annotations

import contextlib
import enum
import itertools
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path

import trio

from . import _cgroup as cgroup
from ._procfs import process_start_time

__all__ = [
    "MODE_VARIABLE",
    "CommandTree",
    "ProcessTrees",
    "SessionTrees",
    "TreeMode",
    "open_process_trees",
]

log = logging.getLogger(__name__)

_POLL = 0.01
_SIGKILL_WAIT = 1.0
_SUBREAPER = Path(__file__).with_name("_subreaper.py")
MODE_VARIABLE = "OMNIGENT_PROCESS_TREES"
"""Forces a :class:`TreeMode` (its value) for the runtimes of this process."""


class TreeMode(enum.Enum):
    """How a command's process tree is held (see the module docstring)."""

    CGROUP = "cgroup"
    SUBREAPER = "subreaper"
    GROUP = "group"


def _session_key(session_id: str) -> str:
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in session_id)[:128] or "_"


class CommandTree:
    """One command's process tree: wrap its argv, then end whatever is left in it."""

    def __init__(self, mode: TreeMode, grace: float, cgroup_dir: Path | None = None) -> None:
        self.mode = mode
        self.grace = grace
        self.cgroup_dir = cgroup_dir

    def argv(self, argv: Sequence[str]) -> list[str]:
        """``argv`` with the tracking in front (nothing, for :attr:`TreeMode.GROUP`)."""
        if self.mode is TreeMode.CGROUP:
            assert self.cgroup_dir is not None
            return cgroup.join_argv(self.cgroup_dir, list(argv))
        if self.mode is TreeMode.SUBREAPER:
            # The wrapper's grace is shorter than the group kill's, so it has ended
            # the escaped processes before its caller escalates to SIGKILL.
            inner = f"{max(self.grace * 0.5, 0.05):.3f}"
            return [
                sys.executable,
                "-I",
                "-S",
                str(_SUBREAPER),
                inner,
                str(os.getpid()),
                "--",
                *argv,
            ]
        return list(argv)

    def terminate(self) -> None:
        """SIGTERM (and SIGCONT) every process in the tree now, without waiting.

        For a cgroup; the caller kills the command's process group at the same moment,
        so both graces run together. A few small reads and one signal per process.
        """
        if self.mode is TreeMode.CGROUP and self.cgroup_dir is not None:
            cgroup.signal_cgroup(self.cgroup_dir, signal.SIGTERM)

    async def end(self) -> None:
        """End every process still in the tree: SIGTERM, SIGKILL after the grace.

        For a cgroup, then remove it. The subreaper wrapper ends its own tree (it is in
        the command's process group, which the caller kills). Cancellation: shielded,
        bounded by the grace plus a second.
        """
        if self.mode is not TreeMode.CGROUP or self.cgroup_dir is None:
            return
        directory = self.cgroup_dir
        with trio.CancelScope(shield=True):
            if cgroup.populated(directory):
                await trio.to_thread.run_sync(cgroup.signal_cgroup, directory, signal.SIGTERM)
                with trio.move_on_after(self.grace):
                    await _drained(directory)
                if cgroup.populated(directory):
                    cgroup.kill_cgroup(directory)
                    with trio.move_on_after(_SIGKILL_WAIT):
                        await _drained(directory)
            if not await trio.to_thread.run_sync(cgroup.remove_cgroup, directory):
                log.warning("could not remove the cgroup %s (a process is stuck in it)", directory)
                return
            # The session's cgroup goes with its last command (a new one makes it again),
            # so a long-running server keeps none for idle sessions.
            await trio.to_thread.run_sync(_remove_if_empty, directory.parent)


async def _drained(directory: Path) -> None:
    """Return once nothing runs in ``directory`` (polled: ``cgroup.events``)."""
    delay = 0.001
    while cgroup.populated(directory):
        await trio.sleep(delay)
        delay = min(delay * 2, _POLL * 5)


class SessionTrees:
    """The trees of one session's commands (what its shell tool is given)."""

    def __init__(self, trees: ProcessTrees, session_id: str) -> None:
        self._trees = trees
        self.session_id = session_id

    def open_command(self, *, grace: float) -> AbstractAsyncContextManager[CommandTree]:
        """See :meth:`ProcessTrees.open_command`."""
        return self._trees.open_command(self.session_id, grace=grace)


class ProcessTrees:
    """The process trees of one runtime's commands. Made by :func:`open_process_trees`.

    Its mode may still be being decided when it is handed out (the cgroup probe runs
    in the caller's nursery): a command's tree waits for it (:meth:`wait_mode`).
    """

    def __init__(self) -> None:
        self._mode = TreeMode.GROUP
        self._base: Path | None = None  # this runtime's own cgroup (CGROUP)
        self._decided = trio.Event()
        self._numbers = itertools.count(1)

    def _decide(self, mode: TreeMode, base: Path | None = None) -> None:
        self._mode, self._base = mode, base
        self._decided.set()

    async def wait_mode(self) -> TreeMode:
        """The mode, once it is decided (at once, unless the probe is still running)."""
        await self._decided.wait()
        return self._mode

    def for_session(self, session_id: str) -> SessionTrees:
        """The trees of ``session_id``'s commands."""
        return SessionTrees(self, session_id)

    @asynccontextmanager
    async def open_command(self, session_id: str, *, grace: float) -> AsyncIterator[CommandTree]:
        """A tree for one command of ``session_id``, ended when the block exits.

        Waits for the mode first (the probe: tens of milliseconds, once per runtime).

        Cancellation: the ending is shielded (see :meth:`CommandTree.end`).
        """
        mode = await self.wait_mode()
        tree = CommandTree(mode, grace)
        if mode is TreeMode.CGROUP:
            assert self._base is not None
            directory = self._base / _session_key(session_id) / str(next(self._numbers))
            try:
                await trio.to_thread.run_sync(_make_cgroup, directory)
                tree = CommandTree(mode, grace, directory)
            except OSError:
                log.warning("could not make the cgroup %s; using the subreaper", directory)
                tree = CommandTree(TreeMode.SUBREAPER, grace)
        try:
            yield tree
        finally:
            await tree.end()


async def _sweep(base: Path) -> None:
    """Kill and remove the cgroups dead runtimes left (bounded)."""
    swept = await trio.to_thread.run_sync(cgroup.sweep_stale, base)
    for directory in swept:
        with trio.move_on_after(_SIGKILL_WAIT):
            await _drained(directory)
        if await trio.to_thread.run_sync(cgroup.remove_cgroup, directory):
            log.warning("killed what a dead runtime left in the cgroup %s", directory)


@asynccontextmanager
async def open_process_trees(
    *, mode: TreeMode | None = None, nursery: trio.Nursery | None = None
) -> AsyncIterator[ProcessTrees]:
    """The runtime's process trees, in the best mode this machine allows.

    Args:
        mode: force a mode (``CGROUP`` raises if it is not available). ``None``:
            ``$OMNIGENT_PROCESS_TREES`` (``cgroup``, ``subreaper`` or ``group``) if
            set, else a cgroup if this process can make them, else the subreaper on
            Linux, else the process group alone.
        nursery: where to probe for cgroups while the block runs, when no mode is
            forced. The probe moves a short process into a cgroup: 10–35 ms of the
            kernel's cgroup migration, which a server's start waited for; with a
            nursery the trees are handed out at once and a command's tree waits for
            the mode. ``None``: the probe runs before the block.

    Raises:
        OSError: a cgroup was asked for and is not available here.
        ValueError: ``$OMNIGENT_PROCESS_TREES`` names no mode.

    Resource handling: in cgroup mode the process's ``omnigent-<pid>-<start>`` cgroup
    is made on first use and removed when the last runtime of the process closes (it is
    left to the next start's sweep if something is stuck in it). Leaving the block
    cancels a probe still running in ``nursery`` and waits for it to end (its process
    killed; bounded), then removes this runtime's cgroup.
    """
    mode = _forced_mode(mode)
    trees = ProcessTrees()
    if mode is TreeMode.CGROUP:  # asked for: refused now if it cannot be had
        base = await _probe_base()
        if base is None:
            raise OSError("cgroup v2 is not available to this process")
        trees._decide(TreeMode.CGROUP, await _own_cgroup(base))
    elif mode is not None:
        trees._decide(mode)
    probing = trio.CancelScope()
    if nursery is None:
        await _probe(trees, probing)
    elif not trees._decided.is_set():
        nursery.start_soon(_probe, trees, probing, name="omnigent: process trees' cgroup probe")
    try:
        yield trees
    finally:
        probing.cancel()
        with trio.CancelScope(shield=True):
            await trees._decided.wait()  # the probe's own finally decides, however it ends
            if trees._base is not None:
                await _remove_own_cgroup(trees._base)


def _forced_mode(mode: TreeMode | None) -> TreeMode | None:
    """``mode``, else the one ``$OMNIGENT_PROCESS_TREES`` names, else ``None``.

    Raises:
        ValueError: the variable names no mode.
    """
    if mode is not None or not os.environ.get(MODE_VARIABLE):
        return mode
    raw = os.environ[MODE_VARIABLE]
    try:
        return TreeMode(raw)
    except ValueError:
        names = ", ".join(m.value for m in TreeMode)
        raise ValueError(f"${MODE_VARIABLE} must be one of {names}, not {raw!r}") from None


async def _probe(trees: ProcessTrees, scope: trio.CancelScope) -> None:
    """Decide the mode of ``trees``: a cgroup if this process can make them (after the
    sweep of what dead runtimes left), else the subreaper on Linux, else the group.

    Cancellation: through ``scope`` too (the trees' block ending); the mode is decided
    whatever happens — the fallback, if the probe failed or was cancelled — so nothing
    waits for it for ever.
    """
    linux = os.path.exists("/proc/self/stat")  # noqa: ASYNC240  # /proc: no disk I/O
    try:
        with scope:
            base = await _probe_base()
            if base is not None:
                trees._decide(TreeMode.CGROUP, await _own_cgroup(base))
    except OSError:
        log.warning("could not make this runtime's cgroup; using the subreaper", exc_info=True)
    finally:
        if not trees._decided.is_set():
            trees._decide(TreeMode.SUBREAPER if linux else TreeMode.GROUP)


async def _probe_base() -> Path | None:
    """:func:`~._cgroup.find_cgroup_base`, with its process run as a Trio child: a
    cancel kills it (and the probe cgroup is still removed)."""
    probe = await trio.to_thread.run_sync(cgroup.make_probe)
    if probe is None:
        return None
    try:
        with trio.move_on_after(cgroup.PROBE_TIMEOUT):
            done = await trio.run_process(
                probe.argv,
                check=False,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            return probe.base if done.returncode == 0 else None
        return None
    except OSError:
        return None
    finally:
        cgroup.remove_probe(probe.directory)  # one rmdir; the process has ended


async def _own_cgroup(base: Path) -> Path:
    """Sweep ``base``, then make this runtime's own cgroup under it.

    Raises:
        OSError: it could not be made.
    """
    await _sweep(base)
    start = process_start_time(os.getpid())
    own = base / f"{cgroup.PREFIX}{os.getpid()}-{start}"
    # Several runtimes of one process share it; each keys its sessions by id, and
    # command numbers are per runtime: a directory of its own per runtime too.
    own = own / f"r{time.monotonic_ns()}"
    await trio.to_thread.run_sync(lambda: own.mkdir(parents=True))
    return own


async def _remove_own_cgroup(own: Path) -> None:
    """End what is left in this runtime's cgroup, and remove it (and the process's, if
    this was its last runtime)."""
    if cgroup.populated(own):
        cgroup.kill_cgroup(own)
        with trio.move_on_after(_SIGKILL_WAIT):
            await _drained(own)
    await trio.to_thread.run_sync(cgroup.remove_cgroup, own)
    await trio.to_thread.run_sync(_remove_if_empty, own.parent)


def _make_cgroup(directory: Path) -> None:
    """Make ``session/<n>``; the session's cgroup may be removed (its last command
    ended) between making it and its child: then make both again."""
    for attempt in range(3):
        try:
            directory.mkdir(parents=True)
            return
        except FileNotFoundError:
            if attempt == 2:
                raise


def _remove_if_empty(directory: Path) -> None:
    with contextlib.suppress(OSError):  # another runtime of this process still uses it
        directory.rmdir()
