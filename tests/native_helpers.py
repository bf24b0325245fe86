"""What the drivers of the real Claude Code and Codex CLIs share.

``claude_driver`` and ``codex_driver`` speak each CLI's own protocol directly against
the fake model servers of ``omnigent.testing``, with a private, hermetic environment
per test (no inherited keys, no network: see docs/harnesses-native.md). Every process
runs in its own process group and is reaped (SIGKILL after a grace) when its block
exits.

A CLI that is not installed skips its tests with the package to install — unless
``OMNIGENT_REQUIRE_NATIVE_CLIS=1`` (set by ``.ci/run``), where it fails them.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import shutil
import signal
import subprocess
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import trio

MAX_LINE = 16 * 1024 * 1024
REAP_GRACE = 3.0


# -- finding the binaries ---------------------------------------------------------------


def claude_binary() -> Path | None:
    """The ``claude`` CLI: bundled in the ``claude-agent-sdk`` wheel, else on PATH."""
    spec = importlib.util.find_spec("claude_agent_sdk")  # finds it without importing it
    if spec is not None and spec.origin is not None:
        bundled = Path(spec.origin).parent / "_bundled" / "claude"
        if bundled.is_file():
            return bundled
    found = shutil.which("claude")
    return Path(found) if found else None


def codex_binary() -> Path | None:
    """The ``codex`` CLI: in the ``openai-codex-cli-bin`` wheel, else on PATH."""
    spec = importlib.util.find_spec("codex_cli_bin")
    if spec is not None and spec.origin is not None:
        bundled = Path(spec.origin).parent / "bin" / "codex"
        if bundled.is_file():
            return bundled
    found = shutil.which("codex")
    return Path(found) if found else None


def pi_binary() -> Path | None:
    """The ``pi`` CLI: npm's ``@mariozechner/pi-coding-agent`` on PATH."""
    found = shutil.which("pi")
    return Path(found) if found else None


def require(
    binary: Path | None, name: str, extra: str, *, install: str | None = None
) -> pytest.MarkDecorator:
    """Skips (or, under ``OMNIGENT_REQUIRE_NATIVE_CLIS=1``, fails) without ``binary``."""
    how = install or f"pip install 'omnigent[{extra}]'"
    reason = f"the {name} CLI is not installed ({how})"
    if binary is None and os.environ.get("OMNIGENT_REQUIRE_NATIVE_CLIS") == "1":
        pytest.fail(f"{reason}, and OMNIGENT_REQUIRE_NATIVE_CLIS=1", pytrace=False)
    return pytest.mark.skipif(binary is None, reason=reason)


# -- processes ------------------------------------------------------------------------


class JsonLines:
    """Newline-delimited JSON objects read from a byte stream, each line bounded."""

    def __init__(self, stream: trio.abc.ReceiveStream) -> None:
        self._stream = stream
        self._buffer = bytearray()

    async def receive(self) -> dict[str, Any]:
        """The next object. Raises EOFError when the stream ends."""
        while True:
            end = self._buffer.find(b"\n")
            if end >= 0:
                line = bytes(self._buffer[:end])
                del self._buffer[: end + 1]
                if line.strip():
                    message = json.loads(line)
                    assert isinstance(message, dict), line
                    return message
                continue
            if len(self._buffer) > MAX_LINE:
                raise ValueError("a line longer than MAX_LINE")
            chunk = await self._stream.receive_some(65536)
            if not chunk:
                raise EOFError("the process closed its stdout")
            self._buffer += chunk


@contextlib.asynccontextmanager
async def open_process(
    command: list[str], *, cwd: Path, env: dict[str, str], stderr_to: Path
) -> AsyncIterator[trio.Process]:
    """A child with piped stdin/stdout in its own process group, reaped on exit.

    Cancellation: the reaping is shielded and bounded — stdin is closed, the child
    gets ``REAP_GRACE`` seconds to exit, then its whole group is SIGKILLed.
    """
    with stderr_to.open("wb") as stderr:
        process = await trio.lowlevel.open_process(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            cwd=cwd,
            env=env,
            start_new_session=True,
        )
        try:
            yield process
        finally:
            with trio.CancelScope(shield=True):
                await reap(process)


async def reap(process: trio.Process) -> None:
    """Closes stdin, waits ``REAP_GRACE`` s, then SIGKILLs the process group."""
    if process.stdin is not None:
        with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
            await process.stdin.aclose()
    with trio.move_on_after(REAP_GRACE):
        await process.wait()
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)  # the leader, or what it left behind
    await process.wait()


def group_alive(pgid: int) -> bool:
    """Whether any process of group ``pgid`` is still running."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


Answer = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]
"""Builds the answer to a request the CLI sends (an approval, a hook callback)."""
Watch = Callable[[dict[str, Any]], Awaitable[None]]
"""Sees each message the CLI sends, as it arrives."""
