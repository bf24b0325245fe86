"""The HTTP shell shared by the scripted fake servers.

Each fake (:class:`~omnigent.testing.MockLLM`, :class:`~omnigent.testing.FakeAnthropic`,
:class:`~omnigent.testing.FakeResponses`) is one pure function from a request to a
:class:`Rendered` answer — status, headers and timed byte parts. This module delivers
such answers two ways: through an ``httpx.MockTransport`` (in memory) and through a
Hypercorn server on a loopback port (Trio worker), so the fakes carry no I/O code.
"""

from __future__ import annotations

import contextlib
import functools
import json
from collections.abc import AsyncIterator, Callable, MutableMapping
from typing import Any, TypeAlias

import attrs
import httpx
import hypercorn.config
import hypercorn.trio
import trio

__all__ = [
    "JSON_HEADERS",
    "MAX_BODY_BYTES",
    "SSE_HEADERS",
    "Rendered",
    "Respond",
    "json_rendered",
    "mock_transport",
    "serve_http",
]

SSE_HEADERS = (("content-type", "text/event-stream"), ("cache-control", "no-cache"))
JSON_HEADERS = (("content-type", "application/json"),)
MAX_BODY_BYTES = 64 * 1024 * 1024
"""Request bodies above this are answered 413 unread (a long CLI conversation is a few MiB)."""


@attrs.frozen
class Rendered:
    """One answer: ``parts`` are ``(delay before, bytes)``; ``hang`` keeps the body open
    after the last part until the client goes away (or the server stops)."""

    status: int
    headers: tuple[tuple[str, str], ...]
    parts: tuple[tuple[float, bytes], ...]
    hang: bool = False


Respond: TypeAlias = Callable[[str, str, bytes], Rendered]
"""``respond(method, path, body) -> Rendered``; the path has no query string."""


def json_rendered(status: int, body: Any) -> Rendered:
    """A JSON answer in one part."""
    return Rendered(status, JSON_HEADERS, ((0.0, json.dumps(body).encode()),))


def error_rendered(status: int, body: Any, retry_after: float | None) -> Rendered:
    """A JSON error answer; ``retry_after`` (seconds), if given, as its header."""
    rendered = json_rendered(status, body)
    if retry_after is None:
        return rendered
    return attrs.evolve(rendered, headers=(*rendered.headers, ("retry-after", f"{retry_after:g}")))


# -- in memory ------------------------------------------------------------------------


def mock_transport(respond: Respond, too_large: Callable[[], Rendered]) -> httpx.MockTransport:
    """An ``httpx.MockTransport`` answering every request (any host) through ``respond``.

    Delays use ``trio.sleep``, so ``autojump_clock`` makes them instant; a hanging
    answer blocks the reader until it is cancelled.
    """

    async def handle(request: httpx.Request) -> httpx.Response:
        body = await request.aread()
        rendered = (
            too_large()
            if len(body) > MAX_BODY_BYTES
            else respond(request.method, request.url.path, body)
        )
        return httpx.Response(
            rendered.status, headers=rendered.headers, stream=_PartsStream(rendered)
        )

    return httpx.MockTransport(handle)


class _PartsStream(httpx.AsyncByteStream):
    """A rendered body for httpx. A plain iterator, not an async generator, so that
    closing it early leaves no half-run generator for Trio to warn about."""

    def __init__(self, rendered: Rendered) -> None:
        self._parts = iter(rendered.parts)
        self._hang = rendered.hang

    def __aiter__(self) -> _PartsStream:
        return self

    async def __anext__(self) -> bytes:
        part = next(self._parts, None)
        if part is None:
            if self._hang:
                await trio.sleep_forever()
            raise StopAsyncIteration
        if part[0]:
            await trio.sleep(part[0])
        return part[1]


# -- over a socket --------------------------------------------------------------------


@contextlib.asynccontextmanager
async def serve_http(
    respond: Respond, too_large: Callable[[], Rendered], *, host: str, port: int
) -> AsyncIterator[str]:
    """Serves ``respond`` over HTTP/1.1; yields the root URL (``http://HOST:PORT``).

    Resource handling: leaving the block stops the server and joins all its tasks.
    Hanging answers are ended first, so closing takes milliseconds even with a stream
    open.
    """
    config = hypercorn.config.Config()
    config.bind = [f"{host}:{port}"]
    config.graceful_timeout = 0.5  # only bounds streams still open after `stopping`
    config.accesslog = None
    config.loglevel = "WARNING"  # no "Running on …" line per test
    stopping = trio.Event()
    app = functools.partial(_asgi, respond, too_large, stopping)
    async with trio.open_nursery() as nursery:
        binds: list[str] = await nursery.start(
            functools.partial(hypercorn.trio.serve, app, config, shutdown_trigger=stopping.wait)
        )
        try:
            yield binds[0]
        finally:
            stopping.set()


async def _asgi(
    respond: Respond,
    too_large: Callable[[], Rendered],
    stopping: trio.Event,
    scope: MutableMapping[str, Any],
    receive: Any,
    send: Any,
) -> None:
    if scope["type"] == "lifespan":
        while (await receive())["type"] != "lifespan.shutdown":
            await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})
        return
    if scope["type"] != "http":
        return
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        chunk = message.get("body", b"")
        size += len(chunk)
        if size <= MAX_BODY_BYTES:
            chunks.append(chunk)
        if not message.get("more_body"):
            break
    if size > MAX_BODY_BYTES:
        rendered = too_large()
    else:
        rendered = respond(scope["method"], scope["path"], b"".join(chunks))
    headers = [(k.encode(), v.encode()) for k, v in rendered.headers]
    await send({"type": "http.response.start", "status": rendered.status, "headers": headers})
    for delay, data in rendered.parts:
        if delay:
            await trio.sleep(delay)
        await send({"type": "http.response.body", "body": data, "more_body": True})
    if rendered.hang:
        await _wait_disconnect_or(stopping, receive)
        return  # without ending the body: the client sees a broken-off stream
    await send({"type": "http.response.body", "body": b"", "more_body": False})


async def _wait_disconnect_or(stopping: trio.Event, receive: Any) -> None:
    async def wait_disconnect(cancel_scope: trio.CancelScope) -> None:
        while (await receive())["type"] != "http.disconnect":
            pass
        cancel_scope.cancel()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(wait_disconnect, nursery.cancel_scope)
        await stopping.wait()
        nursery.cancel_scope.cancel()
