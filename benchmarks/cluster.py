"""PostgreSQL against SQLite, and delivery between servers, in one run.

Run from the repository root: ``python benchmarks/cluster.py`` (``--deltas 20000``,
``--turns 200``, ``--pings 500``). It starts a private PostgreSQL cluster from the
machine's binaries (as the test suite does, ``fsync=off``), then measures:

1. **The 20,000-delta relay**, as ``benchmarks/sse_relay.py`` (b) does: a scripted
   turn streams N word deltas; an HTTP client reads the session's SSE stream over
   loopback until ``response.completed``. On a SQLite file, on PostgreSQL (one
   server), and on PostgreSQL across servers (the turn runs on server A, the stream
   is read from server B: every batch crosses through ``NOTIFY`` and a read).
2. **200 concurrent turns**: 200 sessions each run one short scripted turn at once;
   timed from the first message to the last ``idle``, on SQLite and on PostgreSQL.
3. **Cross-server delivery latency**: server A (its own process) runs a turn whose
   harness publishes one delta every 10 ms carrying its wall-clock send time; a
   subscriber on server B (this process) records when each arrives. p50/p99 of
   publish → receipt, and the same measured on A itself for comparison.

Each figure is the best of ``--runs`` runs (default 3).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import hypercorn.trio
import trio
from hypercorn.config import Config

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import omnigent
from omnigent.core import elicitation_params
from omnigent.model import OutputTextDelta, SessionStatusChanged
from omnigent.transports.http._app import create_app
from tests.pg_cluster import PgCluster, find_bindir


def _say(words: int) -> dict[str, Any]:
    text = " ".join(f"w{i}" for i in range(words))
    return {
        "name": "bench",
        "executor": {
            "type": "omnigent",
            "config": {"harness": "scripted", "script": [{"say": text}]},
        },
    }


@asynccontextmanager
async def _served(rt: omnigent.Runtime) -> AsyncIterator[httpx.AsyncClient]:
    config = Config()
    config.bind = ["127.0.0.1:0"]
    config.accesslog = None
    config.errorlog = None
    shutdown, stopping = trio.Event(), trio.Event()
    async with trio.open_nursery() as nursery:
        app = create_app(rt, stopping=stopping)
        urls = await nursery.start(
            partial(hypercorn.trio.serve, app, config, shutdown_trigger=shutdown.wait)
        )
        async with httpx.AsyncClient(base_url=urls[0], timeout=300) as client:
            yield client
        stopping.set()
        shutdown.set()


async def _count(client: httpx.AsyncClient, url: str) -> int:
    count, buffer = 0, b""
    async with client.stream("GET", url) as response:
        async for chunk in response.aiter_raw():
            buffer += chunk
            *frames, buffer = buffer.split(b"\n\n")
            for frame in frames:
                if b"event: response.output_text.delta" in frame:
                    count += 1
                if b"event: response.completed" in frame:
                    return count
    return count


async def _relay(reader: omnigent.Runtime, runner: omnigent.Runtime, deltas: int) -> float:
    """Stream a turn that runs on ``runner`` from ``reader``'s HTTP server."""
    agent = await runner.create_agent(_say(deltas))
    session = (await runner.create_session(agent.id)).id
    held = None
    if reader is not runner:
        # The runner holds the session's tree, so the message posted to the reader
        # is forwarded there and the stream is fed from the database.
        held = await runner.hold_elicitation(session, elicitation_params("hold", "bench"))
    counted: list[int] = []
    async with _served(reader) as client:
        started = time.perf_counter()
        async with trio.open_nursery() as nursery:

            async def read() -> None:
                counted.append(await _count(client, f"/v1/sessions/{session}/stream?after=0"))

            nursery.start_soon(read)
            body = {"type": "message", "data": {"content": [{"type": "input_text", "text": "go"}]}}
            answer = await client.post(f"/v1/sessions/{session}/events", json=body)
            assert answer.status_code == 202, answer.text
        elapsed = time.perf_counter() - started
    if held is not None:
        await runner.resolve_elicitation(session, held, "cancel")
    assert counted == [deltas], counted
    return elapsed


async def _many_turns(rt: omnigent.Runtime, turns: int) -> float:
    agent = await rt.create_agent(_say(5))
    sessions = [(await rt.create_session(agent.id)).id for _ in range(turns)]
    started = time.perf_counter()
    async with trio.open_nursery() as nursery:
        for session in sessions:
            nursery.start_soon(_one_turn, rt, session)
    return time.perf_counter() - started


async def _one_turn(rt: omnigent.Runtime, session: str) -> None:
    async with rt.subscribe(session) as events:
        await rt.send_message(session, "go")
        async for event in events:
            if isinstance(event, SessionStatusChanged) and event.status == "idle":
                return


# -- cross-server latency: the owner process ---------------------------------------------


class _Pinger:
    """A harness that publishes one delta every ``gap`` seconds, its text the send time."""

    def __init__(self, count: int, gap: float) -> None:
        self.count, self.gap = count, gap

    def factory(self, env: Any) -> Any:
        return self

    async def run_turn(self, request: Any, ctx: Any) -> None:
        async with ctx.open_message() as message:
            for _ in range(self.count):
                await message.write(f"{time.time():.6f} ")
                await trio.sleep(self.gap)

    async def aclose(self) -> None:
        return None


async def _owner(url: str, count: int) -> None:
    """Server A: open the session, hold it, run the pinging turn when told."""
    async with omnigent.open_runtime(url, server_id="a") as rt:
        pinger = _Pinger(count, 0.01)
        rt.register_harness("pinger", pinger.factory)
        spec = {"name": "pinger", "executor": {"type": "omnigent", "config": {"harness": "pinger"}}}
        session = (await rt.create_session((await rt.create_agent(spec)).id)).id
        held = await rt.hold_elicitation(session, elicitation_params("hold", "bench"))
        print(session, flush=True)
        await trio.to_thread.run_sync(sys.stdin.readline)  # "go"
        local: list[float] = []
        async with rt.subscribe(session) as events:
            await rt.send_message(session, "go")
            async for event in events:
                if isinstance(event, OutputTextDelta):
                    local.append(time.time() - float(event.delta))
                if isinstance(event, SessionStatusChanged) and event.status == "idle":
                    break
        await rt.resolve_elicitation(session, held, "cancel")
        print(json.dumps(local), flush=True)


async def _latency(url: str, count: int) -> tuple[list[float], list[float]]:
    """(on another server, on the owner itself) latencies in seconds."""
    command = [sys.executable, __file__, "--owner", url, "--pings", str(count)]
    process = await trio.lowlevel.open_process(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    assert process.stdin is not None and process.stdout is not None
    lines = _lines(process.stdout)
    session = (await lines.__anext__()).strip()
    remote: list[float] = []
    async with omnigent.open_runtime(url, server_id="b") as rt, rt.subscribe(session) as events:
        await process.stdin.send_all(b"go\n")
        async for event in events:
            if isinstance(event, OutputTextDelta):
                remote.append(time.time() - float(event.delta))
            if isinstance(event, SessionStatusChanged) and event.status == "idle":
                break
    local = json.loads(await lines.__anext__())
    await process.wait()
    return remote, local


async def _lines(stream: trio.abc.ReceiveStream) -> AsyncIterator[str]:
    buffer = b""
    while True:
        chunk = await stream.receive_some()
        if not chunk:
            return
        buffer += chunk
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            yield line.decode()


def _percentiles(values: list[float]) -> str:
    ms = sorted(v * 1000 for v in values)
    p50 = statistics.median(ms)
    p99 = ms[min(len(ms) - 1, int(len(ms) * 0.99))]
    return f"p50 {p50:.2f} ms, p99 {p99:.2f} ms (n={len(ms)})"


async def main(args: argparse.Namespace) -> None:
    bindir = find_bindir()
    if bindir is None:
        raise SystemExit("no PostgreSQL server binaries here (pg_config --bindir)")
    cluster = PgCluster(bindir)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            await _run_all(args, cluster, Path(tmp))
    finally:
        cluster.destroy()


async def _run_all(args: argparse.Namespace, cluster: PgCluster, tmp: Path) -> None:
    def sqlite() -> str:
        return f"sqlite:///{tmp / f'{time.monotonic_ns()}.db'}"

    def postgres() -> str:
        return cluster.url(cluster.create_database())

    n, turns, runs = args.deltas, args.turns, args.runs
    results: dict[str, list[float]] = {}
    for _ in range(runs):
        async with omnigent.open_runtime(sqlite()) as rt:
            results.setdefault("relay sqlite", []).append(await _relay(rt, rt, n))
        async with omnigent.open_runtime(postgres(), server_id="a") as rt:
            results.setdefault("relay postgres", []).append(await _relay(rt, rt, n))
        url = postgres()
        async with (
            omnigent.open_runtime(url, server_id="a") as a,
            omnigent.open_runtime(url, server_id="b") as b,
        ):
            results.setdefault("relay postgres a->b", []).append(await _relay(b, a, n))
        async with omnigent.open_runtime(sqlite()) as rt:
            results.setdefault("turns sqlite", []).append(await _many_turns(rt, turns))
        async with omnigent.open_runtime(postgres(), server_id="a") as rt:
            results.setdefault("turns postgres", []).append(await _many_turns(rt, turns))
    for name, times in results.items():
        best = min(times)
        rate = n / best if name.startswith("relay") else turns / best
        unit = "deltas/s" if name.startswith("relay") else "turns/s"
        shown = " / ".join(f"{t:.2f}" for t in times)
        print(f"{name:22} best {best:.2f} s ({shown}) = {rate:,.0f} {unit}")
    remote, local = await _latency(postgres(), args.pings)
    print(f"latency other server: {_percentiles(remote)}")
    print(f"latency same server:  {_percentiles(local)}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--deltas", type=int, default=20_000)
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--pings", type=int, default=500)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--owner", default=None, help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.owner:
        trio.run(_owner, options.owner, options.pings)
    else:
        trio.run(main, options)
