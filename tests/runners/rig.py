"""Runners as separate processes, each in its own folder, against a real server.

:func:`start_runner` runs ``omnigent runner`` as a subprocess in its own session (its
process group is its own), with its own ``$OMNIGENT_HOME`` and workspace under the
test's folder — never the server's. Its stderr lines (one per connection made, lost or
failed) are read as they come, so a test waits for one (:meth:`Runner.wait_for_line`)
instead of sleeping. The server side is :mod:`tests.reliability.serve_rig`, started
with a runner token.

When a test ends, :func:`open_runners` stops the runners still running as their
operator would (SIGTERM, which must end them within :data:`STOP_TIMEOUT`) and then
checks that no tmux server of theirs is left (:func:`pane_servers`): a runner that
shuts down ends its panes and its pane server. A runner the test killed outright
leaves its server to the next runner on the same home (its sweep); a test that kills
one must start that next runner, or the check fails.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import trio

from omnigent.processes._tmux_server import sweep_stale
from omnigent.runner._place import tmux_base

from ..reliability.serve_rig import ROOT, Served, server_env, start

TOKEN = "runner-token-for-tests-0123456789"
STOP_TIMEOUT = 15.0
"""How long a runner may take to stop on SIGINT/SIGTERM (its grace, with room)."""


async def start_server(
    root: Path, *extra: str, port: int = 0, env: Mapping[str, str] | None = None
) -> Served:
    """``omnigent serve`` accepting runners with :data:`TOKEN` (and ``extra`` options,
    ``env`` variables)."""
    return await start(root, port=port, extra=["--runner-token", TOKEN, *extra], env=env)


@attrs.define(eq=False)
class Runner:
    """One ``omnigent runner`` process and the folders it lives in."""

    root: Path
    name: str
    process: trio.Process
    lines: list[str] = attrs.field(factory=list)
    _changed: trio.Event = attrs.field(factory=trio.Event)
    ended: trio.Event = attrs.field(factory=trio.Event)

    @property
    def workspace(self) -> Path:
        return self.root / "workspace"

    @property
    def home(self) -> Path:
        return self.root / "home"

    async def read_stderr(self) -> None:
        assert self.process.stderr is not None
        pending = b""
        async for chunk in self.process.stderr:
            pending += chunk
            *complete, pending = pending.split(b"\n")
            for line in complete:
                self.lines.append(line.decode(errors="replace"))
            self._changed.set()
            self._changed = trio.Event()
        if pending:
            self.lines.append(pending.decode(errors="replace"))
        self.ended.set()
        self._changed.set()

    async def wait_for_line(self, text: str, *, after: int = 0) -> int:
        """The index of the first line from ``after`` on that contains ``text``."""
        while True:
            for index in range(after, len(self.lines)):
                if text in self.lines[index]:
                    return index
            if self.ended.is_set():
                raise AssertionError(f"runner {self.name} ended: {self.lines}")
            try:
                await self._changed.wait()
            except trio.Cancelled:
                print(f"runner {self.name} was waiting for {text!r}; said {self.lines}")
                raise

    async def exit_code(self) -> int:
        await self.ended.wait()
        return await self.process.wait()

    async def stop(self, timeout: float = STOP_TIMEOUT, how: int = signal.SIGINT) -> None:
        """SIGINT (as a person would), or ``how``; it must end cleanly."""
        if self.process.returncode is None:
            self.process.send_signal(how)
        with trio.move_on_after(timeout) as late:
            await self.process.wait()
        if late.cancelled_caught:
            self.process.kill()
            await self.process.wait()
            raise AssertionError(f"runner {self.name} ignored SIGINT: {self.lines}")

    async def kill_9(self) -> None:
        """``SIGKILL`` the runner, and reap it (a zombie would still count as alive to
        the next runner's sweep, as to any ``/proc`` reader)."""
        os.kill(self.process.pid, signal.SIGKILL)
        assert await self.process.wait() == -signal.SIGKILL


def processes_where(match: Callable[[list[bytes]], bool]) -> list[int]:
    """The live processes (zombies aside) whose command line ``match`` accepts."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            state = (entry / "stat").read_text().rpartition(")")[2].split()[0]
        except (OSError, IndexError):
            continue  # exited while we looked
        if state != "Z" and match(argv):
            found.append(int(entry.name))
    return found


def pane_servers(home: Path) -> list[int]:
    """The tmux processes (the pane server, and any client of it) on the socket of the
    runner whose home is ``home`` (:func:`~omnigent.runner._place.tmux_base`)."""
    base = os.fsencode(tmux_base(home)) + b"/"
    return processes_where(
        lambda argv: (
            os.path.basename(argv[0]) == b"tmux" and any(arg.startswith(base) for arg in argv)
        )
    )


async def wait_for_no_pane_server(home: Path, within: float = 5.0) -> None:
    """Return once no tmux process of the runner in ``home`` is left.

    Polled (a server told to go exits on its own time, a moment after its client
    returns), and bounded: still there after ``within`` seconds fails.
    """
    with trio.move_on_after(within):
        while pane_servers(home):
            await trio.sleep(0.02)
        return
    raise AssertionError(f"tmux server(s) {pane_servers(home)} of the runner in {home} are left")


class Runners:
    """The runners of one test; whatever still runs when the test ends is stopped."""

    def __init__(self, nursery: trio.Nursery) -> None:
        self.nursery = nursery
        self.started: list[Runner] = []

    async def start(self, root: Path, url: str, name: str, *extra: str, **how: Any) -> Runner:
        runner = await start_runner(self.nursery, root, url, name, *extra, **how)
        self.started.append(runner)
        return runner

    async def end_all(self) -> list[str]:
        """Stop every runner still running with SIGTERM (SIGKILL for one that ignores
        it); what went wrong: a runner that did not stop, a pane server left behind
        (then ended here as the next runner's sweep would, with its panes, so that no
        test leaves one on the machine)."""
        problems = []
        for runner in self.started:
            try:
                await runner.stop(how=signal.SIGTERM)
            except AssertionError as late:
                problems.append(str(late))
        for home in {runner.home for runner in self.started}:
            try:
                await wait_for_no_pane_server(home)
            except AssertionError as left:
                problems.append(str(left))
                await sweep_stale(tmux_base(home), shutil.which("tmux"))
        return problems


@asynccontextmanager
async def open_runners() -> AsyncIterator[Runners]:
    """A nursery for runner processes; leaving it stops those still running (SIGTERM),
    and fails the test if one does not stop or leaves a tmux server behind."""
    problems: list[str] = []
    async with trio.open_nursery() as nursery:
        runners = Runners(nursery)
        try:
            yield runners
        finally:
            print(runner_lines(runners.started))  # shown when the test fails
            with trio.CancelScope(shield=True):
                problems = await runners.end_all()
    # Reached only when the test passed: a failure in flight says more.
    if problems:
        raise AssertionError("; ".join(problems))


async def start_runner(
    nursery: trio.Nursery,
    root: Path,
    url: str,
    name: str,
    *extra: str,
    token: str = TOKEN,
    wait: bool = True,
    env: Mapping[str, str] | None = None,
) -> Runner:
    """Start ``omnigent runner`` in ``root`` (its home and workspace are made there).

    With ``wait``, returns once it says it is connected.
    """
    (root / "home").mkdir(parents=True, exist_ok=True)
    (root / "workspace").mkdir(parents=True, exist_ok=True)
    variables = {**server_env(root), **(env or {})}
    variables["PYTHONPATH"] = os.pathsep.join([str(ROOT), *sys.path])
    verbose = ["-vv"] if os.environ.get("RUNNER_DEBUG") else []
    command = [
        sys.executable,
        "-m",
        "omnigent",
        *verbose,
        "runner",
        "--server",
        url,
        "--token",
        token,
    ]
    command += ["--name", name, "--workspace", str(root / "workspace"), *extra]
    process = await trio.lowlevel.open_process(
        command,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=variables,
        cwd=root / "workspace",
        start_new_session=True,
    )
    runner = Runner(root, name, process)
    nursery.start_soon(runner.read_stderr)
    if wait:
        await runner.wait_for_line("connected to")
    return runner


def runner_lines(runners: Sequence[Runner]) -> str:
    return "\n".join(f"{r.name}: {line}" for r in runners for line in r.lines)


class CuttableProxy:
    """A TCP proxy on loopback whose connections can all be cut at once: a network
    blip between a runner and its server (both processes live on)."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.port = 0
        self.cuts = 0
        self._scopes: set[trio.CancelScope] = set()
        self.connections = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        self.port = listeners[0].socket.getsockname()[1]
        task_status.started()
        await trio.serve_listeners(self._relay, listeners)

    def cut(self) -> None:
        """Close every connection through the proxy (new ones are accepted)."""
        self.cuts += 1
        for scope in list(self._scopes):
            scope.cancel()

    async def _relay(self, client: trio.SocketStream) -> None:
        self.connections += 1
        with trio.CancelScope() as scope:
            self._scopes.add(scope)
            try:
                up = await trio.open_tcp_stream("127.0.0.1", self.target_port)
                async with client, up, trio.open_nursery() as nursery:
                    nursery.start_soon(_copy, client, up, nursery.cancel_scope)
                    nursery.start_soon(_copy, up, client, nursery.cancel_scope)
            finally:
                self._scopes.discard(scope)


async def _copy(source: trio.SocketStream, sink: trio.SocketStream, done: trio.CancelScope) -> None:
    try:
        async for chunk in source:
            await sink.send_all(chunk)
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        pass
    done.cancel()
