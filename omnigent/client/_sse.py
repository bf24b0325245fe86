"""A session's SSE stream that resumes by itself after a dropped connection.

:class:`EventStream` iterates typed :class:`~omnigent.model.Event` objects from
``GET /v1/sessions/{id}/stream``. It remembers the id of the last event it yielded;
when the connection drops — a network error, the server restarting, a read that
hears nothing (not even the server's ``: ping``) for ``read_timeout`` — it reconnects
with ``Last-Event-ID`` set to that id, so the server replays exactly what was missed:
no gap, no duplicate. After ``retries`` failed attempts in a row (with a doubling
backoff) it gives up with :class:`~._errors.ServerUnreachable`, the last failure
on its ``__cause__``.

Parsing is pure (:func:`split_frames`, :func:`parse_frame`); an ``event: error`` frame
(the session was deleted, say) raises :class:`~._errors.StreamError`.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import AsyncIterator
from typing import Any

import httpx
import trio

from ..model import Event, event_from_dict
from ._errors import ServerUnreachable, StreamError, transport_reason

__all__ = ["EventStream", "parse_frame", "split_frames"]


def split_frames(buffer: bytes) -> tuple[list[bytes], bytes]:
    """Complete ``\\n\\n``-terminated frames in ``buffer``, and what is left over."""
    *frames, rest = buffer.replace(b"\r\n", b"\n").split(b"\n\n")
    return [f for f in frames if f.strip()], rest


def parse_frame(frame: bytes) -> tuple[str | None, Any] | None:
    """``(event type, decoded data)`` of a frame; ``None`` for a comment (``: ping``)."""
    kind: str | None = None
    data: list[str] = []
    for line in frame.decode("utf-8").split("\n"):
        if not line or line.startswith(":"):
            continue
        field, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if field == "event":
            kind = value
        elif field == "data":
            data.append(value)
    if not data:
        return None
    return kind, json.loads("\n".join(data))


class EventStream:
    """Typed events of one session, resumed across reconnects. Made by ``events()``."""

    def __init__(
        self,
        http: httpx.AsyncClient,
        url: str,
        after: int,
        *,
        headers: dict[str, str] | None = None,
        retries: int = 10,
        backoff: float = 0.2,
        max_backoff: float = 5.0,
        read_timeout: float = 60.0,
    ) -> None:
        self._http = http
        self._url = url
        self._headers = dict(headers or {})
        self._retries = retries
        self._backoff = backoff
        self._max_backoff = max_backoff
        self._read_timeout = read_timeout
        self.last_event_id = after
        self.reconnects = 0
        self._response: httpx.Response | None = None
        self._raw: AsyncIterator[bytes] | None = None
        self._buffer = b""
        self._ready: deque[Event] = deque()
        self._connected_once = False

    def __aiter__(self) -> EventStream:
        return self

    async def __anext__(self) -> Event:
        failures = 0
        while True:
            if self._ready:
                event = self._ready.popleft()
                self.last_event_id = event.event_id
                return event
            try:
                if self._raw is None:
                    await self._connect()
                assert self._raw is not None
                with trio.fail_after(self._read_timeout):
                    chunk = await self._raw.__anext__()
            except (httpx.TransportError, trio.TooSlowError, StopAsyncIteration) as exc:
                await self._disconnect()
                failures += 1
                if failures > self._retries:
                    raise ServerUnreachable(self._url, self._why(exc)) from exc
                await trio.sleep(min(self._backoff * 2 ** (failures - 1), self._max_backoff))
                continue
            failures = 0
            self._take(chunk)

    def _why(self, exc: Exception) -> str:
        if isinstance(exc, StopAsyncIteration):
            return "the server kept ending the stream"
        if isinstance(exc, trio.TooSlowError):
            return f"nothing came for {self._read_timeout:g} s, not even a ping"
        assert isinstance(exc, httpx.TransportError)
        return transport_reason(exc)

    def _take(self, chunk: bytes) -> None:
        frames, self._buffer = split_frames(self._buffer + chunk)
        for frame in frames:
            parsed = parse_frame(frame)
            if parsed is None:
                continue
            kind, data = parsed
            if kind == "error":
                error = data.get("error", {}) if isinstance(data, dict) else {}
                raise StreamError(200, error.get("code", "error"), error.get("message", ""))
            event = event_from_dict(data)
            if event.event_id > self.last_event_id:
                self._ready.append(event)

    async def _connect(self) -> None:
        headers = {**self._headers, "Last-Event-ID": str(self.last_event_id)}
        request = self._http.build_request(
            "GET",
            self._url,
            headers=headers,
            timeout=httpx.Timeout(10.0, read=None),
        )
        response = await self._http.send(request, stream=True)
        if response.status_code != 200:
            body = await response.aread()
            await response.aclose()
            try:
                error = json.loads(body)["error"]
                code, message = error["code"], error["message"]
            except (ValueError, KeyError, TypeError):
                code, message = "http_error", body[:500].decode(errors="replace")
            raise StreamError(response.status_code, code, message)
        if self._connected_once:
            self.reconnects += 1
        self._connected_once = True
        self._response = response
        self._raw = response.aiter_raw()
        self._buffer = b""

    async def _disconnect(self) -> None:
        raw, response = self._raw, self._response
        self._raw, self._response = None, None
        with trio.CancelScope(shield=True):
            if raw is not None:
                await raw.aclose()  # type: ignore[attr-defined]
            if response is not None:
                await response.aclose()

    async def aclose(self) -> None:
        """Close the current connection (idempotent)."""
        await self._disconnect()
