"""The harness process manager: child processes owned by the runtime, and nothing else.

:func:`open_process_manager` is opened by ``open_runtime`` and owns a nursery in which
every harness process lives. A process is spawned with :meth:`ProcessManager.spawn`:

* in its **own process group** (``start_new_session``), so a signal reaches whatever
  it started too;
* under a **key** (the conversation id for external harnesses): one live process per
  key, found again with :meth:`ProcessManager.get` and reused for later turns;
* with a **pid file** in the runtime's ``$OMNIGENT_HOME/run/processes`` directory,
  naming the process, its group, its start time and the runtime that owns it. At
  start, :meth:`ProcessManager.sweep_orphans` signals the groups a crashed runtime
  left behind — only when the pid still names the *same* process (its start time in
  ``/proc`` matches), so a recycled pid is never signalled;
* ended by :meth:`ManagedProcess.terminate`: SIGTERM to the group, SIGKILL after a
  grace period. Leaving the manager terminates every process it owns; a process whose
  task is cancelled (shutdown) is terminated the same way, shielded and bounded.

An optional **idle reaper** terminates processes that have been idle longer than
``idle_timeout`` — never one that is in use (:meth:`ManagedProcess.in_use`, held for
the length of a turn). Sockets for processes that serve on a Unix socket live in a
private ``0700`` directory (:meth:`ProcessManager.socket_path`, made on first use),
removed on close — and, after a crash, by the next start (:mod:`._socket_dirs`).

This is the shared machinery of every harness that runs a child process (external
harnesses, and native coding agents): it knows nothing about what the process speaks.
Spawn-time and exit-time behaviour is given by the caller (``ProcessSpec.stdin`` /
``stdout`` pipes, ``ManagedProcess.exited``), health checks are the caller's too.

Resource handling: no process outlives the manager; a process's stderr is kept as a
bounded tail (:meth:`ManagedProcess.stderr_tail`) and otherwise discarded.
"""

from __future__ import annotations

import logging
import math
import os
import signal
import subprocess
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import attrs
import trio

from ._pid_files import PidFiles, killpg
from ._procfs import process_start_time
from ._socket_dirs import SocketDir, sweep_socket_dirs

if TYPE_CHECKING:
    from .sandbox import SandboxPolicy

__all__ = [
    "DEFAULT_GRACE",
    "DEFAULT_IDLE_TIMEOUT",
    "ManagedProcess",
    "ProcessManager",
    "ProcessSpec",
    "open_process_manager",
    "process_start_time",
]

log = logging.getLogger(__name__)

DEFAULT_GRACE = 5.0
DEFAULT_IDLE_TIMEOUT = 3600.0
_STDERR_TAIL = 8192


@attrs.frozen
class ProcessSpec:
    """What to run.

    Attributes:
        argv: the command; ``argv[0]`` is looked up on ``env["PATH"]``.
        env: the *whole* environment of the child (nothing is inherited).
        key: one live process per key (``None``: not tracked for reuse).
        cwd: the working directory (default: the runtime's).
        pipes: give the caller ``stdin`` / ``stdout`` pipes (stdio protocols);
            otherwise stdin is ``/dev/null`` and stdout is discarded. The caller
            closes ``stdout`` when done reading it.
        idle_reap: whether the idle reaper may end this process.
        info: the owner's notes about the process (a socket path, a token), kept so a
            later owner can find its way back to it; never given to the child.
        session_id: the session the process serves, if it must not outlive that
            session's work: :meth:`ProcessManager.terminate_session` ends it when the
            session is stopped or deleted (native coding agents). ``None``: it lives
            until reaped, replaced or shut down (external harnesses).
        sandbox: the sandbox the process runs in (``os_env.sandbox``, widened by the
            spawner for what the process itself needs); its environment is then the
            sandbox's minimal one plus what ``env`` sets beyond the runtime's own
            basics. The sandbox (its egress proxy) is open as long as the process runs.
    """

    argv: tuple[str, ...]
    env: Mapping[str, str] = attrs.field(factory=dict, hash=False, repr=False)
    key: str | None = None
    cwd: Path | None = None
    pipes: bool = False
    idle_reap: bool = True
    info: Mapping[str, str] = attrs.field(factory=dict, hash=False, repr=False)
    session_id: str | None = None
    sandbox: SandboxPolicy | None = None


class ManagedProcess:
    """A child process owned by a :class:`ProcessManager`. Made by ``spawn``."""

    def __init__(self, spec: ProcessSpec, process: trio.Process, pid_file: Path | None) -> None:
        self.spec = spec
        self.pid = process.pid
        self.returncode: int | None = None
        self.exited = trio.Event()
        self.stdin = process.stdin
        self.stdout = process.stdout
        self._process = process
        self._pid_file = pid_file
        self._stderr = bytearray()
        self._users = 0
        self.last_used = trio.current_time()
        self._terminating = False
        # The spawner's live state tied to this very process (a stdio protocol's
        # reader, with what it has buffered), found again by a later owner through
        # ProcessManager.get; it goes away with the process.
        self.owner_state: object = None

    @property
    def alive(self) -> bool:
        return not self.exited.is_set()

    @property
    def busy(self) -> bool:
        """Whether someone holds :meth:`in_use` (a turn is in flight)."""
        return self._users > 0

    @contextmanager
    def in_use(self) -> Iterator[None]:
        """Hold the process: the idle reaper leaves it alone until the block exits."""
        self._users += 1
        self.last_used = trio.current_time()
        try:
            yield
        finally:
            self._users -= 1
            self.last_used = trio.current_time()

    def stderr_tail(self, limit: int = 2000) -> str:
        """The last ``limit`` characters the process wrote to stderr."""
        return self._stderr.decode("utf-8", "replace")[-limit:].strip()

    def describe_exit(self) -> str:
        """``exited with code N`` / ``was killed by SIGKILL``, and its stderr tail."""
        code = self.returncode
        if code is None:
            what = "is still running"
        elif code < 0:
            what = f"was killed by {signal.Signals(-code).name}"
        else:
            what = f"exited with code {code}"
        tail = self.stderr_tail()
        return f"{what}; stderr: {tail}" if tail else what

    def signal_group(self, signum: int) -> None:
        """Send ``signum`` to the process group (nothing if it is gone)."""
        killpg(self.pid, signum)

    async def terminate(self, grace: float = DEFAULT_GRACE) -> None:
        """SIGTERM the group, SIGKILL it after ``grace`` seconds; wait for the exit.

        Cancellation: shielded — once asked, the process is ended before this returns
        (bounded by ``grace`` plus the kill).
        """
        with trio.CancelScope(shield=True):
            if self.alive:
                self._terminating = True
                self.signal_group(signal.SIGTERM)
                with trio.move_on_after(grace):
                    await self.exited.wait()
            if self.alive:
                self.signal_group(signal.SIGKILL)
            await self.exited.wait()

    # -- the task that owns it -------------------------------------------------------

    async def _run(self) -> None:
        """Wait for the process, collecting stderr; terminate it if cancelled."""
        try:
            async with trio.open_nursery() as nursery:
                if self._process.stderr is not None:
                    nursery.start_soon(self._read_stderr, self._process.stderr)
                await self._process.wait()
        finally:
            with trio.CancelScope(shield=True):
                if self._process.returncode is None:
                    await self._kill_after_cancel()
                self.returncode = self._process.returncode
                # Whatever the leader left in its group goes with it.
                self.signal_group(signal.SIGKILL)
                # stdout stays open for its reader to drain (it closes it); nobody can
                # write to a dead process, and stderr was ours.
                for stream in (self._process.stdin, self._process.stderr):
                    if stream is not None:
                        await stream.aclose()
                if self._pid_file is not None:
                    await trio.to_thread.run_sync(
                        lambda: self._pid_file.unlink(missing_ok=True)  # type: ignore[union-attr]
                    )
                self.exited.set()

    async def _kill_after_cancel(self) -> None:
        self.signal_group(signal.SIGTERM)
        with trio.move_on_after(DEFAULT_GRACE):
            await self._process.wait()
        if self._process.returncode is None:
            self.signal_group(signal.SIGKILL)
            await self._process.wait()

    async def _read_stderr(self, stream: trio.abc.ReceiveStream) -> None:
        async for chunk in stream:
            self._stderr += chunk
            if len(self._stderr) > _STDERR_TAIL:
                del self._stderr[: len(self._stderr) - _STDERR_TAIL]


class ProcessManager:
    """The runtime's child processes. Made by :func:`open_process_manager`."""

    def __init__(
        self,
        nursery: trio.Nursery,
        *,
        sockets: SocketDir,
        pid_dir: Path,
        grace: float,
        idle_timeout: float,
    ) -> None:
        self._nursery = nursery
        self._sockets = sockets
        self.pid_dir = pid_dir
        self.grace = grace
        self.idle_timeout = idle_timeout
        self._by_key: dict[str, ManagedProcess] = {}
        self._all: set[ManagedProcess] = set()
        self._closing = False
        self._pid_files = PidFiles(pid_dir, (os.getpid(), process_start_time(os.getpid())))

    # -- spawning and finding ----------------------------------------------------------

    @property
    def socket_dir(self) -> Path | None:
        """The private socket directory (None until the first :meth:`socket_path`)."""
        return self._sockets.path

    async def socket_path(self, name: str) -> Path:
        """A path in the private socket directory (``name`` must be a plain file name).

        The directory is made on first use.
        """
        if not name or "/" in name or name.startswith("."):
            raise ValueError(f"not a plain socket name: {name!r}")
        return await self._sockets.ensure() / name

    def get(self, key: str) -> ManagedProcess | None:
        """The live process spawned under ``key``, if any."""
        process = self._by_key.get(key)
        return process if process is not None and process.alive else None

    @property
    def processes(self) -> list[ManagedProcess]:
        """Every live process."""
        return [p for p in self._all if p.alive]

    async def spawn(self, spec: ProcessSpec) -> ManagedProcess:
        """Start ``spec`` in its own process group, owned by the manager's nursery.

        A live process already under ``spec.key`` is terminated first. With
        ``spec.sandbox`` it starts inside it (see :class:`ProcessSpec`).

        Raises:
            RuntimeError: the manager is closing.
            OSError: the command could not be started (not found, not executable).
            SandboxUnavailable: its sandbox cannot be created here (nothing started).
        """
        if self._closing:
            raise RuntimeError("the process manager is closing")
        if spec.key is not None and (old := self.get(spec.key)) is not None:
            await old.terminate(self.grace)
        if spec.sandbox is not None:
            managed: ManagedProcess = await self._nursery.start(self._own_sandboxed, spec)
            return managed
        managed = await self._open(spec, spec.argv, spec.env)
        self._nursery.start_soon(self._own, managed, name=f"process {managed.pid}")
        return managed

    async def _open(
        self, spec: ProcessSpec, argv: Sequence[str], env: Mapping[str, str]
    ) -> ManagedProcess:
        """Start the process (its own group, its pid file) and register it."""
        process = await trio.lowlevel.open_process(
            list(argv),
            env=dict(env),
            cwd=spec.cwd,
            stdin=subprocess.PIPE if spec.pipes else subprocess.DEVNULL,
            stdout=subprocess.PIPE if spec.pipes else subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        pid_file = await trio.to_thread.run_sync(self._write_pid_file, process.pid, spec)
        managed = ManagedProcess(spec, process, pid_file)
        self._all.add(managed)
        if spec.key is not None:
            self._by_key[spec.key] = managed
        return managed

    async def _own_sandboxed(
        self, spec: ProcessSpec, *, task_status: trio.TaskStatus[ManagedProcess]
    ) -> None:
        """Start ``spec`` inside its sandbox and own it; the sandbox stays open (its
        egress proxy serving the process) until the process is gone."""
        assert spec.sandbox is not None
        from .sandbox import open_sandbox  # with the first sandboxed process

        async with open_sandbox(spec.sandbox) as box:
            cwd = spec.cwd or Path.cwd()
            launch = await box.wrap(spec.argv, cwd=cwd, env=_own_variables(spec.env))
            managed = await self._open(spec, launch.argv, launch.env or {})
            task_status.started(managed)
            await self._own(managed)

    async def _own(self, managed: ManagedProcess) -> None:
        try:
            await managed._run()
        finally:
            self._all.discard(managed)
            key = managed.spec.key
            if key is not None and self._by_key.get(key) is managed:
                del self._by_key[key]

    def _write_pid_file(self, pid: int, spec: ProcessSpec) -> Path | None:
        return self._pid_files.write(pid, spec.argv, spec.key)

    # -- ending ----------------------------------------------------------------------

    async def terminate_all(self) -> None:
        """Terminate every process (concurrently), each within the grace period."""
        async with trio.open_nursery() as nursery:
            for process in self.processes:
                nursery.start_soon(process.terminate, self.grace)

    async def terminate_session(self, session_id: str) -> int:
        """Terminate (concurrently) every process spawned for ``session_id``.

        Returns how many were asked to end. Called by the runtime when a session is
        stopped or deleted, after its work has ended.
        """
        doomed = [p for p in self.processes if p.spec.session_id == session_id]
        async with trio.open_nursery() as nursery:
            for process in doomed:
                nursery.start_soon(process.terminate, self.grace)
        return len(doomed)

    async def reap_idle(self) -> int:
        """Terminate reapable processes idle for longer than ``idle_timeout``.

        Returns how many were terminated. A process in use is never reaped.
        """
        now = trio.current_time()
        idle = [
            p
            for p in self.processes
            if p.spec.idle_reap and not p.busy and now - p.last_used >= self.idle_timeout
        ]
        for process in idle:
            log.info("reaping idle process %s (%s)", process.pid, process.spec.key)
            await process.terminate(self.grace)
        return len(idle)

    async def run_reaper(self, interval: float | None = None) -> None:
        """Reap idle processes every ``interval`` seconds (default: a tenth of the timeout)."""
        if not math.isfinite(self.idle_timeout) or self.idle_timeout <= 0:
            await trio.sleep_forever()
        every = interval if interval is not None else max(self.idle_timeout / 10, 0.01)
        while True:
            await trio.sleep(every)
            await self.reap_idle()

    # -- orphans ---------------------------------------------------------------------

    async def sweep_orphans(self) -> int:
        """Signal what a crashed runtime left: returns how many groups were signalled.

        For each pid file in ``pid_dir`` whose owning runtime is gone: if its pid is
        still the same process (same start time), SIGTERM its group, SIGKILL after
        the grace; then remove the file. Files of a live runtime are left alone.
        """
        return await self._pid_files.sweep(self.grace)


@asynccontextmanager
async def open_process_manager(
    home: Path,
    *,
    grace: float = DEFAULT_GRACE,
    idle_timeout: float = DEFAULT_IDLE_TIMEOUT,
    reap_interval: float | None = None,
    sweep: bool = True,
) -> AsyncIterator[ProcessManager]:
    """Own the runtime's child processes for the length of the block.

    Args:
        home: ``$OMNIGENT_HOME``; pid files live in ``home/run/processes``.
        grace: seconds between SIGTERM and SIGKILL.
        idle_timeout: seconds a reapable process may stay unused (``inf`` or ``0``:
            never reaped).
        reap_interval: how often the reaper looks (default: a tenth of the timeout).
        sweep: end orphans of crashed runtimes before yielding, and remove the
            socket directories they left (:mod:`._socket_dirs`).

    Cancellation: leaving the block, however, terminates every process (shielded,
    bounded by ``grace``) and removes the socket directory.
    """
    pid_dir = home / "run" / "processes"  # made on the first spawn
    sockets = SocketDir(home, (os.getpid(), process_start_time(os.getpid())))
    try:
        async with trio.open_nursery() as nursery:
            manager = ProcessManager(
                nursery,
                sockets=sockets,
                pid_dir=pid_dir,
                grace=grace,
                idle_timeout=idle_timeout,
            )
            if sweep:
                await manager.sweep_orphans()
                await sweep_socket_dirs(home)
            nursery.start_soon(manager.run_reaper, reap_interval, name="idle process reaper")
            try:
                yield manager
            finally:
                manager._closing = True
                with trio.CancelScope(shield=True):
                    await manager.terminate_all()
                nursery.cancel_scope.cancel()
    finally:
        await sockets.aclose()


def _own_variables(env: Mapping[str, str]) -> dict[str, str]:
    """What a sandboxed process's ``env`` sets beyond the runtime's own ``HOME`` and
    ``TMPDIR`` (those are the sandbox's: the home an empty private tmpfs, ``/tmp``)."""
    return {
        name: value
        for name, value in env.items()
        if not (name in ("HOME", "TMPDIR") and value == os.environ.get(name))
    }


def base_environment(names: Sequence[str] = ()) -> dict[str, str]:
    """The non-secret basics a child needs from this process's environment.

    ``PATH``, ``HOME``, locale, time zone, temp dir and user names — plus ``names``.
    Nothing else of the server's environment (API keys, tokens) reaches a child.
    """
    keep = ("PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR", "USER", "LOGNAME")
    return {k: os.environ[k] for k in (*keep, *names) if k in os.environ}
