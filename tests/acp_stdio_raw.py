"""A real ``omnigent stdio`` process, driven with raw NDJSON as an editor writes it.

:func:`open_stdio` starts ``python -m omnigent stdio`` on a spec and gives the test a
:class:`RawStdio`: it writes whatever bytes the test wants (several messages in one
write, half a line, nothing but EOF), reads stdout line by line, and checks every line
against the ACP schema (:mod:`.acp_schema`). No client library sits in between, so what
is tested is exactly what an editor sees.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import trio
import yaml

from .acp_schema import AcpSchema


def scripted_spec(name: str, script: list[Any], **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "executor": {"type": "omnigent", "config": {"harness": "scripted", "script": script}},
        **extra,
    }


def line(message: dict[str, Any]) -> bytes:
    return json.dumps(message).encode() + b"\n"


def request(request_id: int, method: str, params: Any = None) -> dict[str, Any]:
    out: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        out["params"] = params
    return out


INITIALIZE = request(0, "initialize", {"protocolVersion": 1, "clientCapabilities": {}})


class RawStdio:
    """The test's side of one ``omnigent stdio`` process."""

    def __init__(self, process: trio.Process, schema: AcpSchema) -> None:
        self.process = process
        self.schema = schema
        self.received: list[dict[str, Any]] = []
        self._buffer = b""
        self._eof = False

    async def write(self, data: bytes) -> None:
        """Write raw bytes to stdin (the schema learns the requests among them)."""
        for raw in data.splitlines():
            if raw.strip():
                self.schema.client_sent(json.loads(raw))
        assert self.process.stdin is not None
        await self.process.stdin.send_all(data)

    async def send(self, *messages: dict[str, Any]) -> None:
        """Write ``messages`` in one write (pipelined, as a client may)."""
        await self.write(b"".join(line(m) for m in messages))

    async def close_stdin(self) -> None:
        assert self.process.stdin is not None
        await self.process.stdin.aclose()

    async def next_message(self) -> dict[str, Any] | None:
        """The next message on stdout (checked against the schema); None at its end."""
        assert self.process.stdout is not None
        while b"\n" not in self._buffer:
            if self._eof:
                return None
            chunk = await self.process.stdout.receive_some(1 << 16)
            if not chunk:
                self._eof = True
                if self._buffer.strip():
                    raise AssertionError(f"stdout ended mid-line: {self._buffer[:200]!r}")
                return None
            self._buffer += chunk
        raw, self._buffer = self._buffer.split(b"\n", 1)
        message: dict[str, Any] = json.loads(raw)
        self.schema.agent_sent(message)
        self.received.append(message)
        return message

    async def answer(self, request_id: int) -> dict[str, Any]:
        """Read until the answer to ``request_id``; everything read stays in ``received``."""
        for message in self.received:
            if message.get("id") == request_id and "method" not in message:
                return message
        while (message := await self.next_message()) is not None:
            if message.get("id") == request_id and "method" not in message:
                return message
        raise AssertionError(f"stdout ended without an answer to {request_id}: {self.received}")

    async def until(self, method: str) -> dict[str, Any]:
        """Read until the agent sends ``method`` (a request or a notification)."""
        while (message := await self.next_message()) is not None:
            if message.get("method") == method:
                return message
        raise AssertionError(f"stdout ended without {method}: {self.received}")

    async def read_to_end(self) -> list[dict[str, Any]]:
        while await self.next_message() is not None:
            pass
        return self.received

    def signal(self, signum: int) -> None:
        self.process.send_signal(signum)

    async def wait(self) -> int:
        return await self.process.wait()


@asynccontextmanager
async def open_stdio(
    folder: Path, *specs: dict[str, Any], agent: str | None = None
) -> AsyncIterator[RawStdio]:
    """``omnigent stdio --agent`` the first (or the named) spec, with a store in ``folder``.

    Every spec is written to ``folder``; the process is killed at the end if it is
    still running (a test that expects it to exit waits for it itself).
    """
    paths = {}
    for spec in specs:
        path = folder / f"{spec['name']}.yaml"
        path.write_text(yaml.safe_dump(spec))
        paths[spec["name"]] = path
    chosen = paths[agent or specs[0]["name"]]
    command = [
        sys.executable,
        "-m",
        "omnigent",
        "stdio",
        "--agent",
        str(chosen),
        "--db",
        f"sqlite:///{folder / 'stdio.db'}",
    ]
    env = {**os.environ, "OMNIGENT_HOME": str(folder / "home")}
    with (folder / "stderr.log").open("wb") as errlog:
        process = await trio.lowlevel.open_process(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errlog, env=env
        )
        try:
            yield RawStdio(process, AcpSchema())
        finally:
            if process.returncode is None:
                process.send_signal(signal.SIGKILL)
            with trio.move_on_after(10, shield=True):
                await process.wait()
