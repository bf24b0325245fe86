"""What the sandbox tests share: bubblewrap or a skip, a run inside, a loopback server.

A machine without a working ``bwrap`` skips these tests, naming the package —
unless ``OMNIGENT_REQUIRE_BWRAP=1`` (set by ``.ci/run``), where it fails them.
"""

from __future__ import annotations

import functools
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import attrs
import pytest
import trio

from omnigent.processes.sandbox import Sandbox, SandboxPolicy, bwrap_problem, find_bwrap

__all__ = ["Ran", "loopback_http", "require_bwrap", "run_inside"]


def require_bwrap() -> str:
    """The ``bwrap`` binary, after checking it can sandbox here."""
    binary = find_bwrap()
    problem = "bwrap is not installed (apt-get install bubblewrap)"
    if binary is not None:
        problem = bwrap_problem(binary) or ""
    if problem:
        if os.environ.get("OMNIGENT_REQUIRE_BWRAP") == "1":
            pytest.fail(f"OMNIGENT_REQUIRE_BWRAP=1 but {problem}")
        pytest.skip(problem)
    assert binary is not None
    return binary


@attrs.frozen
class Ran:
    code: int
    out: str
    err: str


async def run_inside(box: Sandbox, command: str, cwd: Path | None = None) -> Ran:
    """Run ``/bin/sh -c command`` through ``box`` and wait for it."""
    assert box.policy is not None
    launch = await box.wrap(["/bin/sh", "-c", command], cwd=cwd or box.policy.workspace)
    done = await trio.run_process(
        list(launch.argv),
        cwd=launch.cwd,
        env=None if launch.env is None else dict(launch.env),
        capture_stdout=True,
        capture_stderr=True,
        check=False,
    )
    return Ran(done.returncode, done.stdout.decode(), done.stderr.decode())


async def _answer(stream: trio.SocketStream) -> None:
    async with stream:
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = await stream.receive_some(4096)
            if not chunk:
                return
            data += chunk
        line = data.split(b"\r\n", 1)[0].decode()
        body = f"hello {line}".encode()
        head = f"HTTP/1.1 200 OK\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
        await stream.send_all(head.encode() + body)


@asynccontextmanager
async def loopback_http() -> AsyncIterator[int]:
    """An HTTP server on 127.0.0.1 answering ``hello <request line>``; yields its port."""
    async with trio.open_nursery() as nursery:
        serve = functools.partial(trio.serve_tcp, _answer, 0, host="127.0.0.1")
        listeners = await nursery.start(serve)
        yield listeners[0].socket.getsockname()[1]
        nursery.cancel_scope.cancel()


def policy(workspace: Path, home: Path, **fields: object) -> SandboxPolicy:
    """A ``linux_bwrap`` policy for ``workspace``, with ``home`` as the user's home."""
    from omnigent.processes.sandbox import Backend

    return SandboxPolicy.resolve(Backend.LINUX_BWRAP, workspace, home=home, **fields)  # type: ignore[arg-type]
