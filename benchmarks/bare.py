"""The baselines' servers: the stack alone (Quart-Trio on Hypercorn, httpx), no omnigent.

Run one role per process; each prints ``… serving on URL`` when ready:

``python benchmarks/bare.py floor --model URL``
    ``POST /relay`` with a Chat Completions body streams the model's answer from
    ``URL`` (``…/v1``) and relays it as the SSE frames omnigent sends for a turn
    (``response.created``, one ``response.output_text.delta`` per model delta with
    the same fields, ``response.completed``). A reader task parses the model's raw
    chunks into frames on a bounded channel (the frames one read completes as one
    item); the response writes every frame that is
    ready as one chunk (coalesced across network reads — what omnigent's SSE body
    does) — with no runtime, no event log and no persistence: what the stack itself
    costs.
    Used by ``benchmarks/relay.py``.

``python benchmarks/bare.py health``
    An app with one route, ``GET /health``: what a Quart-Trio app on Hypercorn takes
    to start. Used by ``benchmarks/startup.py``.

``python benchmarks/bare.py model --deltas N --interval S``
    A Chat Completions endpoint (``POST /v1/chat/completions``) streaming ``N`` content
    deltas ``S`` seconds apart, each one write whose text is the moment it was sent
    (``time.time()``), so a reader can tell how long a delta took to reach it.

``python benchmarks/bare.py fanout``
    ``GET /stream``: an SSE stream that waits (a bare open stream) until ``POST
    /start?deltas=N&interval=S`` broadcasts ``N`` delta frames of omnigent's shape, each
    built once and sent to every open stream, ``S`` seconds apart, each stamped with
    the moment it was sent; every stream writes the frames that are ready as one
    chunk. Used by ``benchmarks/fanout.py`` and ``benchmarks/scale.py``.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import time
from collections.abc import AsyncIterator
from functools import partial
from typing import Any

import httpx
import hypercorn.trio
import trio
from hypercorn.config import Config
from quart import Response, request
from quart_trio import QuartTrio

_ENCODE = json.JSONEncoder(separators=(",", ":")).encode


def frame(event_id: int, data: dict[str, Any]) -> bytes:
    """One SSE frame, as omnigent writes it."""
    return f"id: {event_id}\nevent: {data['type']}\ndata: {_ENCODE(data)}\n\n".encode()


def delta_frame(event_id: int, text: str) -> bytes:
    """A ``response.output_text.delta`` frame with every field omnigent's has."""
    return frame(
        event_id,
        {
            "type": "response.output_text.delta",
            "response_id": "resp_0123456789abcdef01234567",
            "item_id": "item_0123456789abcdef01234567",
            "delta": text,
            "event_id": event_id,
            "session_id": "conv_0123456789abcdef01234567",
            "created_at": round(time.time(), 3),
        },
    )


def _sse(body: AsyncIterator[bytes]) -> Response:
    response = Response(body, content_type="text/event-stream")
    response.timeout = None
    return response


# -- floor: relay a model stream ---------------------------------------------------------


def floor_app(model_url: str, http: httpx.AsyncClient) -> QuartTrio:
    app = QuartTrio("floor")

    @app.post("/relay")
    async def relay() -> Response:
        body = await request.get_json()
        # A reader task turns the model's chunks into frames; the response drains
        # every frame that is ready into one chunk — coalesced across network reads,
        # as omnigent's SSE body does, so a model writing one delta per write does not
        # cost one Quart send per delta here either.
        send, receive = trio.open_memory_channel[bytes](64)
        last = [1]  # the id of the last frame sent

        async def read_model() -> None:
            async with send:
                with contextlib.suppress(trio.BrokenResourceError):  # the client went away
                    await _relay_model(http, f"{model_url}/chat/completions", body, send, last)

        app.nursery.start_soon(read_model)
        info = {"id": "resp_0123456789abcdef01234567", "status": "in_progress"}

        async def frames() -> AsyncIterator[bytes]:
            try:
                yield frame(1, {"type": "response.created", "response": info})
                async for first in receive:
                    ready = [first]
                    while True:
                        try:
                            ready.append(receive.receive_nowait())
                        except (trio.WouldBlock, trio.EndOfChannel):
                            break
                    yield b"".join(ready)
                done = {"type": "response.completed", "response": {**info, "status": "completed"}}
                yield frame(last[0] + 1, done)
            finally:
                receive.close()

        return _sse(frames())

    return app


async def _relay_model(
    http: httpx.AsyncClient,
    url: str,
    body: Any,
    send: trio.MemorySendChannel[bytes],
    last: list[int],
) -> None:
    """Read the model's raw chunks; send the delta frames each one completes."""
    buffer = b""
    async with http.stream("POST", url, json=body) as answer:
        async for chunk in answer.aiter_raw():
            *complete, buffer = (buffer + chunk).split(b"\n\n")
            out = []
            for raw in complete:
                payload = raw.removeprefix(b"data: ")
                if payload == b"[DONE]":
                    continue
                for choice in json.loads(payload)["choices"]:
                    if text := choice["delta"].get("content"):
                        last[0] += 1
                        out.append(delta_frame(last[0], text))
            if out:  # the frames one network read completes: one item on the channel
                await send.send(b"".join(out))


# -- model: a paced Chat Completions stream ------------------------------------------------


def model_app(deltas: int, interval: float) -> QuartTrio:
    app = QuartTrio("model")

    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        data = {"id": "chatcmpl-paced", "object": "chat.completion.chunk", "choices": [choice]}
        return b"data: " + _ENCODE(data).encode() + b"\n\n"

    @app.post("/v1/chat/completions")
    async def completions() -> Response:
        await request.get_data()

        async def frames() -> AsyncIterator[bytes]:
            yield chunk({"role": "assistant", "content": ""})
            for i in range(deltas):
                if i:
                    await trio.sleep(interval)
                yield chunk({"content": f"{time.time():.6f} "})
            yield chunk({}, "stop") + b"data: [DONE]\n\n"

        return _sse(frames())

    return app


# -- health: an app that only answers GET /health ------------------------------------------


def health_app() -> QuartTrio:
    app = QuartTrio("health")

    @app.get("/health")
    async def health() -> dict[str, str]:
        return {"status": "ok"}

    return app


# -- fanout: one broadcast to many open streams -------------------------------------------


def fanout_app() -> QuartTrio:
    app = QuartTrio("fanout")
    streams: set[trio.MemorySendChannel[bytes]] = set()

    @app.get("/stream")
    async def stream() -> Response:
        send, receive = trio.open_memory_channel[bytes](64)
        streams.add(send)

        async def frames() -> AsyncIterator[bytes]:
            try:
                yield b": open\n\n"
                async for first in receive:
                    ready = [first]
                    while True:
                        try:
                            ready.append(receive.receive_nowait())
                        except trio.WouldBlock:
                            break
                    yield b"".join(ready)
            finally:
                streams.discard(send)

        return _sse(frames())

    @app.post("/start")
    async def start() -> dict[str, int]:
        deltas = int(request.args["deltas"])
        interval = float(request.args["interval"])
        for i in range(deltas):
            if i:
                await trio.sleep(interval)
            data = delta_frame(i + 1, f"{time.time():.6f} ")
            for send in list(streams):
                send.send_nowait(data)
        return {"streams": len(streams)}

    @app.get("/count")
    async def count() -> dict[str, int]:
        return {"streams": len(streams)}

    return app


async def _serve(
    app: QuartTrio, role: str, http: httpx.AsyncClient | None = None, *, settle_gc: bool = False
) -> None:
    config = Config()
    config.bind = ["127.0.0.1:0"]
    config.accesslog = None
    config.errorlog = None
    config.backlog = 2048
    async with trio.open_nursery() as nursery:
        urls = await nursery.start(partial(hypercorn.trio.serve, app, config))
        if settle_gc:  # what omnigent._gc.settle_after_startup does, without omnigent
            gc.collect()
            gc.freeze()
            gc.set_threshold(*gc.get_threshold()[:2], 100)
        print(f"{role} serving on {urls[0]}", flush=True)


async def main(args: argparse.Namespace) -> None:
    if args.role == "floor":
        async with httpx.AsyncClient(timeout=httpx.Timeout(10.0, read=300.0)) as http:
            await _serve(floor_app(args.model, http), "floor", http)
    elif args.role == "model":
        await _serve(model_app(args.deltas, args.interval), "model")
    elif args.role == "health":
        await _serve(health_app(), "health")
    else:
        await _serve(fanout_app(), "fanout", settle_gc=args.settled_gc)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    roles = parser.add_subparsers(dest="role", required=True)
    roles.add_parser("floor").add_argument("--model", required=True, help="base URL (…/v1)")
    roles.add_parser("health")
    model = roles.add_parser("model")
    model.add_argument("--deltas", type=int, default=500)
    model.add_argument("--interval", type=float, default=0.002)
    fanout = roles.add_parser("fanout")
    fanout.add_argument(
        "--settled-gc",
        action="store_true",
        help="once up, set the collector as omnigent serve does (omnigent/_gc.py)",
    )
    trio.run(main, parser.parse_args())
