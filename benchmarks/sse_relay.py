"""SSE relay throughput: a bare Quart-Trio endpoint vs omnigent's session stream.

Run: ``python benchmarks/sse_relay.py [--deltas 20000]``

(a) a bare Quart-Trio + Hypercorn endpoint yielding one SSE frame per delta;
(b) omnigent's ``GET /v1/sessions/{id}/stream`` relaying a scripted turn whose ``say``
    streams ``--deltas`` words (one ``response.output_text.delta`` event each),
    persisted by the event bus and coalesced by the relay.

Both are served by Hypercorn on loopback and read end to end by an httpx client
(``aiter_raw`` + split) in the same process, one after the other.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import AsyncIterator
from functools import partial

import httpx
import hypercorn.trio
import trio
from hypercorn.config import Config
from quart_trio import QuartTrio

import omnigent
from omnigent.transports.http._app import create_app


async def _serve(app: QuartTrio, nursery: trio.Nursery, shutdown: trio.Event) -> str:
    config = Config()
    config.bind = ["127.0.0.1:0"]
    config.accesslog = None
    config.errorlog = None
    urls = await nursery.start(
        partial(hypercorn.trio.serve, app, config, shutdown_trigger=shutdown.wait)
    )
    return str(urls[0])


def _bare_app(deltas: int) -> QuartTrio:
    app = QuartTrio("bare")

    @app.get("/bare")
    async def bare() -> object:
        async def frames() -> AsyncIterator[bytes]:
            for i in range(deltas):
                data = json.dumps({"type": "response.output_text.delta", "delta": f"w{i} "})
                yield f"id: {i}\nevent: response.output_text.delta\ndata: {data}\n\n".encode()

        response = app.response_class(frames(), content_type="text/event-stream")
        response.timeout = None
        return response

    return app


async def _count(client: httpx.AsyncClient, method: str, url: str, stop: bytes) -> int:
    """Delta frames read until ``stop`` appears in a frame (or the stream ends)."""
    count, buffer = 0, b""
    async with client.stream(method, url) as response:
        async for chunk in response.aiter_raw():
            buffer += chunk
            *frames, buffer = buffer.split(b"\n\n")
            for frame in frames:
                if b"event: response.output_text.delta" in frame:
                    count += 1
                if stop and stop in frame:
                    return count
    return count


async def bench_bare(deltas: int) -> float:
    shutdown = trio.Event()
    async with trio.open_nursery() as nursery:
        url = await _serve(_bare_app(deltas), nursery, shutdown)
        async with httpx.AsyncClient(base_url=url, timeout=120) as client:
            started = time.perf_counter()
            got = await _count(client, "GET", "/bare", b"")
            elapsed = time.perf_counter() - started
        shutdown.set()
    assert got == deltas, got
    return elapsed


async def bench_omnigent(deltas: int) -> float:
    words = " ".join(f"w{i}" for i in range(deltas))
    spec = {
        "name": "bench",
        "executor": {
            "type": "omnigent",
            "config": {"harness": "scripted", "script": [{"say": words}]},
        },
    }
    shutdown = trio.Event()
    async with omnigent.open_runtime() as rt, trio.open_nursery() as nursery:
        stopping = trio.Event()
        url = await _serve(create_app(rt, stopping=stopping), nursery, shutdown)
        agent = await rt.create_agent(spec)
        session = await rt.create_session(agent.id)
        counted: list[int] = []
        async with httpx.AsyncClient(base_url=url, timeout=120) as client:

            async def read() -> None:
                stream = f"/v1/sessions/{session.id}/stream?after=0"
                counted.append(await _count(client, "GET", stream, b"response.completed"))

            started = time.perf_counter()
            async with trio.open_nursery() as inner:
                inner.start_soon(read)
                body = {
                    "type": "message",
                    "data": {"content": [{"type": "input_text", "text": "go"}]},
                }
                answer = await client.post(f"/v1/sessions/{session.id}/events", json=body)
                assert answer.status_code == 202
            elapsed = time.perf_counter() - started
        stopping.set()
        shutdown.set()
    assert counted == [deltas], counted
    return elapsed


async def main(deltas: int) -> None:
    bare = await bench_bare(deltas)
    print(
        f"(a) bare Quart-Trio, one frame per delta: {deltas} deltas in {bare:.2f} s "
        f"= {deltas / bare:,.0f} deltas/s"
    )
    ours = await bench_omnigent(deltas)
    print(
        f"(b) omnigent session stream (coalesced):  {deltas} deltas in {ours:.2f} s "
        f"= {deltas / ours:,.0f} deltas/s"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--deltas", type=int, default=20_000)
    trio.run(main, parser.parse_args().deltas)
