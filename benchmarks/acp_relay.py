"""ACP relay: first-chunk latency and a 20,000-delta turn over stdio and the WebSocket, vs SSE.

Run: ``python benchmarks/acp_relay.py [--deltas 20000] [--repeat 3] [--prompts 30]``

A scripted turn whose ``say`` streams ``--deltas`` words (one
``response.output_text.delta`` event each, persisted by the event bus) is read end to
end three ways, in the same run:

(a) HTTP/SSE: ``POST …/events`` then ``GET /v1/sessions/{id}/stream`` (the coalescing
    SSE relay), read with httpx ``aiter_raw``; Hypercorn on loopback, in process, on a
    SQLite file (as the stdio process is).
(b) stdio: ``omnigent stdio`` in a subprocess (as an editor runs it), a raw NDJSON
    JSON-RPC client on its pipes: ``session/prompt`` until its answer.
(c) WebSocket: ``GET /v1/ws`` on the same kind of in-process server, a trio-websocket
    client: ``session/prompt`` until its answer.

Latency: ``--prompts`` short prompts on one open session each way, the time from
sending the message (``POST …/events`` with the session's stream already open; a
``session/prompt``) to its first text chunk (an SSE frame carrying a
``response.output_text.delta``; an ``agent_message_chunk``). The median and p90 of each
are compared with HTTP's: an ACP figure more than 1.2x the HTTP one is flagged.

Then ``--cancels`` prompts over stdio and over the WebSocket are each cancelled after
their first chunk: the time from ``session/cancel`` to the ``cancelled`` answer.

Each turn reports the seconds from sending the message/prompt to the end of the turn, the
deltas per second, and how many frames (SSE chunks / ``agent_message_chunk``
notifications) carried them: the ACP relay merges the deltas that are ready together
into one chunk. The text received is checked against what was said.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import hypercorn.trio
import trio
import trio_websocket
import yaml
from hypercorn.config import Config

import omnigent
from omnigent.rpc import MAX_MESSAGE_BYTES
from omnigent.transports.http._app import create_app


def _spec(deltas: int) -> dict[str, Any]:
    words = " ".join(f"w{i}" for i in range(deltas))
    return {
        "name": "bench",
        "executor": {
            "type": "omnigent",
            "config": {"harness": "scripted", "script": [{"say": words}]},
        },
    }


def _expected(deltas: int) -> str:
    return " ".join(f"w{i}" for i in range(deltas))


@asynccontextmanager
async def _file_runtime() -> AsyncIterator[omnigent.Runtime]:
    """A runtime on a SQLite file, as ``omnigent stdio`` and ``serve`` run (not memory)."""
    with tempfile.TemporaryDirectory() as tmp:
        async with omnigent.open_runtime(f"sqlite:///{tmp}/bench.db") as rt:
            yield rt


@asynccontextmanager
async def _served(rt: omnigent.Runtime) -> AsyncIterator[str]:
    config = Config()
    config.bind = ["127.0.0.1:0"]
    config.accesslog = None
    config.errorlog = None
    config.websocket_max_message_size = MAX_MESSAGE_BYTES
    shutdown = trio.Event()
    stopping = trio.Event()
    async with trio.open_nursery() as nursery:
        urls = await nursery.start(
            partial(
                hypercorn.trio.serve,
                create_app(rt, stopping=stopping),
                config,
                shutdown_trigger=shutdown.wait,
            )
        )
        try:
            yield str(urls[0])
        finally:
            stopping.set()
            shutdown.set()


async def bench_sse(deltas: int) -> tuple[float, int]:
    async with _file_runtime() as rt, _served(rt) as url:
        agent = await rt.create_agent(_spec(deltas))
        session = await rt.create_session(agent.id)
        frames = count = 0
        async with httpx.AsyncClient(base_url=url, timeout=120) as client:
            stream_url = f"/v1/sessions/{session.id}/stream?after=0"
            started = time.perf_counter()
            body = {"type": "message", "data": {"content": [{"type": "input_text", "text": "go"}]}}
            answer = await client.post(f"/v1/sessions/{session.id}/events", json=body)
            assert answer.status_code == 202
            buffer = b""
            async with client.stream("GET", stream_url) as response:
                chunks = response.aiter_raw()
                try:
                    async for chunk in chunks:
                        frames += 1
                        buffer += chunk
                        *complete, buffer = buffer.split(b"\n\n")
                        count += sum(b"event: response.output_text.delta" in f for f in complete)
                        if any(b"event: response.completed" in f for f in complete):
                            break
                finally:
                    await chunks.aclose()  # type: ignore[attr-defined]
            elapsed = time.perf_counter() - started
    assert count == deltas, count
    return elapsed, frames


class _Counter:
    def __init__(self) -> None:
        self.text: list[str] = []
        self.chunks = 0

    def take(self, message: dict[str, Any]) -> None:
        update = message.get("params", {}).get("update", {})
        if update.get("sessionUpdate") == "agent_message_chunk":
            self.chunks += 1
            self.text.append(update["content"]["text"])


async def _acp_turn(
    send: Callable[[dict[str, Any]], Awaitable[None]],
    receive: Callable[[], Awaitable[dict[str, Any]]],
    cwd: str,
) -> tuple[float, _Counter]:
    """initialize, session/new, then a timed session/prompt; the time and what came."""
    await send(
        {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1}}
    )
    assert "result" in await receive()
    await send(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "session/new",
            "params": {"cwd": cwd, "mcpServers": []},
        }
    )
    session_id = (await receive())["result"]["sessionId"]
    counter = _Counter()
    prompt = {"sessionId": session_id, "prompt": [{"type": "text", "text": "go"}]}
    started = time.perf_counter()
    await send({"jsonrpc": "2.0", "id": 2, "method": "session/prompt", "params": prompt})
    while True:
        message = await receive()
        if message.get("id") == 2:
            assert message["result"] == {"stopReason": "end_turn"}, message
            return time.perf_counter() - started, counter
        counter.take(message)


Transport = tuple[
    Callable[[dict[str, Any]], Awaitable[None]], Callable[[], Awaitable[dict[str, Any]]]
]


@asynccontextmanager
async def _stdio(spec: dict[str, Any]) -> AsyncIterator[Transport]:
    """``omnigent stdio`` in a subprocess, and NDJSON send/receive on its pipes."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench.yaml"
        path.write_text(yaml.safe_dump(spec))
        command = [sys.executable, "-m", "omnigent", "stdio", "--agent", str(path)]
        command += ["--db", f"sqlite:///{tmp}/bench.db"]
        env = {**os.environ, "OMNIGENT_HOME": tmp}
        process = await trio.lowlevel.open_process(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env
        )
        assert process.stdin is not None and process.stdout is not None
        stdin, stdout = process.stdin, process.stdout
        lines: list[bytes] = []
        buffer = b""

        async def send(message: dict[str, Any]) -> None:
            await stdin.send_all(json.dumps(message).encode() + b"\n")

        async def receive() -> dict[str, Any]:
            nonlocal buffer
            while not lines:
                chunk = await stdout.receive_some(1 << 16)
                assert chunk, "omnigent stdio exited"
                *complete, buffer = (buffer + chunk).split(b"\n")
                lines.extend(complete)
            decoded: dict[str, Any] = json.loads(lines.pop(0))
            return decoded

        try:
            yield send, receive
        finally:
            await stdin.aclose()
            with trio.move_on_after(10):
                await process.wait()
            if process.returncode is None:
                process.kill()
                await process.wait()


@asynccontextmanager
async def _websocket(spec: dict[str, Any]) -> AsyncIterator[Transport]:
    """``GET /v1/ws`` of an in-process server, and a trio-websocket client on it."""
    async with _file_runtime() as rt, _served(rt) as url:
        await rt.create_agent(spec)
        ws_url = "ws://" + url.removeprefix("http://") + f"/v1/ws?agent={spec['name']}"
        async with trio_websocket.open_websocket_url(
            ws_url, max_message_size=MAX_MESSAGE_BYTES
        ) as ws:

            async def send(message: dict[str, Any]) -> None:
                await ws.send_message(json.dumps(message))

            async def receive() -> dict[str, Any]:
                decoded: dict[str, Any] = json.loads(await ws.get_message())
                return decoded

            yield send, receive


async def bench_acp(opener: Any, deltas: int) -> tuple[float, int]:
    async with opener(_spec(deltas)) as (send, receive):
        elapsed, counter = await _acp_turn(send, receive, "/tmp")
    assert "".join(counter.text) == _expected(deltas)
    return elapsed, counter.chunks


_SHORT = {
    "name": "short",
    "executor": {
        "type": "omnigent",
        "config": {"harness": "scripted", "script": [{"say": "hello there"}]},
    },
}


async def sse_first_chunks(count: int) -> list[float]:
    """Seconds from ``POST …/events`` to the first delta frame, the stream already open."""
    latencies: list[float] = []
    async with _file_runtime() as rt, _served(rt) as url:
        agent = await rt.create_agent(_SHORT)
        session = await rt.create_session(agent.id)
        body = {"type": "message", "data": {"content": [{"type": "input_text", "text": "go"}]}}
        async with httpx.AsyncClient(base_url=url, timeout=60) as client:
            stream_url = f"/v1/sessions/{session.id}/stream"
            async with client.stream("GET", stream_url) as response:
                chunks = response.aiter_raw()
                try:
                    for _ in range(count + 1):  # the first turn warms up
                        started = time.perf_counter()
                        posted = await client.post(f"/v1/sessions/{session.id}/events", json=body)
                        assert posted.status_code == 202
                        first: float | None = None
                        buffer = b""
                        async for chunk in chunks:
                            if first is None and b"response.output_text.delta" in chunk:
                                first = time.perf_counter() - started
                            buffer = (buffer + chunk)[-4096:]
                            if b"event: response.completed" in buffer:
                                break
                        assert first is not None
                        latencies.append(first)
                finally:
                    await chunks.aclose()  # type: ignore[attr-defined]
    return latencies[1:]


async def acp_first_chunks(opener: Any, count: int) -> list[float]:
    """Seconds from ``session/prompt`` to its first ``agent_message_chunk``."""
    latencies: list[float] = []
    async with opener(_SHORT) as (send, receive):
        init = {"protocolVersion": 1}
        await send({"jsonrpc": "2.0", "id": "i", "method": "initialize", "params": init})
        await receive()
        new = {"cwd": "/tmp", "mcpServers": []}
        await send({"jsonrpc": "2.0", "id": "n", "method": "session/new", "params": new})
        session_id = (await receive())["result"]["sessionId"]
        prompt = {"sessionId": session_id, "prompt": [{"type": "text", "text": "go"}]}
        for n in range(count + 1):  # the first prompt warms up
            started = time.perf_counter()
            await send({"jsonrpc": "2.0", "id": n, "method": "session/prompt", "params": prompt})
            first: float | None = None
            while (message := await receive()).get("id") != n:
                update = message.get("params", {}).get("update", {})
                if first is None and update.get("sessionUpdate") == "agent_message_chunk":
                    first = time.perf_counter() - started
            assert first is not None and message["result"] == {"stopReason": "end_turn"}
            latencies.append(first)
    return latencies[1:]


def _p90(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.9 * (len(ordered) - 1)))]


async def bench_cancel(opener: Any, count: int) -> list[float]:
    """Seconds from ``session/cancel`` to the prompt's ``cancelled`` answer, ``count`` times."""
    spec = {
        "name": "sleeper",
        "executor": {
            "type": "omnigent",
            "config": {"harness": "scripted", "script": [{"say": "working"}, {"sleep": 30}]},
        },
    }
    latencies: list[float] = []
    async with opener(spec) as (send, receive):
        await send(
            {"jsonrpc": "2.0", "id": "i", "method": "initialize", "params": {"protocolVersion": 1}}
        )
        await receive()
        for n in range(count):
            new = {"cwd": "/tmp", "mcpServers": []}
            await send({"jsonrpc": "2.0", "id": f"n{n}", "method": "session/new", "params": new})
            session_id = (await receive())["result"]["sessionId"]
            prompt = {"sessionId": session_id, "prompt": [{"type": "text", "text": "go"}]}
            await send(
                {"jsonrpc": "2.0", "id": f"p{n}", "method": "session/prompt", "params": prompt}
            )
            while (await receive()).get("params", {}).get("update", {}).get(
                "sessionUpdate"
            ) != "agent_message_chunk":
                pass
            started = time.perf_counter()
            await send(
                {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": session_id}}
            )
            while (answer := await receive()).get("id") != f"p{n}":
                pass
            latencies.append(time.perf_counter() - started)
            assert answer["result"] == {"stopReason": "cancelled"}, answer
    return latencies


LABELS = {
    "sse": "(a) HTTP/SSE session stream       ",
    "stdio": "(b) ACP over stdio (subprocess)   ",
    "websocket": "(c) ACP over WebSocket (/v1/ws)   ",
}


def _versus(value: float, baseline: float) -> str:
    ratio = value / baseline
    return f"{ratio:.2f}x HTTP" + ("  ** over 1.2x **" if ratio > 1.2 else "")


async def main(deltas: int, repeat: int, cancels: int, prompts: int) -> None:
    first: dict[str, list[float]] = {
        "sse": await sse_first_chunks(prompts),
        "stdio": await acp_first_chunks(_stdio, prompts),
        "websocket": await acp_first_chunks(_websocket, prompts),
    }
    print(f"First chunk after the prompt ({prompts} prompts each, after one to warm up):")
    base = statistics.median(first["sse"])
    for key, label in LABELS.items():
        median, p90 = statistics.median(first[key]), _p90(first[key])
        versus = "" if key == "sse" else "  " + _versus(median, base)
        print(f"{label} median {median * 1000:.1f} ms, p90 {p90 * 1000:.1f} ms{versus}")
    runs: dict[str, list[tuple[float, int]]] = {"sse": [], "stdio": [], "websocket": []}
    for _ in range(repeat):
        runs["sse"].append(await bench_sse(deltas))
        runs["stdio"].append(await bench_acp(_stdio, deltas))
        runs["websocket"].append(await bench_acp(_websocket, deltas))
    print(f"A {deltas}-delta turn, sent to its end (median of {repeat}):")
    base = statistics.median(t for t, _ in runs["sse"])
    for key, label in LABELS.items():
        seconds = statistics.median(t for t, _ in runs[key])
        frames = statistics.median(f for _, f in runs[key])
        versus = "" if key == "sse" else "  " + _versus(seconds, base)
        print(
            f"{label} {seconds:.2f} s = {deltas / seconds:,.0f} deltas/s, "
            f"{frames:.0f} frames{versus}"
        )
    for name, opener in (("stdio", _stdio), ("WebSocket", _websocket)):
        latencies = sorted(await bench_cancel(opener, cancels))
        print(
            f"session/cancel -> stopReason cancelled over {name}: median "
            f"{statistics.median(latencies) * 1000:.1f} ms, max {latencies[-1] * 1000:.1f} ms "
            f"({cancels} prompts)"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--deltas", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--cancels", type=int, default=20)
    parser.add_argument("--prompts", type=int, default=30)
    arguments = parser.parse_args()
    trio.run(main, arguments.deltas, arguments.repeat, arguments.cancels, arguments.prompts)
