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
background work in it (:attr:`RpcConnection.nursery`). When the stream ends — the peer
closed it, or went away — everything in the nursery is cancelled, outgoing requests
still waiting fail with :class:`ConnectionClosed`, and ``run`` returns once it has all
ended. So a closed connection leaves no task behind.

Sending: one message at a time (a FIFO lock), each send shielded from cancellation so
a message is never half-written into a byte stream, and bounded by ``send_timeout``:
a peer that stops reading for that long is treated as gone.
"""

from __future__ import annotations

import contextlib
import logging
from typing import Any, Protocol

import attrs
import trio

from . import _dispatch as dispatch
from . import _protocol as rpc

__all__ = ["ConnectionClosed", "MessageStream", "NdjsonStream", "RequestHandler", "RpcConnection"]

log = logging.getLogger("omnigent.rpc")

_CANCEL_NOTICE_TIMEOUT = 1.0


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
    """What a connection serves."""

    methods: frozenset[str]
    notifications: frozenset[str]

    async def handle_request(self, method: str, params: Any) -> Any:
        """The result of one call; raise :class:`~._protocol.RpcError` for an error."""
        ...

    async def handle_notification(self, method: str, params: Any) -> None: ...


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
        max_in_flight: incoming requests handled at once (more are refused).
        send_timeout: seconds one send may block before the peer counts as gone.
    """

    def __init__(
        self,
        stream: MessageStream,
        handler: RequestHandler,
        *,
        max_in_flight: int = 64,
        send_timeout: float = 30.0,
    ) -> None:
        self._stream = stream
        self._handler = handler
        self._dispatcher = dispatch.Dispatcher(
            handler.methods, handler.notifications, max_in_flight=max_in_flight
        )
        self._send_timeout = send_timeout
        self._send_lock = trio.StrictFIFOLock()
        self._scopes: dict[rpc.RequestId, trio.CancelScope] = {}
        self._waiting: dict[int, _Waiting] = {}
        self._nursery: trio.Nursery | None = None
        self._closed = False

    @property
    def closed(self) -> bool:
        return self._closed

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
                    await self._read_loop()
                finally:
                    self._close()
                    nursery.cancel_scope.cancel()
        finally:
            self._nursery = None

    def _close(self) -> None:
        self._closed = True
        for waiting in self._waiting.values():
            waiting.done.set()  # no response: the request fails with ConnectionClosed

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
            self.nursery.start_soon(self._serve, action.request, scope)
        elif isinstance(action, dispatch.Notify):
            await self._notified(action.notification)
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

    async def _notified(self, message: rpc.Notification) -> None:
        # Run in the reader, in order: ACP's notifications (session/cancel) are quick,
        # and their order relative to the requests around them matters.
        try:
            await self._handler.handle_notification(message.method, message.params)
        except trio.Cancelled:
            raise
        except Exception:
            log.exception("the %s notification failed", message.method)

    async def _serve(self, message: rpc.Request, scope: trio.CancelScope) -> None:
        answer: dict[str, Any] | None = None
        try:
            with scope:
                answer = await self._answer(message)
            if scope.cancelled_caught:
                answer = rpc.error_response(message.id, rpc.REQUEST_CANCELLED, "Request cancelled")
        finally:
            del self._scopes[message.id]
            self._dispatcher.finish(message.id)
        if answer is not None:
            await self._send_quietly(answer)

    async def _answer(self, message: rpc.Request) -> dict[str, Any]:
        try:
            result = await self._handler.handle_request(message.method, message.params)
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
