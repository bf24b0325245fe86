"""Scale: memory per open idle stream, and 200 concurrent turns (SQLite and PostgreSQL).

Run: ``python benchmarks/scale.py [--streams 1000] [--turns 200] [--words 100]
[--no-postgres]``

1. **Idle streams.** ``omnigent serve`` (SQLite) with ``--streams`` sessions, and the
   bare server (``benchmarks/bare.py fanout``: a Quart-Trio SSE endpoint that waits),
   each in its own process. This client opens ``--streams`` SSE connections to each
   (``GET /v1/sessions/{id}/stream``, one per session; ``GET /stream``) over raw
   sockets and keeps them open; the server's resident set (``VmRSS``) is read before
   and once they are all open and quiet. The difference over ``--streams`` is the
   memory one open stream costs.
2. **Concurrent turns.** ``--turns`` sessions each get a message at once over
   ``POST …/events?stream=true``; each turn is a scripted answer of ``--words``
   word deltas. Events per second (all frames received over the wall time from the
   first message to the last stream's end), the p50/p99 delay of each event from
   publish (its ``created_at``) to receipt here, how long the turns took to start
   (from the messages to each stream's first delta: p50/p99) and the server's CPU
   seconds over the wall time (and PostgreSQL's: its postmaster and backends). On a
   SQLite file, and on PostgreSQL (a private cluster from the machine's binaries, as
   the test suite starts) in the same run.
   ``--streams 0`` runs the turns alone.
"""

from __future__ import annotations

import argparse
import gc
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import trio
from _procs import HERE, OMNIGENT, cpu_seconds, percentile, rss_kib, served

sys.path.insert(0, str(HERE.parent))

BARE = [sys.executable, str(HERE / "bare.py")]


async def open_streams(url: str, paths: list[str]) -> list[trio.SocketStream]:
    """One raw HTTP/1.1 GET per path, each read up to its response headers."""
    host, port = url.removeprefix("http://").split(":")
    streams = []
    for path in paths:
        stream = await trio.open_tcp_stream(host, int(port))
        request = f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nAccept: text/event-stream\r\n\r\n"
        await stream.send_all(request.encode())
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = await stream.receive_some(4096)
            assert chunk, f"{path}: the server closed the stream"
            head += chunk
        assert head.startswith(b"HTTP/1.1 200"), head[:100]
        streams.append(stream)
    return streams


async def settled_rss(pid: int) -> int:
    """The process's RSS once it stopped moving (KiB)."""
    last = rss_kib(pid)
    for _ in range(20):
        await trio.sleep(0.25)
        now = rss_kib(pid)
        if abs(now - last) < 64:
            return now
        last = now
    return last


async def per_stream(url: str, pid: int, paths: list[str]) -> tuple[float, int, int]:
    """(KiB per open stream, RSS before, RSS with all open)."""
    before = await settled_rss(pid)
    streams = await open_streams(url, paths)
    try:
        after = await settled_rss(pid)
    finally:
        for stream in streams:
            await stream.aclose()
    return (after - before) / len(paths), before, after


async def idle_streams(count: int, tmp: str) -> None:
    serve_argv = [*OMNIGENT, "serve", "--port", "0", "--db", f"sqlite:///{tmp}/idle.db"]
    limits = httpx.Limits(max_connections=20)
    async with (
        served([*BARE, "fanout"], "serving on ") as (bare, bare_pid),
        served(serve_argv, "omnigent serving on ") as (omni, omni_pid),
        httpx.AsyncClient(timeout=60, limits=limits) as client,
    ):
        agent = (await client.post(f"{omni}/v1/agents", json={"name": "idle"})).json()["id"]
        sessions = []
        for _ in range(count):
            created = await client.post(f"{omni}/v1/sessions", json={"agent_id": agent})
            sessions.append(created.json()["id"])
        # Warm both servers up with a few streams first (code paths, allocator pools).
        for stream in await open_streams(omni, [f"/v1/sessions/{s}/stream" for s in sessions[:20]]):
            await stream.aclose()
        for stream in await open_streams(bare, ["/stream"] * 20):
            await stream.aclose()
        ours = await per_stream(omni, omni_pid, [f"/v1/sessions/{s}/stream" for s in sessions])
        theirs = await per_stream(bare, bare_pid, ["/stream"] * count)
    print(f"{count} idle open streams, memory per stream (server RSS after - before):")
    for name, (kib, before, after) in (("bare", theirs), ("omnigent", ours)):
        mib = f"{before / 1024:.1f} -> {after / 1024:.1f} MiB"
        print(f"  {name:<9} {kib:6.1f} KiB per stream  ({mib})")
    print(f"  omnigent / bare: {ours[0] / theirs[0]:.2f}x")


def tree_cpu(root: int | None) -> float:
    """CPU seconds of process ``root`` and its children alive now (PostgreSQL's
    postmaster and its backends; 0 without one)."""
    if root is None:
        return 0.0
    total = cpu_seconds(root)
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if int(fields[1]) == root:
                total += cpu_seconds(int(stat.parent.name))
        except (OSError, ValueError):
            continue  # gone meanwhile
    return total


async def concurrent_turns(
    db: str, label: str, turns: int, words: int, postmaster: int | None = None
) -> dict[str, Any]:
    serve_argv = [*OMNIGENT, "serve", "--port", "0", "--db", db]
    text = " ".join(f"w{i}" for i in range(words))
    spec = {
        "name": "turns",
        "executor": {"config": {"harness": "scripted", "script": [{"say": text}]}},
    }
    message = {"type": "message", "data": {"content": [{"type": "input_text", "text": "go"}]}}
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=None)
    delays: list[float] = []
    first_deltas: list[float] = []
    frames = 0
    async with (
        served(serve_argv, "omnigent serving on ") as (omni, pid),
        httpx.AsyncClient(timeout=120, limits=limits) as client,
    ):
        agent = (await client.post(f"{omni}/v1/agents", json=spec)).json()["id"]
        sessions = [
            (await client.post(f"{omni}/v1/sessions", json={"agent_id": agent})).json()["id"]
            for _ in range(turns)
        ]
        go = trio.Event()
        first_deltas_seen = dict.fromkeys(sessions, False)
        started = 0.0

        async def turn(session: str) -> None:
            nonlocal frames
            url = f"{omni}/v1/sessions/{session}/events?stream=true"
            buffer = b""
            await go.wait()
            async with client.stream("POST", url, json=message) as response:
                assert response.status_code == 200, response.status_code
                async for chunk in response.aiter_raw():
                    received = time.time()
                    *complete, buffer = (buffer + chunk).split(b"\n\n")
                    for frame in complete:
                        if not first_deltas_seen[session] and b"output_text.delta" in frame:
                            first_deltas_seen[session] = True
                            first_deltas.append(time.perf_counter() - started)
                        at = frame.find(b'"created_at":')
                        if at < 0:
                            continue
                        end = frame.index(b"}", at)
                        comma = frame.find(b",", at, end)
                        value = frame[at + 13 : comma if comma > 0 else end]
                        delays.append(received - float(value))
                        frames += 1

        async with trio.open_nursery() as nursery:
            for session in sessions:
                nursery.start_soon(turn, session)
            await trio.sleep(0.5)  # every request task waiting on `go`
            used, db_used = cpu_seconds(pid), tree_cpu(postmaster)
            started = time.perf_counter()
            go.set()
        wall = time.perf_counter() - started
        cpu, db_cpu = cpu_seconds(pid) - used, tree_cpu(postmaster) - db_used
    return {
        "label": label,
        "wall": wall,
        "frames": frames,
        "p50": percentile(delays, 0.5),
        "p99": percentile(delays, 0.99),
        "start50": percentile(first_deltas, 0.5),
        "start99": percentile(first_deltas, 0.99),
        "cpu": cpu,
        "db_cpu": db_cpu if postmaster is not None else None,
    }


async def main(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        if args.streams:
            await idle_streams(args.streams, tmp)
            gc.collect()
        dbs: list[tuple[str, str, int | None]] = [(f"sqlite:///{tmp}/turns.db", "SQLite", None)]
        cluster = None
        if not args.no_postgres:
            from tests.pg_cluster import PgCluster, find_bindir

            bindir = find_bindir()
            if bindir is None:
                print("no PostgreSQL binaries on this machine: SQLite only")
            else:
                cluster = PgCluster(bindir)
                postmaster = int((cluster.data / "postmaster.pid").read_text().split()[0])
                dbs.append((cluster.url(cluster.create_database()), "PostgreSQL", postmaster))
        try:
            results = [
                await concurrent_turns(db, label, args.turns, args.words, postmaster)
                for db, label, postmaster in dbs
            ]
        finally:
            if cluster is not None:
                cluster.destroy()
    print(f"{args.turns} concurrent turns of {args.words} word deltas each:")
    for r in results:
        print(
            f"  {r['label']:<10} {r['wall']:.2f} s, {r['frames']} events = "
            f"{r['frames'] / r['wall']:,.0f} events/s; publish → receipt p50 "
            f"{r['p50'] * 1000:.1f} ms, p99 {r['p99'] * 1000:.1f} ms; first delta p50 "
            f"{r['start50']:.2f} s, p99 {r['start99']:.2f} s; server CPU {r['cpu']:.2f} s"
            + ("" if r["db_cpu"] is None else f" (PostgreSQL's own {r['db_cpu']:.2f} s)")
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", type=int, default=1000)
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--words", type=int, default=100)
    parser.add_argument("--no-postgres", action="store_true")
    trio.run(main, parser.parse_args())
