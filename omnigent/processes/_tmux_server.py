"""Terminals over tmux, the I/O part: one private tmux server per runtime.

A runtime's terminals are sessions of **one tmux server of its own**, on a socket in a
private directory: ``<tmp>/omnigent-terminals-<uid>/<rt id>/tmux.sock``, both
directories ``0700`` and owned by the user (anything else is refused, so no one else
can reach or plant the socket). Every tmux command runs through ``trio.run_process``
with a deadline and a bound on what it may print; none blocks the event loop.

Ownership and crash recovery: the runtime holds an ``flock`` on ``<dir>/lock`` for as
long as it runs. :func:`open_tmux_server` first sweeps the base directory for
directories whose lock nobody holds — their runtime died without closing — and kills
their server and every process in their panes. Directories are created and claimed
only under a lock on the base directory itself, so a sweep never takes a directory
that is still being set up. Leaving :func:`open_tmux_server` kills what is left of this
runtime's own server and removes its directory.

Error handling: a command that fails raises :class:`TmuxFailed` (``gone`` says whether
tmux reported the pane, session or server missing); no tmux binary, or a base
directory that is not private, raises :class:`TmuxUnavailable`.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import logging
import os
import shutil
import stat
import subprocess
import tempfile
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

import trio

from .._ids import new_id
from . import _tmux as tmux
from ._groups import kill_session

__all__ = ["TmuxFailed", "TmuxServer", "TmuxUnavailable", "default_base", "open_tmux_server"]

log = logging.getLogger(__name__)

COMMAND_TIMEOUT = 10.0
# A capture is at most HISTORY_LIMIT + PANE_HEIGHT rows of PANE_WIDTH cells; this
# leaves room for wide characters and still bounds a misbehaving tmux.
_OUTPUT_CAP = 8 << 20
_ERROR_CAP = 16 << 10
_MAX_SOCKET_PATH = 100  # sun_path is 108 bytes on Linux, 104 on BSDs


class TmuxUnavailable(Exception):
    """Terminals cannot run here: no tmux, or no private place for its socket."""


class TmuxFailed(Exception):
    """A tmux command failed; ``gone`` when the target (or the server) no longer exists."""

    def __init__(self, argv: Sequence[str], message: str) -> None:
        super().__init__(message)
        self.command = argv[0] if argv else "tmux"
        self.message = message
        self.gone = tmux.reports_gone(message)


def default_base() -> Path:
    """Where runtimes keep their tmux directories: ``<tmp>/omnigent-terminals-<uid>``.

    Under the temporary directory rather than ``$OMNIGENT_HOME``: a Unix socket path
    must be short, and a home deep in a project tree would not fit.
    """
    return Path(tempfile.gettempdir()) / f"omnigent-terminals-{os.getuid()}"


# -- private directories and their locks (blocking: run in a thread) --------------------


def _ensure_private(base: Path, *, create: bool) -> bool:
    """Make sure ``base`` is a directory only we can use; False if it does not exist.

    Raises:
        TmuxUnavailable: it is a symlink, not a directory, not ours, or open to others.
    """
    if create:
        with contextlib.suppress(FileExistsError):
            os.mkdir(base, 0o700)
    try:
        info = os.lstat(base)
    except FileNotFoundError:
        return False
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o077:
        raise TmuxUnavailable(
            f"{base} is not a private directory of this user (it must be a real "
            "directory with mode 0700); remove it or set TMPDIR elsewhere"
        )
    return True


@contextlib.contextmanager
def _locked(path: Path, *, wait: bool) -> Iterator[int | None]:
    """Hold ``flock`` on ``path`` (created if missing); yields None if it is taken."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield None
            return
        yield fd
    finally:
        os.close(fd)


def _make_private_dir(base: Path) -> tuple[Path, int]:
    """Create this runtime's directory and lock it; returns it and the held lock's fd."""
    _ensure_private(base, create=True)
    with _locked(base / ".lock", wait=True):
        directory = base / new_id("rt")
        os.mkdir(directory, 0o700)
        fd = os.open(directory / "lock", os.O_RDWR | os.O_CREAT, 0o600)
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # new: nobody else can hold it
        return directory, fd


def _claim_stale(base: Path) -> list[tuple[Path, int | None]]:
    """The directories under ``base`` whose runtime is gone, each with its lock now ours."""
    if not _ensure_private(base, create=False):
        return []
    claimed: list[tuple[Path, int | None]] = []
    with _locked(base / ".lock", wait=True):
        for entry in sorted(base.iterdir()):
            if entry.name.startswith(".") or not entry.is_dir() or entry.is_symlink():
                continue
            try:
                fd = os.open(entry / "lock", os.O_RDWR)
            except FileNotFoundError:
                # Directories are locked as they are made, under the base lock we
                # hold: one without a lock file was left half-made by a crash.
                claimed.append((entry, None))
                continue
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)  # its runtime is alive
                continue
            claimed.append((entry, fd))
    return claimed


def _remove_dir(directory: Path, fd: int | None) -> None:
    try:
        shutil.rmtree(directory, ignore_errors=True)
    finally:
        if fd is not None:
            os.close(fd)


# -- running tmux ------------------------------------------------------------------------


async def _read_capped(stream: trio.abc.ReceiveStream, into: bytearray, cap: int) -> None:
    async with stream:
        async for chunk in stream:
            room = cap - len(into)
            if room > 0:
                into += chunk[:room]
            # Past the cap, keep reading (and dropping) so the child is never blocked.


async def _run(argv: list[str], *, timeout: float, cap: int = _OUTPUT_CAP) -> str:
    """Run one tmux command with ``trio.run_process``; its stdout (at most ``cap`` bytes).

    Raises:
        TmuxFailed: it exited non-zero, or did not finish within ``timeout`` (it is
            killed).
        TmuxUnavailable: the binary cannot be run.

    Cancellation: the tmux client is killed and reaped before ``Cancelled`` goes on.
    """
    shown = argv[5:]  # after "tmux -f /dev/null -S <socket>"
    out, err = bytearray(), bytearray()
    run = functools.partial(
        trio.run_process,
        argv,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        check=False,
    )
    try:
        with trio.move_on_after(timeout) as deadline:
            async with trio.open_nursery() as nursery:
                proc: trio.Process = await nursery.start(run)
                assert proc.stdout is not None and proc.stderr is not None
                nursery.start_soon(_read_capped, proc.stdout, out, cap)
                nursery.start_soon(_read_capped, proc.stderr, err, _ERROR_CAP)
    except BaseExceptionGroup as group:
        cannot_start, rest = group.split(OSError)
        if cannot_start is None or rest is not None:
            raise
        raise TmuxUnavailable(f"cannot run {argv[0]}: {cannot_start.exceptions[0]}") from group
    if deadline.cancelled_caught:
        raise TmuxFailed(shown, f"tmux did not answer within {timeout:g} s")
    if proc.returncode != 0:
        message = err.decode("utf-8", errors="replace").strip()
        raise TmuxFailed(shown, message or f"tmux exited with status {proc.returncode}")
    return out.decode("utf-8", errors="replace")


class TmuxServer:
    """One runtime's private tmux server. Made by :func:`open_tmux_server`.

    The directory and socket are made on first use, so a runtime whose agents never
    open a terminal creates nothing. tmux starts its server with the first session
    and stops it when the last one ends; the socket path stays the same throughout.
    """

    def __init__(self, base: Path, binary: str | None, *, kill_grace: float = 2.0) -> None:
        self._base = base
        self._binary = binary
        self.kill_grace = kill_grace
        self._directory: Path | None = None
        self._lock_fd: int | None = None
        self._making = trio.Lock()
        self._closed = False

    @property
    def socket(self) -> Path | None:
        """The server's socket, once the first terminal has been started."""
        return None if self._directory is None else self._directory / "tmux.sock"

    async def _socket(self) -> Path:
        if self._binary is None:
            raise TmuxUnavailable(
                "terminals need tmux, which is not installed here (install the tmux package)"
            )
        if self._closed:
            raise TmuxUnavailable("the runtime is shutting down")
        async with self._making:
            if self._directory is None:
                directory, fd = await trio.to_thread.run_sync(_make_private_dir, self._base)
                self._directory, self._lock_fd = directory, fd
        socket = self._directory / "tmux.sock"
        if len(os.fsencode(socket)) > _MAX_SOCKET_PATH:
            raise TmuxUnavailable(
                f"the tmux socket path {socket} is too long; set TMPDIR to a shorter directory"
            )
        return socket

    async def run(self, argv: Sequence[str], *, timeout: float = COMMAND_TIMEOUT) -> str:
        """Run ``tmux <argv>`` against this server; returns what it printed.

        Raises:
            TmuxFailed, TmuxUnavailable: see the module docstring.
        """
        socket = await self._socket()
        assert self._binary is not None
        return await _run(
            [self._binary, "-f", os.devnull, "-S", str(socket), *argv], timeout=timeout
        )

    async def start_pane(
        self,
        session_name: str,
        cwd: Path,
        command: str,
        args: Sequence[str],
        env: Mapping[str, str],
    ) -> tmux.NewPane:
        """Start a detached tmux session ``session_name`` running ``command`` in ``cwd``."""
        printed = await self.run(tmux.new_session_argv(session_name, cwd, command, args, env))
        try:
            return tmux.parse_new_pane(printed)
        except ValueError as exc:
            raise TmuxFailed(["new-session"], str(exc)) from exc

    async def send_text(self, pane_id: str, text: str) -> None:
        """Type ``text`` literally into the pane.

        Raises:
            TmuxFailed, TmuxUnavailable: see the module docstring.
        """
        await self.run(tmux.send_text_argv(pane_id, text))

    async def send_keys(self, pane_id: str, keys: Sequence[str]) -> None:
        """Press the key names ``keys`` in the pane.

        Raises:
            TmuxFailed, TmuxUnavailable: see the module docstring.
        """
        await self.run(tmux.send_keys_argv(pane_id, keys))

    async def capture(self, pane_id: str, scrollback: int = 0) -> str:
        """The pane's visible rows, after up to ``scrollback`` history lines.

        Raises:
            TmuxFailed, TmuxUnavailable: see the module docstring.
        """
        return await self.run(tmux.capture_argv(pane_id, scrollback))

    async def kill_terminal(self, session_name: str, pane_pid: int | None) -> None:
        """End one terminal: its tmux session, and every process of its pane.

        Closing the session hangs up the pane (SIGHUP, as closing a terminal window
        does); whatever survives that gets SIGTERM and, after ``kill_grace``, SIGKILL.
        ``pane_pid`` may be unknown (a launch cancelled before tmux answered): it is
        looked up by the session's name.

        Cancellation: shielded, and bounded by the command timeout plus the grace.
        """
        with trio.CancelScope(shield=True):
            pids = [] if pane_pid is None else [pane_pid]
            with contextlib.suppress(TmuxFailed, TmuxUnavailable):
                if pane_pid is None:
                    printed = await self.run(tmux.list_panes_argv(session_name))
                    pids = tmux.parse_pane_pids(printed)
                await self.run(tmux.kill_session_argv(session_name))
            async with trio.open_nursery() as nursery:
                for pid in pids:
                    nursery.start_soon(functools.partial(kill_session, pid, grace=self.kill_grace))

    async def aclose(self) -> None:
        """Kill the server and every pane left in it, and remove the directory.

        Idempotent. Cancellation: shielded and bounded.
        """
        self._closed = True
        directory, fd = self._directory, self._lock_fd
        self._directory = self._lock_fd = None
        if directory is None:
            return
        with trio.CancelScope(shield=True):
            await _retire(self._binary, directory, fd, self.kill_grace)


async def _retire(binary: str | None, directory: Path, fd: int | None, grace: float) -> None:
    """Kill the server on ``directory``'s socket and its panes' processes; remove it."""
    socket = directory / "tmux.sock"
    if binary is not None and await trio.to_thread.run_sync(socket.exists):
        base = [binary, "-f", os.devnull, "-S", str(socket)]
        pids: list[int] = []
        with contextlib.suppress(TmuxFailed, TmuxUnavailable):
            pids = tmux.parse_pane_pids(
                await _run([*base, *tmux.list_panes_argv()], timeout=COMMAND_TIMEOUT)
            )
        with contextlib.suppress(TmuxFailed, TmuxUnavailable):
            await _run([*base, "kill-server"], timeout=COMMAND_TIMEOUT)
        async with trio.open_nursery() as nursery:
            for pid in pids:
                nursery.start_soon(functools.partial(kill_session, pid, grace=grace))
    await trio.to_thread.run_sync(_remove_dir, directory, fd)


async def sweep_stale(base: Path, binary: str | None, *, grace: float = 2.0) -> int:
    """Kill the servers (and pane processes) of runtimes that died without closing.

    Returns how many directories were swept. A base directory that is not private is
    left alone (and logged): nothing in it can be trusted to be ours.
    """
    try:
        claimed = await trio.to_thread.run_sync(_claim_stale, base)
    except (TmuxUnavailable, OSError) as exc:
        log.warning("not sweeping stale terminals in %s: %s", base, exc)
        return 0
    for directory, fd in claimed:
        log.warning("killing terminals left by a runtime that did not close (%s)", directory)
        await _retire(binary, directory, fd, grace)
    return len(claimed)


@asynccontextmanager
async def open_tmux_server(
    base: Path | None = None, *, binary: str | None = None, kill_grace: float = 2.0
) -> AsyncIterator[TmuxServer]:
    """A runtime's tmux server: stale servers swept first, its own killed at exit.

    Args:
        base: the directory holding the runtimes' tmux directories (default:
            :func:`default_base`).
        binary: the tmux executable (default: ``tmux`` on ``PATH``; none found means
            terminal launches answer that tmux is missing).
        kill_grace: seconds between SIGTERM and SIGKILL for a pane's processes.

    Cancellation: the sweep and the final cleanup are shielded and bounded.
    """
    base = default_base() if base is None else base
    binary = binary or await trio.to_thread.run_sync(shutil.which, "tmux")
    with trio.CancelScope(shield=True):
        await sweep_stale(base, binary, grace=kill_grace)
    server = TmuxServer(base, binary, kill_grace=kill_grace)
    try:
        yield server
    finally:
        await server.aclose()
