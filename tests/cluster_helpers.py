"""Helpers for the multi-server tests: real ``omnigent serve`` processes on one database.

:func:`open_serve_process` starts ``python -m omnigent serve`` on port 0
with a PostgreSQL URL and a server id, waits for its ``omnigent serving on URL`` line,
and yields a :class:`ServeProcess` with an httpx client. Leaving the block stops the
process (SIGTERM, then SIGKILL after a grace), unless a test killed it first.
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
import httpx
import trio

from .http_helpers import SSEReader

__all__ = ["ServeProcess", "message_body", "open_serve_process"]


def message_body(text: str) -> dict[str, Any]:
    return {"type": "message", "data": {"content": [{"type": "input_text", "text": text}]}}


@attrs.define(eq=False)
class ServeProcess:
    name: str
    url: str
    process: trio.Process
    client: httpx.AsyncClient
    log: Path

    def kill(self) -> None:
        """``kill -9``: no shutdown, no release, no last words."""
        self.process.send_signal(signal.SIGKILL)

    async def post(self, path: str, body: dict[str, Any]) -> httpx.Response:
        return await self.client.post(path, json=body)

    def log_text(self) -> str:
        try:
            return self.log.read_text(errors="replace")
        except OSError:
            return ""


async def _read_line(stream: trio.abc.ReceiveStream, log: Path) -> str:
    line = b""
    while not line.endswith(b"\n"):
        chunk = await stream.receive_some(1)
        if not chunk:
            text = await trio.Path(log).read_text(errors="replace")
            raise AssertionError(f"the server exited before its URL; its log:\n{text}")
        line += chunk
    return line.decode()


@asynccontextmanager
async def open_serve_process(
    db: str,
    name: str,
    tmp: Path,
    *,
    agents: Path | None = None,
    extra: Sequence[str] = (),
    env: dict[str, str] | None = None,
) -> AsyncIterator[ServeProcess]:
    """A real ``omnigent serve`` on ``db`` as ``--server-id name`` (see the module doc)."""
    command = [
        sys.executable,
        "-m",
        "omnigent",
        "serve",
        "--port",
        "0",
        "--db",
        db,
        "--server-id",
        name,
        *extra,
    ]
    if agents is not None:
        command += ["--agents", str(agents)]
    log = tmp / f"serve-{name}.log"
    home = tmp / f"home-{name}"
    await trio.Path(home).mkdir(exist_ok=True)
    environment = {**os.environ, "OMNIGENT_HOME": str(home), **(env or {})}
    with log.open("wb") as err:
        process = await trio.lowlevel.open_process(
            command, stdout=subprocess.PIPE, stderr=err, env=environment
        )
    try:
        assert process.stdout is not None
        with trio.fail_after(30):
            line = await _read_line(process.stdout, log)
        assert line.startswith("omnigent serving on http://"), line
        url = line.split(" on ", 1)[1].strip()
        async with httpx.AsyncClient(base_url=url, timeout=30) as client:
            yield ServeProcess(name, url, process, client, log)
    finally:
        with trio.CancelScope(shield=True):
            if process.returncode is None:
                process.send_signal(signal.SIGTERM)
                with trio.move_on_after(15):
                    await process.wait()
            if process.returncode is None:
                process.kill()
                await process.wait()


async def read_events(reader: SSEReader, stop: Any) -> list[dict[str, Any]]:
    """Event frames as ``{"id", "event", "data"}`` until ``stop(frame)`` (inclusive)."""
    frames = await reader.read_until(stop)
    return [{"id": f.id, "event": f.event, "data": f.data} for f in frames]
