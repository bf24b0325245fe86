"""JSON-RPC 2.0 dispatch: the bookkeeping of one connection, with no I/O.

:class:`Dispatcher` decides what each decoded message means for the connection (messages
as :mod:`._protocol` decodes them): run a request (unless its method
is unknown, ``-32601``; its id is already in flight, ``-32600``; or too many are,
:data:`~._protocol.SERVER_BUSY`), run a notification, cancel an in-flight request
(``$/cancel_request``), deliver a response to the outgoing request waiting for it, or
drop it. The Trio shell (:mod:`._connection`) acts on the answer.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any, TypeAlias

import attrs

from ._protocol import (
    CANCEL_REQUEST,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    SERVER_BUSY,
    Incoming,
    Notification,
    Request,
    RequestId,
    Response,
    error_response,
    request,
    valid_id,
)

__all__ = ["Action", "Cancel", "Deliver", "Dispatcher", "Drop", "Notify", "Reply", "Run"]


@attrs.frozen
class Run:
    """Start handling ``request`` (its id is now in flight)."""

    request: Request


@attrs.frozen
class Notify:
    """Handle ``notification``."""

    notification: Notification


@attrs.frozen
class Cancel:
    """The peer cancelled the in-flight request ``id`` (``$/cancel_request``)."""

    id: RequestId


@attrs.frozen
class Deliver:
    """``response`` answers our outgoing request."""

    response: Response


@attrs.frozen
class Reply:
    """Send ``message`` (an error response) back at once."""

    message: dict[str, Any]


@attrs.frozen
class Drop:
    """Nothing to do (``why`` is for a debug log)."""

    why: str


Action: TypeAlias = Run | Notify | Cancel | Deliver | Reply | Drop


class Dispatcher:
    """The bookkeeping of one connection; see the module docstring.

    Args:
        methods: the request methods the connection answers.
        notifications: the notification methods it handles (others are dropped, as
            JSON-RPC and ACP ask: a notification never gets an answer).
        max_in_flight: incoming requests handled at once; more are refused with
            :data:`SERVER_BUSY` (refused, not queued: a queue would have to be
            unbounded, and blocking the reader could deadlock a handler waiting for
            the peer's answer to one of our requests).
    """

    def __init__(
        self,
        methods: Collection[str],
        notifications: Collection[str] = (),
        *,
        max_in_flight: int = 64,
    ) -> None:
        self.methods = frozenset(methods)
        self.notifications = frozenset(notifications)
        self.max_in_flight = max_in_flight
        self._incoming: set[RequestId] = set()
        self._outgoing: set[int] = set()
        self._next_id = 0

    @property
    def in_flight(self) -> int:
        """Incoming requests being handled."""
        return len(self._incoming)

    def receive(self, message: Incoming) -> Action:
        """What ``message`` means for the connection."""
        if isinstance(message, Response):
            return self._response(message)
        if isinstance(message, Notification):
            if message.method == CANCEL_REQUEST:
                return self._cancel(message.params)
            if message.method in self.notifications:
                return Notify(message)
            return Drop(f"unknown notification {message.method!r}")
        return self._request(message)

    def _request(self, message: Request) -> Action:
        if message.method not in self.methods:
            return Reply(
                error_response(message.id, METHOD_NOT_FOUND, f"Method not found: {message.method}")
            )
        if message.id in self._incoming:
            return Reply(
                error_response(
                    message.id, INVALID_REQUEST, "Invalid Request: this id is already in flight"
                )
            )
        if len(self._incoming) >= self.max_in_flight:
            return Reply(
                error_response(
                    message.id,
                    SERVER_BUSY,
                    f"Server busy: {self.max_in_flight} requests are in flight already",
                )
            )
        self._incoming.add(message.id)
        return Run(message)

    def _cancel(self, params: Any) -> Action:
        request_id = params.get("requestId") if isinstance(params, dict) else None
        if valid_id(request_id) and request_id in self._incoming:
            return Cancel(request_id)
        return Drop("$/cancel_request for no request in flight")

    def _response(self, message: Response) -> Action:
        if isinstance(message.id, int) and message.id in self._outgoing:
            self._outgoing.discard(message.id)
            return Deliver(message)
        return Drop(f"a response to no request of ours ({message.id!r})")

    def finish(self, request_id: RequestId) -> None:
        """The incoming request ``request_id`` was answered (or abandoned)."""
        self._incoming.discard(request_id)

    def next_request(self, method: str, params: Any = None) -> tuple[int, dict[str, Any]]:
        """An id and the message for a new outgoing request (now awaiting a response)."""
        request_id = self._next_id
        self._next_id += 1
        self._outgoing.add(request_id)
        return request_id, request(request_id, method, params)

    def abandon(self, request_id: int) -> None:
        """Stop waiting for a response to our request ``request_id``."""
        self._outgoing.discard(request_id)
