"""Answering approvals on the terminal while a turn streams: asking, reading, resolving.

:class:`Approvals` takes every event of a turn's stream, queues the elicitations it
carries, asks about them one at a time (or answers as ``--yes``/``--no-input`` say),
and resolves each under the session that owns it. What is shown and what a typed line
means is decided in :mod:`omnigent.cli._approval_render`; this module does the I/O
around it: holding the turn's other output back while a prompt is open, and reading
stdin through :class:`Lines`, which a cancelled prompt can abandon — a Ctrl-C or an
answer given elsewhere must never leave the turn stuck on a blocking read.
"""

from __future__ import annotations

import io
import os
import stat
import sys
from collections.abc import Callable, Iterable
from typing import Any, Protocol

import trio

from ..errors import SessionNotFound
from ..model import ElicitationRequest, ElicitationResolved, Event
from ._approval_render import (
    ApprovalMode,
    ElicitationDialog,
    Reply,
    auto_reply,
    elicitation_owner,
    withdrawn_note,
)
from ._output import Chunk, write
from ._render import TurnRenderer

__all__ = ["Approvals", "Lines", "Resolver", "stdin_lines"]


class Resolver(Protocol):
    """Where an answer goes: a runtime, or a server's client (``run --server``)."""

    async def resolve_elicitation(
        self, session_id: str, elicitation_id: str, action: str, content: Any = None
    ) -> bool:
        """Answer an elicitation the session owns; False if it was not pending there."""
        ...


class Approvals:
    """Answers the elicitations of a turn's stream, one at a time, as ``mode`` says.

    :meth:`feed` takes every event of the stream: it renders it, queues an
    ``response.elicitation_request`` (the session's own, or a descendant's mirrored one),
    and abandons the open prompt when its ``response.elicitation_resolved`` arrives —
    answered elsewhere, or withdrawn because the turn was interrupted. :meth:`run`
    asks, then resolves under the owning session. While a prompt is open, the turn's
    other output is held back and written when it closes, so the two never mix.

    Cancellation: cancelling :meth:`run` abandons the open prompt (the read is
    cancellable; see :class:`Lines`), ends its line and writes what was held.
    """

    def __init__(
        self,
        rt: Resolver,
        session_id: str,
        renderer: TurnRenderer,
        mode: ApprovalMode,
        open_lines: Callable[[], Lines],
    ) -> None:
        self._rt = rt
        self._session_id = session_id
        self._renderer = renderer
        self._mode: ApprovalMode = mode
        self._open_lines = open_lines
        self._lines: Lines | None = None  # opened at the first prompt
        # At most the runtime's pending elicitations of this session tree: small.
        self._queued: dict[str, ElicitationRequest] = {}
        self._queue_changed = trio.Event()
        self._asking: tuple[str, trio.CancelScope] | None = None
        self._held: list[Chunk] | None = None  # not None while a prompt is open
        self._mid_prompt = False
        self._ended_elsewhere = ""  # the note for a prompt abandoned by its resolution

    def feed(self, event: Event) -> None:
        if isinstance(event, ElicitationRequest):
            self._queued[event.elicitation_id] = event
            self._queue_changed.set()
        elif isinstance(event, ElicitationResolved):
            self._queued.pop(event.elicitation_id, None)
            if self._asking is not None and self._asking[0] == event.elicitation_id:
                self._asking[1].cancel()
                self._ended_elsewhere = withdrawn_note(event.action)
        self._output(self._renderer.feed(event))

    async def run(self) -> None:
        while True:
            if not self._queued:
                self._queue_changed = trio.Event()
                await self._queue_changed.wait()
                continue
            request = self._queued.pop(next(iter(self._queued)))
            reply = await self._reply(request)
            if reply is not None:
                await self._resolve(request, reply)

    async def _reply(self, request: ElicitationRequest) -> Reply | None:
        """How the person answers ``request``; ``None`` if it ended before they did."""
        if self._mode != "ask":
            reply, line = auto_reply(request, self._mode)
            self._output([*self._renderer.break_line(), Chunk("stderr", line)])
            return reply
        dialog = ElicitationDialog(request)
        with trio.CancelScope() as scope:
            self._asking = (request.elicitation_id, scope)
            self._held = []
            try:
                self._say(dialog.opening(), before=self._renderer.break_line())
                while (prompt := dialog.next_prompt()) is not None:
                    self._say(dialog.answer(await self._read_line(prompt)))
            finally:
                self._asking = None
                self._end_prompt()
        return None if scope.cancelled_caught else dialog.reply

    async def _read_line(self, prompt: str) -> str | None:
        if self._lines is None:
            self._lines = self._open_lines()
        self._say(prompt)
        line = await self._lines.readline()
        # A terminal echoes what is typed, Enter included (but not Ctrl-D); piped
        # answers are echoed here, so the transcript reads the same either way.
        if line is None or not self._lines.is_terminal:
            self._say(f"{line or ''}\n")
        self._mid_prompt = False
        return line

    async def _resolve(self, request: ElicitationRequest, reply: Reply) -> None:
        owner = elicitation_owner(request, self._session_id)
        try:
            resolved = await self._rt.resolve_elicitation(
                owner, request.elicitation_id, reply.action, reply.content
            )
        except SessionNotFound:  # the sub-session was deleted meanwhile
            resolved = False
        if not resolved:
            self._output([Chunk("stderr", withdrawn_note(None))])

    def _say(self, text: str, before: Iterable[Chunk] = ()) -> None:
        """Write prompt text on stderr now, even while other output is held."""
        if text:
            write([*before, Chunk("stderr", text)])
            self._mid_prompt = not text.endswith("\n")

    def _output(self, chunks: Iterable[Chunk]) -> None:
        if self._held is None:
            write(chunks)
        else:
            self._held.extend(chunks)

    def _end_prompt(self) -> None:
        if self._mid_prompt:  # abandoned while waiting for a line
            self._say("\n")
        note, self._ended_elsewhere = self._ended_elsewhere, ""
        held, self._held = self._held or [], None
        write([Chunk("stderr", note), *held])


class Lines:
    """Lines of stdin, read without blocking the event loop; ``None`` at end of input.

    A terminal, pipe or socket is waited on with :func:`trio.lowlevel.wait_readable`,
    which is cancellable, and then read once with ``os.read``: the descriptor is left in
    blocking mode (it is usually shared with stdout and stderr, and with the shell), and
    a read after readiness returns at once. A file or ``/dev/null`` never blocks and is
    read directly. Only where polling is refused (``OSError``) is the read done in a
    worker thread; a cancelled prompt then abandons that thread, which may consume one
    more line of input before the process exits.
    """

    def __init__(self, fd: int | None) -> None:
        self._fd = fd
        self._buffer = b""
        self._ended = fd is None
        self.is_terminal = fd is not None and os.isatty(fd)
        mode = os.fstat(fd).st_mode if fd is not None else 0
        self._pollable = self.is_terminal or stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)

    async def readline(self) -> str | None:
        while b"\n" not in self._buffer and not self._ended:
            data = await self._read()
            self._ended = not data
            self._buffer += data
        if not self._buffer:
            await trio.lowlevel.checkpoint()
            return None
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line.decode(errors="replace").removesuffix("\r")

    async def _read(self) -> bytes:
        assert self._fd is not None
        fd = self._fd
        if not self._pollable:
            await trio.lowlevel.checkpoint()
            return os.read(fd, 4096)
        while True:
            try:
                await trio.lowlevel.wait_readable(fd)
            except OSError:  # not pollable after all (kqueue and some devices)
                return await trio.to_thread.run_sync(os.read, fd, 4096, abandon_on_cancel=True)
            try:
                return os.read(fd, 4096)
            except BlockingIOError:  # someone made it non-blocking and the data went
                continue


def stdin_lines() -> Lines:
    """:class:`Lines` of ``sys.stdin``; at once at end if there is none (closed, say)."""
    try:
        fd = sys.stdin.fileno() if sys.stdin is not None else None
        if fd is not None:
            os.fstat(fd)
    except (OSError, ValueError, io.UnsupportedOperation):
        fd = None
    return Lines(fd)
