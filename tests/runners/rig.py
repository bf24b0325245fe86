"""Runners as separate processes, each in its own folder, against a real server.

:func:`start_runner` runs ``omnigent runner`` as a subprocess in its own session (its
process group is its own), with its own ``$OMNIGENT_HOME`` and workspace under the
test's folder — never the server's. Its stderr lines (one per connection made, lost or
failed) are read as they come, so a test waits for one (:meth:`Runner.wait_for_line`)
instead of sleeping. The server side is :mod:`tests.reliability.serve_rig`, started
with a runner token.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import trio

from ..reliability.serve_rig import ROOT, Served, server_env, start

TOKEN = "runner-token-for-tests-0123456789"


async def start_server(root: Path, *extra: str, port: int = 0) -> Served:
    """``omnigent serve`` accepting runners with :data:`TOKEN` (and ``extra`` options)."""
    return await start(root, port=port, extra=["--runner-token", TOKEN, *extra])


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
            await self._changed.wait()

    async def exit_code(self) -> int:
        await self.ended.wait()
        return await self.process.wait()

    async def stop(self, timeout: float = 15) -> None:
        """SIGINT, as a person would; it must end cleanly."""
        if self.process.returncode is None:
            self.process.send_signal(signal.SIGINT)
        with trio.move_on_after(timeout) as late:
            await self.process.wait()
        if late.cancelled_caught:
            self.process.kill()
            await self.process.wait()
            raise AssertionError(f"runner {self.name} ignored SIGINT: {self.lines}")

    def kill_9(self) -> None:
        os.kill(self.process.pid, signal.SIGKILL)


class Runners:
    """The runners of one test; whatever still runs when the test ends is killed."""

    def __init__(self, nursery: trio.Nursery) -> None:
        self.nursery = nursery
        self.started: list[Runner] = []

    async def start(self, root: Path, url: str, name: str, *extra: str, **how: Any) -> Runner:
        runner = await start_runner(self.nursery, root, url, name, *extra, **how)
        self.started.append(runner)
        return runner

    async def kill_all(self) -> None:
        for runner in self.started:
            if runner.process.returncode is None:
                runner.process.kill()
            await runner.process.wait()


@asynccontextmanager
async def open_runners() -> AsyncIterator[Runners]:
    """A nursery for runner processes; leaving it kills those still running."""
    async with trio.open_nursery() as nursery:
        runners = Runners(nursery)
        try:
            yield runners
        finally:
            with trio.CancelScope(shield=True):
                await runners.kill_all()


async def start_runner(
    nursery: trio.Nursery,
    root: Path,
    url: str,
    name: str,
    *extra: str,
    token: str = TOKEN,
    wait: bool = True,
) -> Runner:
    """Start ``omnigent runner`` in ``root`` (its home and workspace are made there).

    With ``wait``, returns once it says it is connected.
    """
    (root / "home").mkdir(parents=True, exist_ok=True)
    (root / "workspace").mkdir(parents=True, exist_ok=True)
    env = server_env(root)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *sys.path])
    command = [sys.executable, "-m", "omnigent", "runner", "--server", url, "--token", token]
    command += ["--name", name, "--workspace", str(root / "workspace"), *extra]
    process = await trio.lowlevel.open_process(
        command,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=env,
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
