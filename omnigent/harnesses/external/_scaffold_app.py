"""The ASGI app behind :mod:`omnigent.harnesses.scaffold`: routes, turns, the stream.

One :class:`HarnessApp` serves one conversation. ``POST /v1/sessions/{id}/events``
with ``message`` starts a turn when none runs (the answer is the turn's SSE stream)
and is an injection otherwise (``204``); ``interrupt`` cancels the running turn;
``tool_result``, ``approval`` and ``policy_verdict`` answer what the turn is waiting
for. Every request must carry ``Authorization: Bearer <OMNIGENT_HARNESS_AUTH_TOKEN>``
(``401`` otherwise); bodies are bounded (``413``); a bad body is ``422``.

The turn runs in the request's own task (a nursery opened by the stream), so it ends
with its response: an interrupt, a client that goes away, or shutdown cancels it.
Its frames go through a bounded channel and leave in coalesced chunks.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Awaitable, Callable
from typing import Any

import trio

from ._scaffold_turn import HarnessTurn, TurnBody

__all__ = ["MAX_BODY", "HarnessApp"]

log = logging.getLogger("omnigent.harnesses.external")

MAX_BODY = 32 << 20
_EVENTS = re.compile(r"^/v1/sessions/([^/]+)/events$")
_JSON = [(b"content-type", b"application/json")]
_SSE = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")]

Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


class HarnessApp:
    """An ASGI app running ``body`` for each turn of one conversation."""

    def __init__(self, body: TurnBody, *, conversation_id: str, token: str | None) -> None:
        self._body = body
        self.conversation_id = conversation_id
        self._token = token
        self.turn: HarnessTurn | None = None
        self.stopping = trio.Event()

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await _lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        if self._token is not None and _header(scope, b"authorization") != (
            f"Bearer {self._token}".encode()
        ):
            await _answer(send, 401, {"error": {"code": "unauthorized", "message": "bad token"}})
            return
        path, method = scope["path"], scope["method"]
        if path == "/health" and method == "GET":
            await _answer(send, 200, {"status": "ok"})
            return
        if _EVENTS.fullmatch(path) is None or method != "POST":
            await _answer(send, 404, {"error": {"code": "not_found", "message": path}})
            return
        try:
            event = json.loads(await _read_body(receive))
        except _TooLarge:
            await _answer(send, 413, _error("body_too_large", f"bodies are at most {MAX_BODY}"))
            return
        except ValueError:
            await _answer(send, 422, _error("invalid_json", "the body is not JSON"))
            return
        await self._event(event, receive, send)

    async def _event(self, event: Any, receive: Receive, send: Send) -> None:
        kind = event.get("type") if isinstance(event, dict) else None
        turn = self.turn
        if kind == "message":
            if not isinstance(event.get("content"), list):
                await _answer(send, 422, _error("invalid_request", "content must be a list"))
            elif turn is not None:
                turn.inject(event["content"])
                await _no_content(send)
            else:
                await self._run_turn(event, receive, send)
            return
        if kind == "interrupt":
            if turn is not None:
                turn.cancel()
            await _no_content(send)
            return
        if kind in ("tool_result", "approval", "policy_verdict"):
            if turn is None or not turn.answer(event):
                await _answer(send, 404, _error("not_waiting", f"nothing waits for this {kind}"))
            else:
                await _no_content(send)
            return
        await _answer(send, 422, _error("invalid_request", f"unknown event type {kind!r}"))

    async def _run_turn(self, event: dict[str, Any], receive: Receive, send: Send) -> None:
        send_frames, frames = trio.open_memory_channel[bytes](256)
        turn = HarnessTurn(event, send_frames)
        self.turn = turn
        try:
            await send({"type": "http.response.start", "status": 200, "headers": _SSE})
            async with trio.open_nursery() as nursery:
                nursery.start_soon(turn.run, self._body)
                nursery.start_soon(_watch_disconnect, receive, nursery.cancel_scope)
                nursery.start_soon(_cancel_when, self.stopping, turn)
                await _stream(frames, send)
                nursery.cancel_scope.cancel()
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            if self.turn is turn:
                self.turn = None


async def _stream(frames: trio.MemoryReceiveChannel[bytes], send: Send) -> None:
    """Send frames as they come, all that are ready together in one chunk."""
    async with frames:
        async for first in frames:
            chunk = [first]
            while True:
                try:
                    chunk.append(frames.receive_nowait())
                except (trio.WouldBlock, trio.EndOfChannel):
                    break
            await send({"type": "http.response.body", "body": b"".join(chunk), "more_body": True})


async def _watch_disconnect(receive: Receive, scope: trio.CancelScope) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
    scope.cancel()


async def _cancel_when(event: trio.Event, turn: HarnessTurn) -> None:
    await event.wait()
    turn.cancel()


async def _lifespan(receive: Receive, send: Send) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


class _TooLarge(Exception):
    pass


async def _read_body(receive: Receive) -> bytes:
    body = bytearray()
    while True:
        message = await receive()
        body += message.get("body", b"")
        if len(body) > MAX_BODY:
            raise _TooLarge()
        if not message.get("more_body"):
            return bytes(body)


def _header(scope: dict[str, Any], name: bytes) -> bytes | None:
    for key, value in scope.get("headers", ()):
        if key.lower() == name:
            return bytes(value)
    return None


def _error(code: str, message: str) -> dict[str, Any]:
    return {"error": {"code": code, "message": message}}


async def _answer(send: Send, status: int, body: Any) -> None:
    await send({"type": "http.response.start", "status": status, "headers": _JSON})
    await send({"type": "http.response.body", "body": json.dumps(body).encode()})


async def _no_content(send: Send) -> None:
    await send({"type": "http.response.start", "status": 204, "headers": []})
    await send({"type": "http.response.body", "body": b""})
