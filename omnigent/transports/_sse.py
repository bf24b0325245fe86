"""Server-sent events: frame encoding, and the coalescing relay that streams them.

Encoding is pure: :func:`encode_event` turns a typed event into one
``id: …\\nevent: …\\ndata: …\\n\\n`` frame.

The relay (:class:`SSEBody`)
----------------------------
Quart sends a streaming body as ``async with body as it: async for chunk in it:
await send(chunk)`` — its documented ``ResponseBody`` protocol — in the request's task.
:class:`SSEBody` implements that protocol directly instead of handing Quart an async
generator, and that choice carries the design:

* **Ownership.** ``__aenter__`` opens a nursery and ``__aexit__`` closes it, so the
  nursery lives exactly as long as the response, entered and exited by one ``async
  with`` in one task. Nothing yields from inside a nursery or cancel scope (the Trio
  anti-pattern of a nursery in an async generator, PEP 789), and no task outlives the
  response.
* **The pump.** One task in that nursery runs the *source* (a subscription, or a turn
  stream), encodes each event and sends the frame into a bounded memory channel. The
  pump is needed because :class:`~omnigent.core._bus.Subscription` is not cancel-safe
  while it catches up from the store (a cancel between its store read and its live
  attach loses the page it read), so a timeout must never be put around it. A memory
  channel's ``receive`` is cancel-safe, so the consumer side can time out freely.
* **Coalescing.** ``__anext__`` takes one frame and drains every frame that is ready
  with ``receive_nowait`` into ONE chunk. Each chunk costs a full trip through Quart
  and Hypercorn (~150 µs), so a 20,000-delta turn goes out in a few dozen chunks
  instead of 20,000. A session's events come from the bus in batches (one per store
  write), so what belongs together is ready together: by default nothing waits for
  more, as a timer per chunk, with hundreds of streams open, costs more than the
  writes it saves and adds a scheduler round to every frame's way out. With a
  ``window``, a trickle (under 16 KiB ready) waits that long for more first; a
  backlog never waits.
* **Ending.** The stream ends when the source ends (the pump closes the channel; the
  consumer sees ``EndOfChannel``), when the server is stopping, or when the client
  goes away (Quart cancels the request task; ``__aexit__`` cancels the pump, whose
  ``async with`` on the subscription releases it before ``__aexit__`` returns).
  The server stops its runtime's sessions *before* it sets the app's ``stopping``
  event, so the turns' terminal events (``response.cancelled``, ``session.status
  cancelled``) are already published; a watcher task then lets the stream *settle* —
  a turn stream runs to its own end, a session stream forwards everything up to the
  session's last event — for at most :data:`SETTLE_TIMEOUT`, and only then cancels
  the pump, so the stream ends before Hypercorn's graceful timeout.
* **Pings.** The same watcher sends a ``: ping`` comment through the channel when no
  chunk has gone out for ``ping_interval`` (unless frames are already waiting): one
  timer per stream per interval, not a cancel scope around every wait for a frame
  (with two hundred streams each waiting once per batch, those were a few percent of
  the server's CPU).

Error handling: errors the source raises after the headers went out cannot become a
status code; the pump logs unexpected ones and ends the stream with one ``event:
error`` frame carrying the usual error envelope.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import Any

import trio
from quart.wrappers.response import ResponseBody

from ..errors import OmnigentError
from ..model import Event
from ._http_errors import INTERNAL_MESSAGE, envelope

__all__ = [
    "PING",
    "SETTLE_TIMEOUT",
    "SSEBody",
    "Settle",
    "Source",
    "encode_event",
    "encode_frame",
    "send_frame",
]

log = logging.getLogger("omnigent.transports.http")

PING = b": ping\n\n"
SETTLE_TIMEOUT = 2.0

Source = Callable[[trio.MemorySendChannel[bytes]], Awaitable[None]]
"""Forwards encoded frames into the channel until the stream should end."""

Settle = Callable[[], Awaitable[None]]
"""Returns once a stopping server's stream has forwarded all it should."""


_ENCODE = json.JSONEncoder(separators=(",", ":")).encode


def encode_frame(event_type: str, data: Any, event_id: int | None = None) -> bytes:
    """One SSE frame; ``data`` is JSON-encoded on a single line."""
    head = f"id: {event_id}\n" if event_id is not None else ""
    return f"{head}event: {event_type}\ndata: {_ENCODE(data)}\n\n".encode()


def encode_event(event: Event) -> bytes:
    """The frame of a session event: its ``event_id``, ``type`` and wire form.

    The JSON is the event's own, encoded once when it was published
    (:meth:`~omnigent.model.Event.to_json`), not once per subscriber.
    """
    return f"id: {event.event_id}\nevent: {event.type}\ndata: {event.to_json()}\n\n".encode()


async def send_frame(send: trio.MemorySendChannel[bytes], frame: bytes) -> None:
    """Send ``frame`` into the relay's channel, yielding only when it is full.

    The source's own iterator is the checkpoint (a subscription yields at least every
    few events): a scheduler round per frame here would cost more than the frame.
    """
    try:
        send.send_nowait(frame)
    except trio.WouldBlock:
        await send.send(frame)


class SSEBody(ResponseBody):
    """A streaming response body relaying ``source`` as coalesced SSE chunks.

    See the module docstring for the design.

    Args:
        source: called once in the pump task with the send side of the frame channel.
        stopping: when set, the stream settles, then ends (server shutdown).
        settle: awaited once ``stopping`` is set; the stream ends when it returns.
            ``None``: the source is expected to end by itself.
        ping_interval: seconds of silence before a ``: ping`` comment.
        window: seconds a trickle waits after its first frame for more to coalesce
            (0: none, the default; see the module docstring).
        max_chunk: bytes at which a chunk is sent without draining further.
        backlog: bytes ready at once that are sent without waiting the window.

    Resource handling: the pump task and whatever the source holds live in a nursery
    opened by ``__aenter__`` and closed (pump cancelled first) by ``__aexit__``.
    """

    def __init__(
        self,
        source: Source,
        *,
        stopping: trio.Event,
        settle: Settle | None = None,
        ping_interval: float = 15.0,
        window: float = 0.0,
        buffer: int = 1024,
        max_chunk: int = 1 << 18,
        backlog: int = 1 << 14,
    ) -> None:
        self._source = source
        self._stopping = stopping
        self._settle = settle
        self._pumped = trio.Event()
        self._ping_interval = ping_interval
        self._window = window
        self._max_chunk = max_chunk
        self._backlog = backlog
        self._send, self._receive = trio.open_memory_channel[bytes](buffer)
        self._nursery_manager: Any = None
        self._nursery: trio.Nursery | None = None
        self._pump_scope = trio.CancelScope()
        self._sent_at = 0.0  # when the last chunk went out (trio's clock)

    async def __aenter__(self) -> SSEBody:
        self._sent_at = trio.current_time()
        self._nursery_manager = trio.open_nursery()
        self._nursery = await self._nursery_manager.__aenter__()
        self._nursery.start_soon(self._pump, name="sse pump")
        self._nursery.start_soon(self._watch, name="sse ping and stopping watcher")
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        # Never suppresses: the body's own exception (usually the Cancelled of a
        # client that went away) continues as itself once the pump has ended.
        assert self._nursery is not None
        self._nursery.cancel_scope.cancel()
        try:
            await self._nursery_manager.__aexit__(exc_type, exc, tb)
        except BaseExceptionGroup as group:
            if exc is None or _only_leaf(group) is not exc:
                raise
        finally:
            self._receive.close()

    def __aiter__(self) -> SSEBody:
        return self

    async def __anext__(self) -> bytes:
        try:
            first = self._receive.receive_nowait()
        except trio.WouldBlock:
            # No timer here (one per chunk, times hundreds of streams, is not free):
            # the watcher sends a silent stream its ping through the channel.
            try:
                first = await self._receive.receive()
            except trio.EndOfChannel:
                raise StopAsyncIteration from None
        except trio.EndOfChannel:
            raise StopAsyncIteration from None
        chunk = [first]
        size = self._drain(chunk, len(first))
        if self._window and size < self._backlog:
            # A trickle: a moment for more frames to join this chunk. A backlog goes
            # out at once: waiting would only let it grow.
            await trio.sleep(self._window)
            size = self._drain(chunk, size)
        self._sent_at = trio.current_time()
        return b"".join(chunk)

    def _drain(self, chunk: list[bytes], size: int) -> int:
        """Append the frames that are ready to ``chunk``, up to ``max_chunk`` bytes."""
        while size < self._max_chunk:
            try:
                frame = self._receive.receive_nowait()
            except (trio.WouldBlock, trio.EndOfChannel):
                break
            chunk.append(frame)
            size += len(frame)
        return size

    async def _watch(self) -> None:
        """Ping the stream after ``ping_interval`` without a chunk; settle it once stopping."""
        while not self._stopping.is_set():
            with trio.move_on_at(self._sent_at + self._ping_interval):
                await self._stopping.wait()
            if trio.current_time() < self._sent_at + self._ping_interval:
                continue  # stopping, or a chunk went out meanwhile
            self._sent_at = trio.current_time()
            try:
                self._send.send_nowait(PING)
            except trio.WouldBlock:
                pass  # frames are waiting: they are the sign of life
            except trio.ClosedResourceError:
                break  # the source has ended, and so will the stream
        await self._stopping.wait()
        with trio.move_on_after(SETTLE_TIMEOUT):
            if self._settle is not None:
                await self._settle()
            else:
                await self._pumped.wait()
        self._pump_scope.cancel()

    async def _pump(self) -> None:
        async with self._send:
            with self._pump_scope:
                await self._run_source()
        self._pumped.set()

    async def _run_source(self) -> None:
        try:
            await self._source(self._send)
        except OmnigentError as error:
            await self._send.send(encode_frame("error", envelope(error.code, error.message)))
        except Exception:
            log.exception("an event stream failed")
            await self._send.send(
                encode_frame("error", envelope("internal_error", INTERNAL_MESSAGE))
            )


def _only_leaf(group: BaseExceptionGroup[BaseException]) -> BaseException | None:
    """The single leaf exception of ``group``, or None if it holds several."""
    current: BaseException = group
    while isinstance(current, BaseExceptionGroup):
        if len(current.exceptions) != 1:
            return None
        current = current.exceptions[0]
    return current
