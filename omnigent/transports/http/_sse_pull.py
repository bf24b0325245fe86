"""The streaming body of every SSE response: frames pulled in the response's own task.

Quart sends a streaming body as ``async with body as it: async for chunk in it:
await send(chunk)`` — its documented ``ResponseBody`` protocol — in the request's task.
:class:`PulledSSEBody` implements that protocol directly instead of handing Quart an
async generator, and asks a :class:`FrameSource` for frames from ``__anext__`` itself:
one wake-up per stream per batch of events, no pump task, no frame channel, and an idle
stream holds no task but its watcher. That needs a source that is cancel-safe (a
cancelled call loses nothing, the next resumes), because a ping cancels the wait for a
frame. Both of the HTTP API's streams are: a session stream (``GET …/stream``) pulls a
:class:`~omnigent.core.Subscription`, a turn stream (``POST …/events?stream=true``) the
iterator :meth:`~omnigent.Runtime.open_turn_stream` yields, which keeps the event it is
deciding about across a cancel.

* **Ownership.** ``__aenter__`` opens the source and a nursery (for the watcher) and
  ``__aexit__`` releases both, so they live exactly as long as the response, entered
  and exited by one ``async with`` in one task. Nothing yields from inside a nursery
  or cancel scope (the Trio anti-pattern of a nursery in an async generator, PEP 789),
  and no task outlives the response.
* **Coalescing.** ``__anext__`` waits for one frame, then takes every frame the source
  has at hand without waiting (the rest of the bus's batch, a store page, a batch
  already delivered) into ONE chunk, up to ``max_chunk`` bytes. Each chunk costs a
  full trip through Quart and Hypercorn (~150 µs), so a 20,000-delta turn goes out in
  a few dozen chunks instead of 20,000. A session's events come from the bus in
  batches (one per store write), so what belongs together is ready together: nothing
  waits for more (a timer per chunk, with hundreds of streams open, would cost more
  than the writes it saves). Frames taken are kept on the body as they come, so a
  cancel in the middle loses none.
* **Pings.** A watcher task, one timer per stream per interval (not a cancel scope
  with a deadline around every wait for a frame: with two hundred streams each
  waiting once per batch, those were a few percent of the server's CPU), marks a ping
  due when no chunk has gone out for ``ping_interval`` and cancels the wait for a
  frame (only that wait: a cancel scope without a deadline); ``__anext__`` returns
  ``: ping`` and the next call resumes the source where it stood.
* **Ending.** The stream ends when the source ends, when the client goes away (Quart
  cancels the request task; ``__aexit__`` releases the source), or when the server is
  stopping. The server stops its runtime's sessions *before* it sets the app's
  ``stopping`` event, so the turns' terminal events (``response.cancelled``,
  ``session.status cancelled``) are already published; the watcher then lets the
  source *settle* (a turn stream runs to its own end, a session stream forwards
  everything up to the session's last event) for at most
  :data:`~._sse.SETTLE_TIMEOUT`, and then ends the stream after the frames already
  taken, before Hypercorn's graceful timeout.

Error handling: errors the source raises after the headers went out cannot become a
status code; the stream ends with one ``event: error`` frame carrying the usual error
envelope (unexpected errors are logged, their detail is not sent).
"""

from __future__ import annotations

import logging
from contextlib import AbstractAsyncContextManager
from types import TracebackType
from typing import Any, Protocol

import trio
from quart.wrappers.response import ResponseBody

from ...errors import OmnigentError
from ._errors import INTERNAL_MESSAGE, envelope
from ._sse import PING, SETTLE_TIMEOUT, encode_frame

__all__ = ["FrameSource", "PulledSSEBody"]

log = logging.getLogger("omnigent.transports.http")


class FrameSource(Protocol):
    """Frames a :class:`PulledSSEBody` pulls; every method runs in the response task."""

    def open(self) -> AbstractAsyncContextManager[object]:
        """Hold what the frames come from (a subscription) while the body is open."""
        ...

    async def next_frame(self, *, wait: bool) -> bytes | None:
        """The next frame. ``wait=False``: ``None`` unless one is at hand without
        waiting for new events.

        Raises:
            StopAsyncIteration: there are no more.

        Cancellation: safe — a cancelled call loses nothing; the next resumes.
        """
        ...

    async def settle(self) -> None:
        """Return once a stopping server's stream has forwarded all it should."""
        ...


class PulledSSEBody(ResponseBody):
    """A streaming response body serving ``source``'s frames as coalesced SSE chunks.

    See the module docstring for the design.

    Args:
        source: where the frames come from (opened by ``__aenter__``).
        stopping: when set, the stream settles, then ends (server shutdown).
        ping_interval: seconds of silence before a ``: ping`` comment.
        max_chunk: bytes at which a chunk is sent without taking more.

    Resource handling: the source (and the watcher task) live from ``__aenter__`` to
    ``__aexit__``; the source is released first.
    """

    def __init__(
        self,
        source: FrameSource,
        *,
        stopping: trio.Event,
        ping_interval: float = 15.0,
        max_chunk: int = 1 << 18,
    ) -> None:
        self._source = source
        self._stopping = stopping
        self._ping_interval = ping_interval
        self._max_chunk = max_chunk
        self._opened: AbstractAsyncContextManager[object] | None = None
        self._nursery_manager: Any = None
        self._nursery: trio.Nursery | None = None
        self._frames: list[bytes] = []  # taken from the source, not yet sent
        self._size = 0
        self._waiting: trio.CancelScope | None = None  # the wait for a frame, if any
        self._ping_due = False
        self._ending = False  # stopping and settled: end after what was taken
        self._ended = False  # the source has no more
        self._sent_at = 0.0  # when the last chunk went out (trio's clock)

    async def __aenter__(self) -> PulledSSEBody:
        self._sent_at = trio.current_time()
        self._nursery_manager = trio.open_nursery()
        self._nursery = await self._nursery_manager.__aenter__()
        self._nursery.start_soon(self._watch, name="sse ping and stopping watcher")
        opened = self._source.open()
        try:
            await opened.__aenter__()
        except BaseException as exc:
            if not isinstance(exc, Exception):
                await self.__aexit__(type(exc), exc, exc.__traceback__)
                raise
            self._fail(exc)  # the headers are out: the stream carries the error
        else:
            self._opened = opened
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        # Never suppresses: the body's own exception (usually the Cancelled of a
        # client that went away) continues as itself once the watcher has ended.
        assert self._nursery is not None
        try:
            if self._opened is not None:
                opened, self._opened = self._opened, None
                await opened.__aexit__(None, None, None)
        finally:
            self._nursery.cancel_scope.cancel()
            try:
                await self._nursery_manager.__aexit__(exc_type, exc, tb)
            except BaseExceptionGroup as group:
                if exc is None or _only_leaf(group) is not exc:
                    raise

    def __aiter__(self) -> PulledSSEBody:
        return self

    async def __anext__(self) -> bytes:
        if not self._frames:
            if self._ended or self._ending:
                raise StopAsyncIteration
            if self._ping_due:
                return self._out(PING)
            with trio.CancelScope() as self._waiting:
                await self._take(wait=True)
            self._waiting = None
            if not self._frames:  # the wait was cut short: a ping, the end, or no more
                if self._ping_due and not (self._ended or self._ending):
                    return self._out(PING)
                raise StopAsyncIteration
        while self._size < self._max_chunk and not self._ended and await self._take(wait=False):
            pass
        chunk = b"".join(self._frames)
        self._frames.clear()
        self._size = 0
        return self._out(chunk)

    def _out(self, chunk: bytes) -> bytes:
        self._ping_due = False
        self._sent_at = trio.current_time()
        return chunk

    async def _take(self, *, wait: bool) -> bool:
        """Take the source's next frame onto the body; False if there was none."""
        try:
            frame = await self._source.next_frame(wait=wait)
        except StopAsyncIteration:
            self._ended = True
            return False
        except Exception as error:
            self._fail(error)
            return True
        if frame is None:
            return False
        self._frames.append(frame)
        self._size += len(frame)
        return True

    def _fail(self, error: Exception) -> None:
        """End the stream with one ``event: error`` frame."""
        if isinstance(error, OmnigentError):
            frame = encode_frame("error", envelope(error.code, error.message))
        else:
            log.error("an event stream failed", exc_info=error)
            frame = encode_frame("error", envelope("internal_error", INTERNAL_MESSAGE))
        self._frames.append(frame)
        self._size += len(frame)
        self._ended = True

    def _interrupt(self) -> None:
        if self._waiting is not None:
            self._waiting.cancel()

    async def _watch(self) -> None:
        """Mark a ping due after ``ping_interval`` without a chunk; settle once stopping."""
        while not self._stopping.is_set():
            with trio.move_on_at(self._sent_at + self._ping_interval):
                await self._stopping.wait()
            if trio.current_time() < self._sent_at + self._ping_interval:
                continue  # stopping, or a chunk went out meanwhile
            self._sent_at = trio.current_time()  # one ping per silent interval
            self._ping_due = True
            self._interrupt()
        with trio.move_on_after(SETTLE_TIMEOUT):
            await self._source.settle()
        self._ending = True
        self._interrupt()


def _only_leaf(group: BaseExceptionGroup[BaseException]) -> BaseException | None:
    """The single leaf exception of ``group``, or None if it holds several."""
    current: BaseException = group
    while isinstance(current, BaseExceptionGroup):
        if len(current.exceptions) != 1:
            return None
        current = current.exceptions[0]
    return current
