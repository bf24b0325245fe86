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
(c) omnigent: ``POST /v1/sessions/{id}/events?stream=true`` on a new session.

Every read is timed from the request to the end of the stream and checked for all
``--deltas`` words; the medians, the ratios and the relaying server's CPU time (from
``/proc``) are printed, with how many delta frames carried the words (the ``loop``
harness writes the deltas of one network read as one event).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import trio
from _procs import HERE, OMNIGENT, cpu_seconds, median, served

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


async def main(deltas: int, rounds: int) -> None:
    text = "".join(word(i) for i in range(deltas))
    chat = {"model": "mock-model", "stream": True, "messages": [{"role": "user", "content": "go"}]}
    message = {"type": "message", "data": {"content": [{"type": "input_text", "text": "go"}]}}
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "script.json"
        turns = 3 * (rounds + 1)
        script.write_text(json.dumps([{"text": text, "chunk_size": len(word(0))}] * turns))
        model_argv = [*OMNIGENT, "mock-llm", "--port", "0", "--script", str(script)]
        serve_argv = [*OMNIGENT, "serve", "--port", "0", "--db", f"sqlite:///{tmp}/relay.db"]
        async with (
            served(model_argv, "serving on ") as (model, model_pid),
            served(
                [sys.executable, str(HERE / "bare.py"), "floor", "--model", model], "serving on "
            ) as (floor, floor_pid),
            served(serve_argv, "omnigent serving on ") as (omni, omni_pid),
            httpx.AsyncClient(timeout=120) as client,
        ):
            spec = {
                "name": "relay",
                "executor": {
                    "config": {"harness": "loop", "model": "mock-model", "base_url": model}
                },
            }
            answer = await client.post(f"{omni}/v1/agents", json=spec)
            assert answer.status_code == 201, answer.text
            agent_id = answer.json()["id"]

            async def direct() -> tuple[float, int, int]:
                return await read_frames(client, f"{model}/chat/completions", chat, b"data: {")

            async def floor_relay() -> tuple[float, int, int]:
                return await read_frames(client, f"{floor}/relay", chat, DELTA)

            async def omnigent_relay() -> tuple[float, int, int]:
                created = await client.post(f"{omni}/v1/sessions", json={"agent_id": agent_id})
                session = created.json()["id"]
                url = f"{omni}/v1/sessions/{session}/events?stream=true"
                return await read_frames(client, url, message, DELTA)

            sides = {"direct": direct, "floor": floor_relay, "omnigent": omnigent_relay}
            pids = {"direct": model_pid, "floor": floor_pid, "omnigent": omni_pid}
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
            f"  {name:<9} {median(values):.3f} s  ({each})  {deltas / median(values):,.0f}/s;"
            f"  server CPU {median(cpu[name]):.2f} s; {median(frames[name]):.0f} delta frames"
        )
    ratio = [o / f for o, f in zip(times["omnigent"], times["floor"], strict=True)]
    to_direct = [o / d for o, d in zip(times["omnigent"], times["direct"], strict=True)]
    print(
        f"  omnigent / floor:  {median(ratio):.2f}x  (each round: "
        + " / ".join(f"{r:.2f}" for r in ratio)
        + ")"
    )
    print(f"  omnigent / direct: {median(to_direct):.2f}x")
    print(f"  floor / direct:    {median(times['floor']) / median(times['direct']):.2f}x")
    print(f"  server CPU, omnigent / floor: {median(cpu['omnigent']) / median(cpu['floor']):.2f}x")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--deltas", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    trio.run(main, args.deltas, args.rounds)
