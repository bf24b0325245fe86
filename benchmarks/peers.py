"""Peers: one 20,000-token stream through omnigent, LangGraph's Agent Server and the
OpenAI Agents SDK, in one run.

Run: ``python benchmarks/peers.py --peers-python /tmp/peers/bin/python [--deltas 20000]
[--rounds 3]``, the peers installed in a venv of their own (not omnigent's
dependencies)::

    python3.11 -m venv /tmp/peers
    /tmp/peers/bin/pip install -r benchmarks/peers/requirements.txt

One model for all: ``omnigent mock-llm`` writing a ``--deltas``-word answer one delta per
network write (as real model servers stream). Each round reads, in an order that
alternates between rounds:

* direct: the model's stream read here (what reading it costs at all);
* omnigent: ``omnigent serve`` (SQLite) with a ``loop`` agent on the model,
  ``POST /v1/sessions/{id}/events?stream=true`` on a new session, every event persisted
  before it is sent;
* LangGraph: ``langgraph dev`` (the Agent Server, in memory, ``--no-reload``) serving
  ``benchmarks/peers/graph.py`` — one node calling ``ChatOpenAI(streaming=True)`` on the
  model — read with ``POST /runs/stream``, ``stream_mode: messages-tuple`` (one event
  per token);
* Agents SDK: ``benchmarks/peers/sdk_stream.py``, an agent on the model run with
  ``Runner.run_streamed`` and its events consumed in process (no HTTP hop to a client:
  a friendlier setting than the two servers get).

Each timed from the request (the SDK: from ``run_streamed``) to the stream's end, and
checked for all the words. Printed: medians, each round, the ratio of each peer to
omnigent, and each server's CPU seconds per stream (from ``/proc``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import trio
from _procs import HERE, OMNIGENT, cpu_seconds, median, served

PEERS = HERE / "peers"
DELTA = b"response.output_text.delta"
FRAME_END = re.compile(rb"\r?\n\r?\n")  # LangGraph's server ends frames with CRLF CRLF


def word(i: int) -> str:
    return f"w{i:06d} "


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def read_stream(
    client: httpx.AsyncClient, url: str, body: dict[str, Any], marker: bytes
) -> tuple[float, int, int]:
    """(seconds, frames holding ``marker``, words in them) for one streamed POST."""
    frames = words = 0
    buffer = b""
    started = time.perf_counter()
    async with client.stream("POST", url, json=body) as response:
        assert response.status_code == 200, response.status_code
        async for chunk in response.aiter_raw():
            *complete, buffer = FRAME_END.split(buffer + chunk)
            for frame in complete:
                if marker in frame:
                    frames += 1
                    words += frame.count(b"w0")
    return time.perf_counter() - started, frames, words


@contextlib.asynccontextmanager
async def langgraph_server(python: Path, model: str) -> AsyncIterator[tuple[str, int]]:
    """``langgraph dev`` on a free port; yields (URL, pid) once ``GET /ok`` answers."""
    port = free_port()
    argv = [str(python.parent / "langgraph"), "dev", "--no-browser", "--no-reload"]
    argv += ["--host", "127.0.0.1", "--port", str(port), "--config", str(PEERS / "langgraph.json")]
    env = {
        **os.environ,
        "MOCK_LLM_URL": model,
        "LANGSMITH_TRACING": "false",
        "LANGGRAPH_CLI_NO_ANALYTICS": "1",
        "PYTHONPATH": "",
    }
    with tempfile.TemporaryFile() as log:
        async with _langgraph(argv, env, log, port) as running:
            yield running


@contextlib.asynccontextmanager
async def _langgraph(
    argv: list[str], env: dict[str, str], log: Any, port: int
) -> AsyncIterator[tuple[str, int]]:
    process = await trio.lowlevel.open_process(
        argv, cwd=PEERS, env=env, stdout=log, stderr=log, start_new_session=True
    )
    url = f"http://127.0.0.1:{port}"
    try:
        async with httpx.AsyncClient(timeout=5) as probe:
            with trio.fail_after(180):
                while True:
                    if process.returncode is not None:
                        log.seek(0)
                        raise RuntimeError(f"langgraph dev exited: {log.read()[-2000:]!r}")
                    with contextlib.suppress(httpx.TransportError):
                        if (await probe.get(f"{url}/ok")).status_code == 200:
                            break
                    await trio.sleep(0.2)
        yield url, process.pid
    finally:
        with trio.CancelScope(shield=True):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
            with trio.move_on_after(10):
                await process.wait()
            if process.returncode is None:
                os.killpg(process.pid, signal.SIGKILL)
                await process.wait()


@contextlib.asynccontextmanager
async def sdk_runner(
    python: Path, model: str
) -> AsyncIterator[tuple[Callable[[], Awaitable[tuple[float, int, int]]], int]]:
    """The Agents SDK process; yields (run one turn, pid)."""
    process = await trio.lowlevel.open_process(
        [str(python), str(PEERS / "sdk_stream.py"), model],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": ""},
        start_new_session=True,
    )
    assert process.stdin is not None and process.stdout is not None
    lines = bytearray()

    async def line() -> bytes:
        assert process.stdout is not None
        while b"\n" not in lines:
            chunk = await process.stdout.receive_some()
            if not chunk:
                raise RuntimeError("the Agents SDK process exited")
            lines.extend(chunk)
        end = lines.index(b"\n")
        out = bytes(lines[:end])
        del lines[: end + 1]
        return out

    async def turn() -> tuple[float, int, int]:
        assert process.stdin is not None
        await process.stdin.send_all(b"go\n")
        result = json.loads(await line())
        return result["seconds"], result["deltas"], result["words"]

    try:
        with trio.fail_after(120):
            assert await line() == b"ready"
        yield turn, process.pid
    finally:
        with trio.CancelScope(shield=True):
            await process.stdin.aclose()
            with trio.move_on_after(10):
                await process.wait()
            if process.returncode is None:
                process.kill()
                await process.wait()


async def main(args: argparse.Namespace) -> None:
    deltas = args.deltas
    text = "".join(word(i) for i in range(deltas))
    chat = {"model": "mock-model", "stream": True, "messages": [{"role": "user", "content": "go"}]}
    message = {"type": "message", "data": {"content": [{"type": "input_text", "text": "go"}]}}
    print("load average before: " + " / ".join(f"{x:.2f}" for x in os.getloadavg()))
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "script.json"
        turns = 4 * (args.rounds + 1)
        script.write_text(json.dumps([{"text": text, "chunk_size": len(word(0))}] * turns))
        model_argv = [*OMNIGENT, "mock-llm", "--port", "0", "--script", str(script)]
        serve_argv = [*OMNIGENT, "serve", "--port", "0", "--db", f"sqlite:///{tmp}/peers.db"]
        async with contextlib.AsyncExitStack() as stack:
            model, _ = await stack.enter_async_context(served(model_argv, "serving on "))
            serve_argv += ["--allow-model-url", model]  # the spec names it, as a client's
            omni, omni_pid = await stack.enter_async_context(
                served(serve_argv, "omnigent serving on ")
            )
            lg, lg_pid = await stack.enter_async_context(langgraph_server(args.peers_python, model))
            sdk_turn, sdk_pid = await stack.enter_async_context(
                sdk_runner(args.peers_python, model)
            )
            client = await stack.enter_async_context(httpx.AsyncClient(timeout=600))
            spec = {
                "name": "peers",
                "executor": {
                    "config": {"harness": "loop", "model": "mock-model", "base_url": model}
                },
            }
            agent_id = (await client.post(f"{omni}/v1/agents", json=spec)).json()["id"]

            async def direct() -> tuple[float, int, int]:
                return await read_stream(client, f"{model}/chat/completions", chat, b"data: {")

            async def omnigent() -> tuple[float, int, int]:
                created = await client.post(f"{omni}/v1/sessions", json={"agent_id": agent_id})
                url = f"{omni}/v1/sessions/{created.json()['id']}/events?stream=true"
                return await read_stream(client, url, message, DELTA)

            async def langgraph() -> tuple[float, int, int]:
                body = {
                    "assistant_id": "agent",
                    "input": {"messages": [{"role": "user", "content": "go"}]},
                    "stream_mode": ["messages-tuple"],
                }
                return await read_stream(client, f"{lg}/runs/stream", body, b"event: messages")

            sides: dict[str, Callable[[], Awaitable[tuple[float, int, int]]]] = {
                "direct": direct,
                "omnigent": omnigent,
                "LangGraph": langgraph,
                "Agents SDK": sdk_turn,
            }
            pids = {"omnigent": omni_pid, "LangGraph": lg_pid, "Agents SDK": sdk_pid}
            times: dict[str, list[float]] = {name: [] for name in sides}
            cpu: dict[str, list[float]] = {name: [] for name in pids}
            frames: dict[str, list[int]] = {name: [] for name in sides}
            for number in range(args.rounds + 1):  # round 0 warms everything up
                order = list(sides) if number % 2 else list(reversed(sides))
                for name in order:
                    used = cpu_seconds(pids[name]) if name in pids else 0.0
                    seconds, count, words = await sides[name]()
                    assert words == deltas, (name, words)
                    if number:
                        times[name].append(seconds)
                        frames[name].append(count)
                        if name in pids:
                            cpu[name].append(cpu_seconds(pids[name]) - used)
    print("load average after:  " + " / ".join(f"{x:.2f}" for x in os.getloadavg()))
    print(f"a {deltas}-token stream, one delta per write, {args.rounds} rounds:")
    for name, values in times.items():
        each = " / ".join(f"{v:.2f}" for v in values)
        line = f"  {name:<11} {median(values):7.3f} s  ({each})  {deltas / median(values):,.0f}/s"
        if name in cpu:
            line += f";  its CPU {median(cpu[name]):.2f} s"
        print(line + f";  {median(frames[name]):.0f} frames with text")
    for name in ("LangGraph", "Agents SDK"):
        ratio = [p / o for p, o in zip(times[name], times["omnigent"], strict=True)]
        each = " / ".join(f"{r:.2f}" for r in ratio)
        print(f"  {name} / omnigent: {median(ratio):.2f}x  (each round: {each})")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--peers-python", type=Path, required=True)
    parser.add_argument("--deltas", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    trio.run(main, parser.parse_args())
