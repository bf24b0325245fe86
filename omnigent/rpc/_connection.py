"""The Trio shell around :mod:`._protocol`: one JSON-RPC connection over a message stream.

:class:`RpcConnection` reads messages from a :class:`MessageStream` (NDJSON over a
byte stream with :class:`NdjsonStream`; a WebSocket's text frames with the adapters in
:mod:`omnigent.transports.http._websocket` and :mod:`omnigent.client`), lets
:class:`~._protocol.Dispatcher` decide what each means, and runs the handler's answers.
It speaks both ways: the peer may call the handler's methods, and the handler may call
the peer's (:meth:`RpcConnection.request`, :meth:`RpcConnection.notify`).

Lifetimes: :meth:`RpcConnection.run` owns a nursery for as long as the stream is open.
Every incoming request runs in it, in its own cancel scope (``$/cancel_request``
cancels just that one, which then answers ``-32800``), and handlers start their
background work in it (:attr:`RpcConnection.nursery`).

Order: requests run concurrently, but JSON-RPC lets a client write several before the
first is answered, and some must take effect in the order they arrived (``initialize``
before anything; a ``session/load`` before the prompt behind it). The handler names
those methods (``ordered``, notifications included): each starts only once every
ordered message that arrived before it has been *admitted* — it finished, or its
handler called ``admit()`` to let the next in early (a prompt does once its message is
accepted). :class:`_Arrivals` keeps the tickets, taken in the reader in arrival order.

The end: when the input ends — the peer closed it, or :meth:`RpcConnection.stop_reading`
was called (a signal) — nothing more is read, outgoing requests still waiting fail
with :class:`ConnectionClosed` (no answer can arrive), the handler is told
(``input_ended``: ACP interrupts the prompts in flight), and every request in flight is
still *answered*: each gets ``drain_timeout`` seconds to finish, then is cancelled and
answers ``-32800``. Then everything in the nursery is cancelled and ``run`` returns
once it has all ended. So a closed connection leaves no task behind and no request
unanswered. A peer that is gone both ways (a closed socket) fails the first send, and
the connection ends at once.

Sending: one message at a time (a FIFO lock), each send shielded from cancellation so
a message is never half-written into a byte stream, and bounded by ``send_timeout``:
a peer that stops reading for that long is treated as gone.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from functools import partial
from typing import Any, Protocol

import attrs
import trio

from . import _dispatch as dispatch
from . import _protocol as rpc

__all__ = [
    "Admit",
    "ConnectionClosed",
    "MessageStream",
    "NdjsonStream",
    "RequestHandler",
    "RpcConnection",
]

log = logging.getLogger("omnigent.rpc")

_CANCEL_NOTICE_TIMEOUT = 1.0
# After the drain's deadline, how long cancelled requests get to send their -32800.
_CANCELLED_ANSWER_TIMEOUT = 1.0

Admit = Callable[[], None]
"""Lets the ordered messages behind a request start before it finishes (idempotent)."""


class ConnectionClosed(Exception):
    """The connection ended before (or while) a message could be sent or answered."""


class MessageStream(Protocol):
    """Whole messages both ways."""

    async def receive(self) -> str | bytes | object | None:
        """The next message (or :data:`~._protocol.TOO_LARGE`); ``None`` at the end."""
        ...

    async def send(self, text: str) -> None:
        """Send one message. Raises ConnectionClosed once the peer is gone."""
        ...


class RequestHandler(Protocol):
    """What a connection serves.

    ``ordered`` names the methods (requests and notifications) that take effect in
    arrival order (see the module docstring); the others run as soon as they arrive.
    """

    methods: frozenset[str]
    notifications: frozenset[str]
    ordered: frozenset[str]

    async def handle_request(self, method: str, params: Any, admit: Admit) -> Any:
        """The result of one call; raise :class:`~._protocol.RpcError` for an error.

        ``admit()`` lets the ordered messages behind this one start before it returns.
        """
        ...

    async def handle_notification(self, method: str, params: Any) -> None: ...

    async def input_ended(self) -> None:
        """Nothing more will be read: wind down what waits on the peer's next word."""
        ...


class NdjsonStream:
    """Newline-delimited JSON over Trio byte streams (stdin/stdout, a pipe, a socket).

    Args:
        receive_stream, send_stream: the two directions (one stream may be both).
        max_message: bytes a line may have; a longer one is skipped and reported as
            :data:`~._protocol.TOO_LARGE`.
    """

    def __init__(
        self,
        receive_stream: trio.abc.ReceiveStream,
        send_stream: trio.abc.SendStream,
        *,
        max_message: int = rpc.MAX_MESSAGE_BYTES,
        chunk: int = 1 << 16,
    ) -> None:
        self._receive = receive_stream
        self._send = send_stream
        self._splitter = rpc.LineSplitter(max_message)
        self._ready: list[bytes | object] = []
        self._ended = False
        self._chunk = chunk

    async def receive(self) -> bytes | object | None:
        while not self._ready:
            if self._ended:
                return None
            try:
                data = await self._receive.receive_some(self._chunk)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                data = b""
            if data:
                self._ready.extend(self._splitter.feed(bytes(data)))
            else:
                self._ended = True
                self._ready.extend(self._splitter.end())
        return self._ready.pop(0)

    async def send(self, text: str) -> None:
        try:
            await self._send.send_all(text.encode("utf-8") + b"\n")
        except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            raise ConnectionClosed(str(exc)) from exc


def _nothing() -> None:
    """The ``admit`` of an unordered request: nothing waits for it."""


class _Arrivals:
    """Tickets for ordered messages, in arrival order; each waits for those before it.

    A ticket is taken in the reader (so in the order messages arrived) and admitted
    when its message finished or let the next ones in. Bounded by the connection's
    limits on requests and notifications in flight.
    """

    def __init__(self) -> None:
        self._next = 0
        self._pending: list[int] = []  # increasing
        self._moved = trio.Event()

    def take(self) -> int:
        ticket = self._next
        self._next += 1
        self._pending.append(ticket)
        return ticket

    def is_next(self, ticket: int) -> bool:
        return bool(self._pending) and self._pending[0] == ticket

    async def wait_turn(self, ticket: int) -> None:
        """Return once every ticket taken before ``ticket`` has been admitted."""
        while not self.is_next(ticket):
            await self._moved.wait()

    def admit(self, ticket: int) -> None:
        """``ticket``'s message no longer holds back the ones behind it (idempotent)."""
        if ticket in self._pending:
            self._pending.remove(ticket)
            moved, self._moved = self._moved, trio.Event()
            moved.set()


@attrs.define(eq=False)
class _Waiting:
    """One outgoing request waiting for its response."""

    done: trio.Event = attrs.field(factory=trio.Event)
    response: rpc.Response | None = None


class RpcConnection:
    """A JSON-RPC 2.0 connection serving ``handler`` over ``stream``.

    Args:
        stream: the messages.
        handler: the methods this side answers.
        max_in_flight: incoming requests handled at once (more are refused); also how
            many ordered notifications may wait for their turn before the reader waits.
        send_timeout: seconds one send may block before the peer counts as gone.
        drain_timeout: once the input ended, seconds the requests in flight get to
            finish before they are cancelled (and answer ``-32800``).
    """

    def __init__(
        self,
        stream: MessageStream,
        handler: RequestHandler,
        *,
        max_in_flight: int = 64,
        send_timeout: float = 30.0,
        drain_timeout: float = 10.0,
    ) -> None:
        self._stream = stream
        self._handler = handler
        self._dispatcher = dispatch.Dispatcher(
            handler.methods, handler.notifications, max_in_flight=max_in_flight
        )
        self._send_timeout = send_timeout
        self._drain_timeout = drain_timeout
        self._max_notes = max_in_flight
        self._send_lock = trio.StrictFIFOLock()
        self._scopes: dict[rpc.RequestId, trio.CancelScope] = {}
        self._waiting: dict[int, _Waiting] = {}
        self._arrivals = _Arrivals()
        self._notes_waiting = 0
        self._idle = trio.Event()  # set whenever nothing incoming is being handled
        self._idle.set()
        self._reading = trio.CancelScope()
        self._nursery: trio.Nursery | None = None
        self._input_ended = False
        self._closed = False

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def input_ended(self) -> bool:
        """Whether nothing more will be read (EOF, or :meth:`stop_reading`)."""
        return self._input_ended

    def stop_reading(self) -> None:
        """Read nothing more and wind down as at end of input (a signal asks for it).

        The requests in flight are still answered (see the module docstring).
        """
        self._reading.cancel()

    @property
    def nursery(self) -> trio.Nursery:
        """The connection's nursery (while :meth:`run` runs): work that ends with it."""
        if self._nursery is None:
            raise RuntimeError("the connection is not running")
        return self._nursery

    def statistics(self) -> dict[str, int]:
        return {
            "incoming_in_flight": self._dispatcher.in_flight,
            "outgoing_waiting": len(self._waiting),
        }

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Serve until the stream ends; then cancel everything the connection started.

        Cancellation: cancelling ``run`` cancels every request and handler task too.
        """
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                task_status.started()
                try:
                    with self._reading:
                        await self._read_loop()
                    await self._drain()
                finally:
                    self._close()
                    nursery.cancel_scope.cancel()
        finally:
            self._nursery = None

    def _end_input(self) -> None:
        self._input_ended = True
        for waiting in self._waiting.values():
            waiting.done.set()  # no response can come: the request fails

    def _close(self) -> None:
        self._end_input()
        self._closed = True

    def _busy(self) -> bool:
        return bool(self._scopes) or self._notes_waiting > 0

    def _settled(self) -> None:
        if not self._busy():
            self._idle.set()

    async def _drain(self) -> None:
        """The input ended: answer every request in flight, then return.

        Cancellation: cancelling ``run`` cuts this short (nothing more is sent).
        """
        self._end_input()
        try:
            await self._handler.input_ended()
        except trio.Cancelled:
            raise
        except Exception:
            log.exception("winding down the connection failed")
        with trio.move_on_after(self._drain_timeout):
            await self._idle.wait()
        if self._busy():
            log.warning(
                "%d requests still running at the end of input: cancelled", len(self._scopes)
            )
            for scope in self._scopes.values():
                scope.cancel()
            with trio.move_on_after(_CANCELLED_ANSWER_TIMEOUT):
                await self._idle.wait()

    async def _read_loop(self) -> None:
        while True:
            raw = await self._stream.receive()
            if raw is None:
                return
            if raw is rpc.TOO_LARGE:
                await self._send_quietly(
                    rpc.error_response(
                        None, rpc.INVALID_REQUEST, "Invalid Request: the message is too large"
                    )
                )
                continue
            if not isinstance(raw, str | bytes):
                continue
            decoded = rpc.decode(raw)
            if isinstance(decoded, dict):
                await self._send_quietly(decoded)
                continue
            await self._act(self._dispatcher.receive(decoded))

    async def _act(self, action: dispatch.Action) -> None:
        if isinstance(action, dispatch.Run):
            scope = trio.CancelScope()
            self._scopes[action.request.id] = scope
            self._idle = trio.Event() if self._idle.is_set() else self._idle
            ordered = action.request.method in self._handler.ordered
            ticket = self._arrivals.take() if ordered else None
            self.nursery.start_soon(self._serve, action.request, scope, ticket)
        elif isinstance(action, dispatch.Notify):
            await self._notify_in_order(action.notification)
        elif isinstance(action, dispatch.Cancel):
            self._scopes[action.id].cancel()
        elif isinstance(action, dispatch.Deliver):
            waiting = self._waiting.get(action.response.id)  # type: ignore[arg-type]
            if waiting is not None:
                waiting.response = action.response
                waiting.done.set()
        elif isinstance(action, dispatch.Reply):
            await self._send_quietly(action.message)
        else:
            log.debug("dropped a message: %s", action.why)

    async def _notify_in_order(self, message: rpc.Notification) -> None:
        """Handle a notification in the reader, after the ordered messages before it.

        Notifications are quick (ACP's ``session/cancel``) and run in the reader, in
        arrival order. An ordered one that arrives while ordered messages before it
        are still waiting for their turn waits in its own task (at most
        ``max_in_flight`` such tasks; past that the reader waits for its turn itself).
        """
        if message.method not in self._handler.ordered:
            await self._notified(message)
            return
        ticket = self._arrivals.take()
        if self._arrivals.is_next(ticket) or self._notes_waiting >= self._max_notes:
            try:
                await self._arrivals.wait_turn(ticket)
                await self._notified(message)
            finally:
                self._arrivals.admit(ticket)
            return
        self._notes_waiting += 1
        self._idle = trio.Event() if self._idle.is_set() else self._idle
        self.nursery.start_soon(self._notify_later, message, ticket)

    async def _notify_later(self, message: rpc.Notification, ticket: int) -> None:
        try:
            await self._arrivals.wait_turn(ticket)
            await self._notified(message)
        finally:
            self._arrivals.admit(ticket)
            self._notes_waiting -= 1
            self._settled()

    async def _notified(self, message: rpc.Notification) -> None:
        try:
            await self._handler.handle_notification(message.method, message.params)
        except trio.Cancelled:
            raise
        except Exception:
            log.exception("the %s notification failed", message.method)

    async def _serve(
        self, message: rpc.Request, scope: trio.CancelScope, ticket: int | None
    ) -> None:
        answer: dict[str, Any] | None = None
        admit: Admit = _nothing if ticket is None else partial(self._arrivals.admit, ticket)
        try:
            with scope:
                if ticket is not None:
                    await self._arrivals.wait_turn(ticket)
                answer = await self._answer(message, admit)
            if scope.cancelled_caught:
                answer = rpc.error_response(message.id, rpc.REQUEST_CANCELLED, "Request cancelled")
            if answer is not None:
                await self._send_quietly(answer)
        finally:
            admit()
            del self._scopes[message.id]
            self._dispatcher.finish(message.id)
            self._settled()

    async def _answer(self, message: rpc.Request, admit: Admit) -> dict[str, Any]:
        try:
            result = await self._handler.handle_request(message.method, message.params, admit)
            answer = rpc.response(message.id, result)
            rpc.encode(answer)  # a result JSON cannot carry is our bug, not the peer's
            return answer
        except trio.Cancelled:
            raise
        except rpc.RpcError as error:
            return rpc.error_response(message.id, error.code, error.message, error.data)
        except Exception:
            log.exception("the %s request failed", message.method)
            return rpc.error_response(message.id, rpc.INTERNAL_ERROR, "Internal error")

    # -- sending -----------------------------------------------------------------------

    async def _send(self, message: dict[str, Any]) -> None:
        """Send one message whole.

        Raises:
            ConnectionClosed: the peer is gone (or stopped reading for send_timeout).
        """
        if self._closed:
            raise ConnectionClosed("the connection is closed")
        text = rpc.encode(message)
        async with self._send_lock:
            if self._closed:
                raise ConnectionClosed("the connection is closed")
            with trio.CancelScope(shield=True) as scope:
                scope.deadline = trio.current_time() + self._send_timeout
                try:
                    await self._stream.send(text)
                except ConnectionClosed:
                    self._lost()
                    raise
            if scope.cancelled_caught:
                log.warning("the peer read nothing for %s s: closing", self._send_timeout)
                self._lost()
                raise ConnectionClosed("the peer stopped reading")

    def _lost(self) -> None:
        self._close()
        if self._nursery is not None:
            self._nursery.cancel_scope.cancel()

    async def _send_quietly(self, message: dict[str, Any]) -> None:
        with contextlib.suppress(ConnectionClosed):
            await self._send(message)

    async def notify(self, method: str, params: Any = None) -> None:
        """Send a notification. Raises ConnectionClosed once the peer is gone."""
        await self._send(rpc.notification(method, params))

    async def request(self, method: str, params: Any = None) -> Any:
        """Call the peer's ``method`` and return its result.

        Raises:
            RpcError: the peer answered an error. ConnectionClosed: the connection
            ended first.

        Cancellation: tells the peer with ``$/cancel_request`` (best effort, bounded)
        and stops waiting.
        """
        if self._input_ended:
            raise ConnectionClosed(f"the input ended: {method} could never be answered")
        request_id, message = self._dispatcher.next_request(method, params)
        waiting = _Waiting()
        self._waiting[request_id] = waiting
        try:
            await self._send(message)
            await waiting.done.wait()
        except trio.Cancelled:
            if not waiting.done.is_set() and not self._closed:
                with trio.move_on_after(_CANCEL_NOTICE_TIMEOUT, shield=True):
                    await self._send_quietly(
                        rpc.notification(rpc.CANCEL_REQUEST, {"requestId": request_id})
                    )
            raise
        finally:
            del self._waiting[request_id]
            self._dispatcher.abandon(request_id)
        answer = waiting.response
        if answer is None:
            raise ConnectionClosed(f"the connection closed before {method} was answered")
        if answer.error is not None:
            error = answer.error
            code = error.get("code")
            raise rpc.RpcError(
                code if isinstance(code, int) else rpc.INTERNAL_ERROR,
                str(error.get("message", "error")),
                error.get("data"),
            )
        return answer.result
