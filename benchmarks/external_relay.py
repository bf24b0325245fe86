"""A 20,000-delta answer relayed through an external harness vs the in-process loop.

Runs, in one process and one run, on a real SQLite file each:

* ``loop``: the built-in ``loop`` harness reading a MockLLM Chat Completions stream
  of N one-word chunks over loopback HTTP (every chunk one ``output_text.delta``);
* ``external``: ``benchmarks/delta_harness.py``, an external harness process written
  with the scaffold, streaming the same N deltas as SSE over its Unix socket; the
  runtime parses raw chunks and coalesces the deltas that arrive together.

Each is timed from ``send_message`` to the turn's terminal status, as seen by a live
subscriber that has received the whole text; a warm-up turn runs first (the external
harness's first turn also spawns its process, timed separately).

Usage: ``python benchmarks/external_relay.py [N]`` (default 20000).
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import trio

import omnigent
from omnigent.model import OutputTextDelta, SessionStatusChanged
from omnigent.testing import MockLLM

HARNESS = Path(__file__).with_name("delta_harness.py")


async def timed_turn(rt: omnigent.Runtime, session_id: str, text: str) -> tuple[float, int, int]:
    """(seconds, characters of text received, delta events) for one turn."""
    chars = deltas = 0
    async with rt.subscribe(session_id) as events:
        started = time.perf_counter()
        await rt.send_message(session_id, text)
        async for event in events:
            if isinstance(event, OutputTextDelta):
                chars += len(event.delta)
                deltas += 1
            if isinstance(event, SessionStatusChanged) and event.status in ("idle", "failed"):
                assert event.status == "idle", event
                return time.perf_counter() - started, chars, deltas
    raise AssertionError("the stream ended early")


def word(i: int) -> str:
    """The i-th word: fixed width, so N words are exactly N MockLLM chunks."""
    return f"w{i:06d} "


async def bench_loop(db: str, n: int) -> dict[str, Any]:
    text = "".join(word(i) for i in range(n))
    mock = MockLLM()
    mock.reply_text("warm", chunk_size=4)
    mock.reply_text(text, chunk_size=len(word(0)))
    async with (
        mock.serve() as url,
        httpx.AsyncClient(timeout=60) as http,
        omnigent.open_runtime(db=db, http_client=http) as rt,
    ):
        spec = {
            "name": "loop-bench",
            "executor": {"config": {"harness": "loop", "model": "mock-model", "base_url": url}},
        }
        agent = await rt.create_agent(spec)
        session = await rt.create_session(agent.id)
        await timed_turn(rt, session.id, "warm up")
        seconds, chars, deltas = await timed_turn(rt, session.id, "go")
    assert chars == len(text), chars
    return {"seconds": seconds, "deltas": deltas}


async def bench_external(db: str, n: int) -> dict[str, Any]:
    spec = {
        "name": "external-bench",
        "executor": {"config": {"harness": "external", "command": [sys.executable, str(HARNESS)]}},
    }
    async with omnigent.open_runtime(db=db) as rt:
        agent = await rt.create_agent(spec)
        session = await rt.create_session(agent.id)
        launch, _, _ = await timed_turn(rt, session.id, "10")
        seconds, chars, deltas = await timed_turn(rt, session.id, str(n))
    assert chars == len(word(0)) * n, chars
    return {"seconds": seconds, "deltas": deltas, "launch": launch}


async def main(n: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        loop = await bench_loop(f"sqlite:///{Path(tmp) / 'loop.db'}", n)
        external = await bench_external(f"sqlite:///{Path(tmp) / 'external.db'}", n)
    for name, result in (("loop (in-process)", loop), ("external (process)", external)):
        print(
            f"{name:<20} {n} deltas in {result['seconds']:.2f} s = "
            f"{n / result['seconds']:,.0f} deltas/s; {result['deltas']} delta events published"
        )
    launch = external["launch"]
    print(f"external harness first turn (spawn + health check + 10 deltas): {launch:.2f} s")


if __name__ == "__main__":
    trio.run(main, int(sys.argv[1]) if len(sys.argv) > 1 else 20_000)
