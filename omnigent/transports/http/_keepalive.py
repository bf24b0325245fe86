"""Keep-alive after an early answer: drain the request body, or close the connection.

A route may answer before the request body has arrived — an unknown route's ``404``,
a ``413`` decided from ``Content-Length``, a ``415``. With Hypercorn's HTTP/1.1 and
Quart-Trio, the connection is then stuck: Hypercorn can neither start the next request
(the client is still sending the first body) nor close (the task that would close it
is cancelled as the request ends), so the next request on that connection is never
answered and a pooling proxy hangs on it.

:class:`SettleBodies` wraps the ASGI app and fixes both ends:

* **Drain.** When the response starts before the body is complete, it waits — at most
  :data:`DRAIN_SECONDS` — for the rest of the body, which Quart keeps reading meanwhile
  (and discards past its size limit, so memory stays bounded however large the body).
  Once the body is complete the connection is reused as usual, and a client that sends
  its whole body before reading (most do) reads the answer.
* **Close.** If the body is still incomplete, the response says ``Connection: close``,
  and its last message is sent in a shielded scope (bounded by :data:`CLOSE_SECONDS`),
  so that Hypercorn's close of the connection runs to its end.

Cancellation: only the final send is shielded, and only for :data:`CLOSE_SECONDS`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any, Final

import trio

__all__ = ["CLOSE_SECONDS", "DRAIN_SECONDS", "SettleBodies"]

DRAIN_SECONDS: Final = 2.0
"""How long a response waits for the rest of a request body it did not read."""
CLOSE_SECONDS: Final = 5.0
"""How long the last message of a response may take once it is shielded."""

Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[..., Awaitable[None]]


class SettleBodies:
    """ASGI middleware: a request body is drained or its connection closed.

    Args:
        app: the ASGI app (Quart's ``asgi_app``).
    """

    def __init__(self, app: ASGIApp) -> None:
        self._app = app

    async def __call__(self, scope: Message, receive: Receive, send: Send) -> None:
        if scope.get("type") != "http":
            await self._app(scope, receive, send)
            return
        body_done = trio.Event()

        async def tracking_receive() -> Message:
            message = await receive()
            kind = message.get("type")
            if kind == "http.disconnect" or (
                kind == "http.request" and not message.get("more_body", False)
            ):
                body_done.set()
            return message

        async def settling_send(message: Message) -> None:
            kind = message.get("type")
            if kind == "http.response.start" and not body_done.is_set():
                with trio.move_on_after(DRAIN_SECONDS):
                    await body_done.wait()
                if not body_done.is_set():
                    headers = [*message.get("headers", ()), (b"connection", b"close")]
                    message = {**message, "headers": headers}
            if kind == "http.response.body" and not message.get("more_body", False):
                # Hypercorn closes (or recycles) the connection inside this send; a
                # cancel arriving meanwhile (the request ending) must not cut it short.
                with trio.CancelScope(shield=True) as scope_:
                    scope_.deadline = trio.current_time() + CLOSE_SECONDS
                    await send(message)
                return
            await send(message)

        await self._app(scope, tracking_receive, settling_send)
