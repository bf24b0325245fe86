"""A real ``omnigent serve`` to kill: started in its own session, frozen, killed, restarted.

:class:`Served` runs the server as a subprocess on loopback with its own SQLite file,
``$OMNIGENT_HOME`` and agents folder, in its own session (so its process group is its
own, not the test's). :func:`kill_9` freezes it with ``SIGSTOP`` — so the snapshot of
its process tree is exact: nothing new starts — and then ``SIGKILL``\\s it, reaping it
(a killed server is reaped by whoever ran it; a zombie would still count as the owner
of its harness processes). A restart binds the same port, so a client's SSE stream
resumes against it with ``Last-Event-ID``.

:class:`Watch` is a client's view of one session: an :class:`omnigent.client`
``EventStream`` read for the length of the test (it reconnects across the kill), and
a way to wait for a condition on what it has seen — without sleeping.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import trio

from omnigent.client import OmnigentClient
from omnigent.model import TERMINAL_STATUSES, Event, SessionStatusChanged

from .procs import Proc, descendants

ROOT = Path(__file__).resolve().parents[2]


@attrs.define(eq=False)
class Served:
    """One ``omnigent serve`` process and the folders it lives in."""

    root: Path
    process: trio.Process
    url: str
    port: int
    log: Path

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def db_path(self) -> Path:
        return self.root / "omnigent.db"


def server_env(root: Path) -> dict[str, str]:
    """The server's environment: its own home, no model key, the test's Python path."""
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG", "TMPDIR", "USER")}
    env |= {
        "HOME": str(root / "home"),
        "OMNIGENT_HOME": str(root / "home"),
        "OPENAI_BASE_URL": "http://127.0.0.1:9/v1",
        "OPENAI_API_KEY": "none",
        "PYTHONPATH": os.pathsep.join([str(ROOT), *sys.path]),
    }
    return env


def write_agents(root: Path, specs: Sequence[dict[str, Any]]) -> None:
    """The ``--agents`` folder: one JSON file per spec."""
    folder = root / "agents"
    folder.mkdir(parents=True, exist_ok=True)
    for spec in specs:
        (folder / f"{spec['name']}.json").write_text(json.dumps(spec))


async def start(
    root: Path,
    *,
    port: int = 0,
    log_name: str = "server.log",
    extra: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
) -> Served:
    """Start ``omnigent serve`` on ``root/omnigent.db``; returns once it listens.

    ``extra``: more ``serve`` options (``--runner-token …``); ``env``: more variables.
    """
    (root / "home").mkdir(parents=True, exist_ok=True)
    (root / "agents").mkdir(exist_ok=True)
    command = [sys.executable, "-m", "omnigent", "serve", "--port", str(port)]
    command += ["--db", f"sqlite:///{root / 'omnigent.db'}", "--agents", str(root / "agents")]
    command += ["--shutdown-grace", "2", *extra]
    log = root / log_name
    with log.open("ab") as stderr:
        process = await trio.lowlevel.open_process(
            command,
            stdout=subprocess.PIPE,
            stderr=stderr,
            env={**server_env(root), **(env or {})},
            cwd=root / "home",
            start_new_session=True,
        )
    try:
        assert process.stdout is not None
        line = await _read_line(process.stdout)
        assert line.startswith("omnigent serving on http://"), (line, log.read_text()[-3000:])
    except BaseException:
        with trio.CancelScope(shield=True):
            process.kill()
            await process.wait()
        raise
    url = line.split(" on ", 1)[1].strip()
    return Served(root, process, url, int(url.rsplit(":", 1)[1]), log)


async def _read_line(stream: trio.abc.ReceiveStream) -> str:
    line = b""
    while not line.endswith(b"\n"):
        chunk = await stream.receive_some(1)
        if not chunk:
            break
        line += chunk
    return line.decode()


async def kill_9(served: Served) -> list[Proc]:
    """Freeze the server, snapshot its process tree, ``SIGKILL`` it and reap it.

    Returns the snapshot: the server and everything below it when it died.
    """
    os.kill(served.pid, signal.SIGSTOP)
    tree = descendants(served.pid)
    os.kill(served.pid, signal.SIGKILL)
    assert await served.process.wait() == -signal.SIGKILL
    await _close_stdout(served)
    return tree


async def stop(served: Served, timeout: float = 20) -> list[Proc]:
    """Shut the server down with SIGINT (as a person would); its tree just before."""
    tree = descendants(served.pid)
    if served.process.returncode is None:
        served.process.send_signal(signal.SIGINT)
        with trio.move_on_after(timeout) as late:
            await served.process.wait()
        if late.cancelled_caught:
            served.process.kill()
            await served.process.wait()
            raise AssertionError(f"the server ignored SIGINT: {served.log.read_text()[-3000:]}")
        assert served.process.returncode == 0, served.log.read_text()[-3000:]
    await _close_stdout(served)
    return tree


async def _close_stdout(served: Served) -> None:
    if served.process.stdout is not None:
        await served.process.stdout.aclose()


class Watch:
    """A client streaming one session's events through the whole test.

    ``events`` is everything it has received, in order; :meth:`wait_for` waits until
    a condition on them holds. Started in a nursery with ``await nursery.start(...)``.
    """

    def __init__(self, client: OmnigentClient, session_id: str) -> None:
        self.client = client
        self.session_id = session_id
        self.events: list[Event] = []
        self._changed = trio.Event()
        self.ended: BaseException | None = None

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        # Retries and backoff that outlast a restart (the server is back in about 1 s).
        async with self.client.events(self.session_id, after=0, retries=12, backoff=0.1) as stream:
            task_status.started()
            try:
                async for event in stream:
                    self.events.append(event)
                    self._changed.set()
                    self._changed = trio.Event()
            except Exception as exc:
                self.ended = exc
                self._changed.set()
                raise

    async def wait_for(self, condition: Callable[[list[Event]], bool], what: str) -> None:
        """Return once ``condition(events)`` holds (bounded by the caller's deadline,
        which prints what it saw if it passes)."""
        try:
            while not condition(self.events):
                if self.ended is not None:
                    raise AssertionError(f"{self.session_id}: stream ended ({self.ended})")
                await self._changed.wait()
        except trio.Cancelled:
            print(f"{self.session_id} was waiting for {what}; saw {summary(self.events)}")
            raise

    async def changed(self) -> None:
        """Return once another event has arrived (or the stream ended)."""
        await self._changed.wait()


def terminal_count(events: Sequence[Event]) -> int:
    return sum(
        isinstance(e, SessionStatusChanged) and e.status in TERMINAL_STATUSES for e in events
    )


def summary(events: Sequence[Event]) -> list[str]:
    """``type[:status]`` of each event, for failure messages."""
    return [
        f"{e.event_id}:{e.type}" + (f":{e.status}" if isinstance(e, SessionStatusChanged) else "")
        for e in events
    ]


async def wait_for_file(path: Path) -> str:
    """The text of ``path`` once a shell has written a full line to it.

    Polled: a shell announces nothing else (bounded by the caller's deadline).
    """
    target = trio.Path(path)
    while True:
        if await target.exists() and (text := await target.read_text()).endswith("\n"):
            return text
        await trio.sleep(0.01)
