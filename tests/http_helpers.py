"""Helpers for the HTTP transport tests: a real server on loopback, an SSE parser."""

from __future__ import annotations

import json
from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from typing import Any

import attrs
import httpx
import hypercorn.trio
import pytest
import trio
from hypercorn.config import Config

import omnigent
from omnigent.transports.http._app import create_app

# Leaving an httpx stream before its end leaves httpx's inner async generators to
# the finalizer (STACK.md: harmless). Filtered by exact origin, nothing else.
HTTPX_GENERATORS = [
    pytest.mark.filterwarnings(r"ignore:Async generator '(httpx|httpcore)\.:ResourceWarning"),
    pytest.mark.filterwarnings(
        r"ignore:Exception ignored in. <async_generator object (\w+\.__aiter__|"
        r"Response\.aiter_raw) :pytest.PytestUnraisableExceptionWarning"
    ),
]

TERMINAL_RESPONSES = ("response.completed", "response.failed", "response.cancelled")


def scripted(name: str = "bot", script: list[Any] | None = None, **config: Any) -> dict[str, Any]:
    """A scripted agent spec as a dict."""
    cfg: dict[str, Any] = {"harness": "scripted", "script": script or [{"say": "hi"}], **config}
    return {"name": name, "executor": {"type": "omnigent", "config": cfg}}


@attrs.define
class Server:
    url: str
    runtime: omnigent.Runtime
    client: httpx.AsyncClient
    app: Any
    stopping: trio.Event

    async def agent(self, spec: dict[str, Any], *, by_operator: bool = False) -> str:
        """Register ``spec`` as a client does (``POST /v1/agents``), or as the operator.

        The operator's specs (``serve --agents``, the library) may name programs and
        working directories a client's may not (``omnigent.spec._trust``).
        """
        if by_operator:
            return (await self.runtime.create_agent(spec)).id
        answer = await self.client.post("/v1/agents", json=spec)
        assert answer.status_code == 201, answer.text
        agent_id: str = answer.json()["id"]
        return agent_id

    async def session(
        self, spec: dict[str, Any] | None = None, *, by_operator: bool = False, **body: Any
    ) -> str:
        agent_id = await self.agent(spec or scripted(), by_operator=by_operator)
        answer = await self.client.post("/v1/sessions", json={"agent_id": agent_id, **body})
        assert answer.status_code == 201, answer.text
        session_id: str = answer.json()["id"]
        return session_id

    async def message(self, session_id: str, text: str = "hello") -> dict[str, Any]:
        body = {"type": "message", "data": {"content": [{"type": "input_text", "text": text}]}}
        answer = await self.client.post(f"/v1/sessions/{session_id}/events", json=body)
        assert answer.status_code == 202, answer.text
        out: dict[str, Any] = answer.json()
        return out


@asynccontextmanager
async def serve_runtime(
    runtime: omnigent.Runtime, **app_options: Any
) -> AsyncIterator[tuple[str, Any, trio.Event]]:
    """Serve ``runtime`` on 127.0.0.1 port 0; yields (url, app, stopping)."""
    stopping = trio.Event()
    shutdown = trio.Event()
    app = create_app(runtime, stopping=stopping, **app_options)
    config = Config()
    config.bind = ["127.0.0.1:0"]
    config.graceful_timeout = 2.0
    config.accesslog = None
    config.errorlog = None
    async with trio.open_nursery() as nursery:
        urls = await nursery.start(
            partial(hypercorn.trio.serve, app, config, shutdown_trigger=shutdown.wait)
        )
        try:
            yield urls[0], app, stopping
        finally:
            stopping.set()
            shutdown.set()


@asynccontextmanager
async def open_server(
    db: str | None = None, *, runtime_options: dict[str, Any] | None = None, **app_options: Any
) -> AsyncIterator[Server]:
    """A runtime on ``db``, served over loopback, with an httpx client for it."""
    async with (
        omnigent.open_runtime(db, **(runtime_options or {})) as runtime,
        serve_runtime(runtime, **app_options) as (url, app, stopping),
        httpx.AsyncClient(base_url=url, timeout=10) as client,
    ):
        yield Server(url, runtime, client, app, stopping)


@attrs.frozen
class Frame:
    event: str | None
    data: Any
    id: int | None
    comment: bool = False


def parse_frames(buffer: bytes) -> tuple[list[Frame], bytes]:
    """Complete frames in ``buffer`` and the incomplete rest."""
    frames: list[Frame] = []
    while b"\n\n" in buffer:
        raw, buffer = buffer.split(b"\n\n", 1)
        fields: dict[str, str] = {}
        comment = False
        for line in raw.decode().split("\n"):
            if line.startswith(":"):
                comment = True
                continue
            name, _, value = line.partition(": ")
            fields[name] = value
        if comment and not fields:
            frames.append(Frame(None, None, None, comment=True))
            continue
        frames.append(
            Frame(
                fields.get("event"),
                json.loads(fields["data"]) if "data" in fields else None,
                int(fields["id"]) if "id" in fields else None,
            )
        )
    return frames, buffer


class SSEReader:
    """Frames of a streaming response, read as they arrive (``aiter_raw`` + split)."""

    def __init__(self, response: httpx.Response) -> None:
        self.response = response
        self._chunks = response.aiter_raw()
        self._buffer = b""
        self._ready: deque[Frame] = deque()

    async def next(self, *, comments: bool = False) -> Frame | None:
        """The next frame, or None when the stream ended."""
        while True:
            while self._ready:
                frame = self._ready.popleft()
                if comments or not frame.comment:
                    return frame
            try:
                chunk = await self._chunks.__anext__()
            except StopAsyncIteration:
                return None
            frames, self._buffer = parse_frames(self._buffer + chunk)
            self._ready.extend(frames)

    async def read_until(self, stop: Any = None, *, count: int | None = None) -> list[Frame]:
        """Event frames until ``stop(frame)`` (inclusive), ``count`` frames, or the end."""
        seen: list[Frame] = []
        while (frame := await self.next()) is not None:
            seen.append(frame)
            if (stop is not None and stop(frame)) or (count is not None and len(seen) >= count):
                break
        return seen

    async def aclose(self) -> None:
        await self._chunks.aclose()


@asynccontextmanager
async def open_stream(
    client: httpx.AsyncClient, method: str, url: str, **options: Any
) -> AsyncIterator[SSEReader]:
    """A streaming request and its frame reader, both closed on exit."""
    async with client.stream(method, url, **options) as response:
        reader = SSEReader(response)
        try:
            yield reader
        finally:
            await reader.aclose()


def is_terminal_status(frame: Frame) -> bool:
    return frame.event == "session.status" and frame.data["status"] in (
        "idle",
        "failed",
        "cancelled",
    )


async def wait_for(predicate: Any, timeout: float = 5.0, step: float = 0.005) -> None:
    with trio.fail_after(timeout):
        while not predicate():
            await trio.sleep(step)
