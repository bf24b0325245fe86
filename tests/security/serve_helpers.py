"""A real ``omnigent serve`` in a subprocess, for the attacks of ``tests/security``.

Each attack is tried as an attacker would: over loopback, against the command a user
runs, with nothing of the server in the test's own process (a server that blocks its
event loop cannot hide it by blocking the test's too).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import httpx
import trio

ALICE = "alice@example.com"
BOB = "bob@example.com"
CAROL = "carol@example.com"
IDENTITY = "X-Forwarded-Email"


def scripted(name: str, script: list[Any] | None = None, **extra: Any) -> dict[str, Any]:
    """A scripted agent spec as a dict."""
    config = {"harness": "scripted", "script": script or [{"say": "hi"}]}
    return {"name": name, "executor": {"type": "omnigent", "config": config}, **extra}


@attrs.define
class Served:
    """A running server: its URL, a client for it, and where it keeps its files."""

    url: str
    client: httpx.AsyncClient
    home: Path
    process: trio.Process

    @property
    def port(self) -> int:
        return int(self.url.rsplit(":", 1)[1])

    def as_user(self, user: str) -> httpx.AsyncClient:
        """A client that sends ``user`` as the identity header (``--auth header``)."""
        return httpx.AsyncClient(base_url=self.url, headers={IDENTITY: user}, timeout=10)

    async def agent(self, spec: dict[str, Any], client: httpx.AsyncClient | None = None) -> str:
        answer = await (client or self.client).post("/v1/agents", json=spec)
        assert answer.status_code == 201, answer.text
        agent_id: str = answer.json()["id"]
        return agent_id

    async def session(self, client: httpx.AsyncClient | None = None, **body: Any) -> str:
        answer = await (client or self.client).post("/v1/sessions", json=body)
        assert answer.status_code == 201, answer.text
        session_id: str = answer.json()["id"]
        return session_id


async def _read_line(stream: trio.abc.ReceiveStream) -> str:
    line = b""
    while not line.endswith(b"\n"):
        chunk = await stream.receive_some(1)
        assert chunk, f"the server exited before printing its URL: {line!r}"
        line += chunk
    return line.decode()


@asynccontextmanager
async def open_serve(
    tmp_path: Path, *options: str, user: str | None = None, make_home: bool = True
) -> AsyncIterator[Served]:
    """``python -m omnigent serve --port 0`` on a SQLite file in ``tmp_path``.

    Args:
        options: more command-line options (``--auth header``, ``--allowed-origin …``).
        user: the identity header the client sends (for ``--auth header``).
        make_home: create ``$OMNIGENT_HOME`` first (else the server does).

    Resource handling: the server gets SIGINT on exit (SIGKILL if it has not stopped
    within 10 s) and is waited for; the client is closed.
    """
    home = tmp_path / "home"
    if make_home:
        home.mkdir(exist_ok=True)
    command = [
        sys.executable,
        "-m",
        "omnigent",
        "serve",
        "--port",
        "0",
        "--db",
        f"sqlite:///{home / 'omnigent.db'}",
        *options,
    ]
    env = {**os.environ, "OMNIGENT_HOME": str(home)}
    process = await trio.lowlevel.open_process(
        command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env
    )
    try:
        assert process.stdout is not None
        with trio.fail_after(20):
            line = await _read_line(process.stdout)
        assert line.startswith("omnigent serving on "), line
        url = line.split(" on ", 1)[1].strip()
        headers = {IDENTITY: user} if user else {}
        async with httpx.AsyncClient(base_url=url, headers=headers, timeout=10) as client:
            yield Served(url, client, home, process)
    finally:
        with trio.CancelScope(shield=True):
            if process.returncode is None:
                process.send_signal(signal.SIGINT)
                with trio.move_on_after(10):
                    await process.wait()
            if process.returncode is None:
                process.kill()
                await process.wait()


async def run_cli(*argv: str, timeout: float = 20) -> subprocess.CompletedProcess[bytes]:
    """``python -m omnigent ARGV`` to its end (bounded), with its output captured."""
    with trio.fail_after(timeout):
        return await trio.run_process(
            [sys.executable, "-m", "omnigent", *argv],
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )
