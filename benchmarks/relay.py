"""Relay: a 20,000-delta model stream through ``POST …/events?stream=true`` vs the floor.

Run: ``python benchmarks/relay.py [--deltas 20000] [--rounds 5] [--writes delta packed]
[--no-postgres]``

For each way the model writes (``--writes``; both by default):

* ``delta`` — one network write per delta, flushed, as real model servers stream (one
  token per SSE frame): a reader that keeps up reads one delta at a time;
* ``packed`` — the whole answer in one write, so a reader gets many deltas per read
  (the friendlier stream earlier rounds measured).

Processes: per mode, the model (``omnigent mock-llm --writes MODE`` playing a
``--deltas``-chunk answer, one word per chunk) and the floor (``benchmarks/bare.py
floor``: a bare Quart-Trio endpoint on Hypercorn relaying the model's stream with
httpx — raw chunks in, the frames each chunk completes written as one chunk out — no
runtime, no persistence); ``omnigent serve`` on a SQLite file (a ``loop`` agent per
mode: every delta event persisted before it is sent) and, unless ``--no-postgres``, a
second one on PostgreSQL (a private cluster started from the machine's binaries, as
the test suite starts one); and this client. Each round reads, per mode, in an order
that alternates between rounds:

(a) the model stream directly (what reading it costs at all);
(b) the floor's relay of it;
(c) omnigent: ``POST /v1/sessions/{id}/events?stream=true`` on a new session.

Every read is timed from the request to the end of the stream and checked for all
``--deltas`` words; every omnigent turn is checked to be stored whole (the session's
``last_event_id`` is the last id the stream carried, and the ids came without a gap).
Printed: the medians, the ratios to the floor and to a direct read, the relaying
server's CPU seconds (from ``/proc``) per stream and per 1,000 deltas, how many delta
frames carried the words (and, for omnigent, how many events the turn published: in
``delta`` mode one per delta), and the load average before and after.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import attrs
import httpx
import trio
from _procs import HERE, OMNIGENT, cpu_seconds, median, served

sys.path.insert(0, str(HERE.parent))  # tests.pg_cluster

DELTA = b"event: response.output_text.delta"


def word(i: int) -> str:
    """The i-th word: fixed width, so the answer is exactly one word per chunk."""
    return f"w{i:06d} "


@attrs.frozen
class Read:
    """One timed read of a stream."""

    seconds: float
    delta_frames: int  # frames holding the marker
    words: int
    events: int  # frames with an ``id:`` (omnigent's events; the floor's frames)
    last_id: int
    gapless: bool  # the ids were 1, 2, 3, … as far as they went (after the first)


async def read_frames(
    client: httpx.AsyncClient, url: str, body: dict[str, Any], marker: bytes
) -> Read:
    """Time one streamed POST and count what it carried."""
    count = words = events = last_id = 0
    gapless = True
    buffer = b""
    started = time.perf_counter()
    async with client.stream("POST", url, json=body) as response:
        assert response.status_code == 200, response.status_code
        async for chunk in response.aiter_raw():
            *frames, buffer = (buffer + chunk).split(b"\n\n")
            for frame in frames:
                if frame.startswith(b"id: "):
                    event_id = int(frame[4 : frame.index(b"\n")])
                    gapless = gapless and (not last_id or event_id == last_id + 1)
                    last_id = event_id
                    events += 1
                if marker in frame:
                    count += 1
                    words += frame.count(b"w0")
    return Read(time.perf_counter() - started, count, words, events, last_id, gapless)


def load() -> str:
    return " / ".join(f"{x:.2f}" for x in os.getloadavg())


async def main(args: argparse.Namespace) -> None:
    deltas, rounds, modes = args.deltas, args.rounds, args.writes
    text = "".join(word(i) for i in range(deltas))
    chat = {"model": "mock-model", "stream": True, "messages": [{"role": "user", "content": "go"}]}
    message = {"type": "message", "data": {"content": [{"type": "input_text", "text": "go"}]}}
    print(f"load average before: {load()}")
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as cleanup:
        databases = {"omnigent": f"sqlite:///{tmp}/relay.db"}
        if not args.no_postgres:
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
        async with contextlib.AsyncExitStack() as stack:
            client = await stack.enter_async_context(httpx.AsyncClient(timeout=300))
            sides: dict[tuple[str, str], Any] = {}
            pids: dict[tuple[str, str], int] = {}
            models: dict[str, str] = {}
            for mode in modes:
                model_argv = [*OMNIGENT, "mock-llm", "--port", "0", "--script", str(script)]
                model_argv += ["--writes", mode]
                model, model_pid = await stack.enter_async_context(
                    served(model_argv, "serving on ")
                )
                floor_argv = [sys.executable, str(HERE / "bare.py"), "floor", "--model", model]
                floor, floor_pid = await stack.enter_async_context(
                    served(floor_argv, "serving on ")
                )
                models[mode] = model

                async def direct(model: str = model) -> Read:
                    return await read_frames(client, f"{model}/chat/completions", chat, b"data: {")

                async def floor_relay(floor: str = floor) -> Read:
                    return await read_frames(client, f"{floor}/relay", chat, DELTA)

                sides[mode, "direct"], pids[mode, "direct"] = direct, model_pid
                sides[mode, "floor"], pids[mode, "floor"] = floor_relay, floor_pid
            for name, db in databases.items():
                serve_argv = [*OMNIGENT, "serve", "--port", "0", "--db", db]
                for model in models.values():  # a client's spec names it: the operator allows it
                    serve_argv += ["--allow-model-url", model]
                url, pid = await stack.enter_async_context(
                    served(serve_argv, "omnigent serving on ")
                )
                for mode in modes:
                    spec = {
                        "name": f"relay-{mode}",
                        "executor": {
                            "config": {
                                "harness": "loop",
                                "model": "mock-model",
                                "base_url": models[mode],
                            }
                        },
                    }
                    answer = await client.post(f"{url}/v1/agents", json=spec)
                    assert answer.status_code == 201, answer.text

                    async def relay(url: str = url, agent_id: str = answer.json()["id"]) -> Read:
                        created = await client.post(
                            f"{url}/v1/sessions", json={"agent_id": agent_id}
                        )
                        session = f"{url}/v1/sessions/{created.json()['id']}"
                        read = await read_frames(
                            client, f"{session}/events?stream=true", message, DELTA
                        )
                        # Every event the stream carried is stored (persist, then publish).
                        snapshot = (await client.get(session)).json()
                        assert read.gapless, "a gap in the event ids"
                        assert snapshot["last_event_id"] >= read.last_id, (snapshot, read)
                        return read

                    sides[mode, name], pids[mode, name] = relay, pid
            reads: dict[tuple[str, str], list[Read]] = {key: [] for key in sides}
            cpu: dict[tuple[str, str], list[float]] = {key: [] for key in sides}
            for number in range(rounds + 1):  # round 0 warms everything up
                for mode in modes:
                    order = [key for key in sides if key[0] == mode]
                    if number % 2 == 0:
                        order.reverse()
                    for key in order:
                        used = cpu_seconds(pids[key])
                        read = await sides[key]()
                        used = cpu_seconds(pids[key]) - used
                        assert read.words == deltas, (key, read)
                        if number:
                            reads[key].append(read)
                            cpu[key].append(used)
    print(f"load average after:  {load()}")
    for mode in modes:
        how = "one delta per write" if mode == "delta" else "all at once"
        print(
            f"\n{mode}: the model writes {how}; a {deltas}-delta stream, {rounds} rounds "
            "(median, then each round):"
        )
        keys = [key for key in sides if key[0] == mode]
        times = {key[1]: [r.seconds for r in reads[key]] for key in keys}
        for key in keys:
            values = times[key[1]]
            each = " / ".join(f"{v:.2f}" for v in values)
            events = median([r.events for r in reads[key]])
            per_k = median(cpu[key]) / deltas * 1000
            print(
                f"  {key[1]:<11} {median(values):.3f} s  ({each})  {deltas / median(values):,.0f}"
                f" deltas/s;  server CPU {median(cpu[key]):.2f} s"
                + (f" ({per_k * 1000:.1f} ms per 1,000 deltas)" if key[1] != "direct" else "")
                + f"; {median([r.delta_frames for r in reads[key]]):.0f} delta frames"
                + (f", {events:.0f} events" if key[1] not in ("direct", "floor") else "")
            )
        for name in [key[1] for key in keys if key[1] not in ("direct", "floor")]:
            ratio = [o / f for o, f in zip(times[name], times["floor"], strict=True)]
            to_direct = [o / d for o, d in zip(times[name], times["direct"], strict=True)]
            each = " / ".join(f"{r:.2f}" for r in ratio)
            print(f"  {name} / floor:  {median(ratio):.2f}x  (each round: {each})")
            each = " / ".join(f"{r:.2f}" for r in to_direct)
            print(f"  {name} / direct: {median(to_direct):.2f}x  (each round: {each})")
            cpu_ratio = median(cpu[mode, name]) / median(cpu[mode, "floor"])
            print(f"  server CPU, {name} / floor: {cpu_ratio:.2f}x")
        print(f"  floor / direct: {median(times['floor']) / median(times['direct']):.2f}x")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--deltas", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--writes", nargs="+", choices=["delta", "packed"], default=["delta", "packed"]
    )
    parser.add_argument("--no-postgres", action="store_true", help="SQLite only")
    trio.run(main, parser.parse_args())
