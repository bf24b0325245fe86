"""Newline-delimited JSON over a child process's pipes: the native CLIs' framing.

Claude Code's stream-json and Codex's app-server JSON-RPC are both one JSON object per
line on stdin/stdout. :class:`LineChannel` reads and writes them:

* :meth:`LineChannel.receive_batch` returns *every* complete line already read (at
  least one), so a burst of text deltas is relayed as one publish, not hundreds;
* a line longer than ``max_line`` (16 MiB) is a broken CLI: it raises instead of
  growing the buffer without bound; a line that is not a JSON object is skipped;
* :meth:`LineChannel.send` serialises concurrent writers (approval answers come from
  several tasks) with a lock.

A channel outlives the harness instance that made it: it is kept on the process
(:attr:`ManagedProcess.owner_state`), so what it has buffered is not lost when a
session goes idle and a later turn picks the process up again.

Cancellation: a cancelled :meth:`receive_batch` loses nothing (bytes are consumed
only once complete lines are taken); a cancelled :meth:`send` may have written part of
a line — the caller then ends the process, as the harnesses do.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any

import trio

from ...errors import HarnessError
from ...processes import ManagedProcess

__all__ = ["MAX_LINE", "ChannelClosed", "LineChannel"]

log = logging.getLogger(__name__)

MAX_LINE = 16 * 1024 * 1024
_READ = 65536


class ChannelClosed(Exception):
    """The process closed its stdout (it is exiting or gone)."""


class LineChannel:
    """JSON lines to and from one process (spawned with ``pipes=True``)."""

    def __init__(self, process: ManagedProcess, *, name: str, max_line: int = MAX_LINE) -> None:
        if process.stdin is None or process.stdout is None:
            raise ValueError("the process was spawned without pipes")
        self.process = process
        self.name = name
        self._stdin = process.stdin
        self._stdout = process.stdout
        self._max_line = max_line
        self._buffer = bytearray()
        self._lock = trio.Lock()
        self._eof = False

    @classmethod
    def of(cls, process: ManagedProcess, *, name: str) -> LineChannel:
        """The channel kept on ``process``, made on first use."""
        channel = process.owner_state
        if not isinstance(channel, LineChannel):
            channel = cls(process, name=name)
            process.owner_state = channel
        return channel

    async def send(self, message: Mapping[str, Any]) -> None:
        """Write one message as a line.

        Raises:
            HarnessError: the process no longer reads its stdin.
        """
        data = json.dumps(message, separators=(",", ":")).encode() + b"\n"
        async with self._lock:
            try:
                await self._stdin.send_all(data)
            except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
                raise HarnessError(f"{self.name} stopped reading its input") from exc

    async def receive_batch(self) -> list[dict[str, Any]]:
        """Every complete message read so far, waiting for at least one.

        Raises:
            ChannelClosed: the process closed its stdout.
            HarnessError: a line over the limit.
        """
        while True:
            messages = self._take_lines()
            if messages:
                return messages
            if self._eof:
                raise ChannelClosed(self.name)
            if len(self._buffer) > self._max_line:
                raise HarnessError(f"{self.name} wrote a line longer than {self._max_line} bytes")
            try:
                chunk = await self._stdout.receive_some(_READ)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                chunk = b""
            if not chunk:
                self._eof = True
            self._buffer += chunk

    def _take_lines(self) -> list[dict[str, Any]]:
        end = self._buffer.rfind(b"\n")
        if end < 0:
            return []
        lines = bytes(self._buffer[:end]).split(b"\n")
        del self._buffer[: end + 1]
        out: list[dict[str, Any]] = []
        for line in lines:
            if not line.strip():
                continue
            try:
                message = json.loads(line)
            except ValueError:
                log.debug("%s wrote a line that is not JSON: %.200r", self.name, line)
                continue
            if isinstance(message, dict):
                out.append(message)
        return out

    async def aclose(self) -> None:
        """Close our end of stdout (the process's stdin closes with the process)."""
        await self._stdout.aclose()
