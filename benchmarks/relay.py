"""Relay: a 20,000-delta model stream through ``POST …/events?stream=true`` vs the floor.

Run: ``python benchmarks/relay.py [--deltas 20000] [--rounds 5]``

Four processes: the model (``omnigent mock-llm`` playing a ``--deltas``-chunk answer,
one word per chunk), the floor (``benchmarks/bare.py floor``: a bare Quart-Trio
endpoint on Hypercorn relaying the model's stream with httpx, no runtime, no
persistence), ``omnigent serve`` on a SQLite file (a ``loop`` agent on the model: every
delta one ``response.output_text.delta`` event, persisted before it is sent), and this
client. Each round reads, in turn:

(a) the model stream directly (what reading it costs at all);
(b) the floor's relay of it;
(c) omnigent: ``POST /v1/sessions/{id}/events?stream=true`` on a new session — on a
    SQLite file, and (unless ``--no-postgres``) on PostgreSQL: a second ``omnigent
    serve`` on a private cluster started from the machine's binaries, as the test
    suite starts one.

Every read is timed from the request to the end of the stream and checked for all
``--deltas`` words; the medians, the ratios and the relaying server's CPU time (from
``/proc``) are printed, with how many delta frames carried the words (the ``loop``
harness writes the deltas of one network read as one event).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import trio
from _procs import HERE, OMNIGENT, cpu_seconds, median, served

sys.path.insert(0, str(HERE.parent))  # tests.pg_cluster

DELTA = b"event: response.output_text.delta"


def word(i: int) -> str:
    """The i-th word: fixed width, so the answer is exactly one word per chunk."""
    return f"w{i:06d} "


async def read_frames(
    client: httpx.AsyncClient, url: str, body: dict[str, Any], marker: bytes
) -> tuple[float, int, int]:
    """(seconds, frames holding ``marker``, words in them) for one streamed POST."""
    count = words = 0
    buffer = b""
    started = time.perf_counter()
    async with client.stream("POST", url, json=body) as response:
        assert response.status_code == 200, response.status_code
        async for chunk in response.aiter_raw():
            *frames, buffer = (buffer + chunk).split(b"\n\n")
            for frame in frames:
                if marker in frame:
                    count += 1
                    words += frame.count(b"w0")
    return time.perf_counter() - started, count, words


async def main(deltas: int, rounds: int, postgres: bool) -> None:
    text = "".join(word(i) for i in range(deltas))
    chat = {"model": "mock-model", "stream": True, "messages": [{"role": "user", "content": "go"}]}
    message = {"type": "message", "data": {"content": [{"type": "input_text", "text": "go"}]}}
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as cleanup:
        databases = {"omnigent": f"sqlite:///{tmp}/relay.db"}
        if postgres:
            from tests.pg_cluster import PgCluster, find_bindir

            bindir = find_bindir()
            if bindir is None:
                print("no PostgreSQL binaries on this machine: SQLite only")
            else:
                cluster = PgCluster(bindir)
                cleanup.callback(cluster.destroy)
                databases["omnigent-pg"] = cluster.url(cluster.create_database())
        script = Path(tmp) / "script.json"
        turns = (2 + len(databases)) * (rounds + 1)
        script.write_text(json.dumps([{"text": text, "chunk_size": len(word(0))}] * turns))
        model_argv = [*OMNIGENT, "mock-llm", "--port", "0", "--script", str(script)]
        floor_argv = [sys.executable, str(HERE / "bare.py"), "floor", "--model", "MODEL"]
        async with contextlib.AsyncExitStack() as stack:
            model, model_pid = await stack.enter_async_context(served(model_argv, "serving on "))
            floor_argv[-1] = model
            floor, floor_pid = await stack.enter_async_context(served(floor_argv, "serving on "))
            client = await stack.enter_async_context(httpx.AsyncClient(timeout=120))
            servers: dict[str, tuple[str, int, str]] = {}
            for name, db in databases.items():
                serve_argv = [*OMNIGENT, "serve", "--port", "0", "--db", db]
                url, pid = await stack.enter_async_context(
                    served(serve_argv, "omnigent serving on ")
                )
                spec = {
                    "name": "relay",
                    "executor": {
                        "config": {"harness": "loop", "model": "mock-model", "base_url": model}
                    },
                }
                answer = await client.post(f"{url}/v1/agents", json=spec)
                assert answer.status_code == 201, answer.text
                servers[name] = (url, pid, answer.json()["id"])

            async def direct() -> tuple[float, int, int]:
                return await read_frames(client, f"{model}/chat/completions", chat, b"data: {")

            async def floor_relay() -> tuple[float, int, int]:
                return await read_frames(client, f"{floor}/relay", chat, DELTA)

            def omnigent_relay(name: str) -> Any:
                url, _pid, agent_id = servers[name]

                async def relay() -> tuple[float, int, int]:
                    created = await client.post(f"{url}/v1/sessions", json={"agent_id": agent_id})
                    stream = f"{url}/v1/sessions/{created.json()['id']}/events?stream=true"
                    return await read_frames(client, stream, message, DELTA)

                return relay

            sides = {"direct": direct, "floor": floor_relay}
            sides.update({name: omnigent_relay(name) for name in servers})
            pids = {"direct": model_pid, "floor": floor_pid}
            pids.update({name: pid for name, (_url, pid, _agent) in servers.items()})
            times: dict[str, list[float]] = {name: [] for name in sides}
            cpu: dict[str, list[float]] = {name: [] for name in sides}
            frames: dict[str, list[int]] = {name: [] for name in sides}
            for number in range(rounds + 1):  # round 0 warms everything up
                order = list(sides) if number % 2 else list(reversed(sides))
                for name in order:
                    used = cpu_seconds(pids[name])
                    seconds, count, words = await sides[name]()
                    used = cpu_seconds(pids[name]) - used
                    assert words == deltas, (name, words)
                    if number:
                        times[name].append(seconds)
                        cpu[name].append(used)
                        frames[name].append(count)
    print(f"relay of a {deltas}-delta model stream, {rounds} rounds (median, then each round):")
    for name, values in times.items():
        each = " / ".join(f"{v:.2f}" for v in values)
        print(
            f"  {name:<11} {median(values):.3f} s  ({each})  {deltas / median(values):,.0f}/s;"
            f"  server CPU {median(cpu[name]):.2f} s; {median(frames[name]):.0f} delta frames"
        )
    for name in servers:
        ratio = [o / f for o, f in zip(times[name], times["floor"], strict=True)]
        to_direct = [o / d for o, d in zip(times[name], times["direct"], strict=True)]
        each = " / ".join(f"{r:.2f}" for r in ratio)
        print(f"  {name} / floor:  {median(ratio):.2f}x  (each round: {each})")
        print(f"  {name} / direct: {median(to_direct):.2f}x")
        cpu_ratio = median(cpu[name]) / median(cpu["floor"])
        print(f"  server CPU, {name} / floor: {cpu_ratio:.2f}x")
    print(f"  floor / direct: {median(times['floor']) / median(times['direct']):.2f}x")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--deltas", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--no-postgres", action="store_true", help="SQLite only")
    args = parser.parse_args()
    trio.run(main, args.deltas, args.rounds, not args.no_postgres)
