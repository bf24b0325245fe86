"""How fast a turn streams deltas into the event log: batched writer vs one write each.

Runs, in one process and one run, on a real SQLite file:

* ``omnigent``: a scripted turn streaming N word deltas through the runtime (the bus
  batches whatever is queued into one transaction per thread hop);
* ``baseline``: the same N events written the naive way, one ``append_events`` call
  (one thread hop and one transaction) per event, on the same store code.

Usage: ``python benchmarks/event_batching.py [N]`` (default 20000).
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import trio
from _procs import session_row

import omnigent
from omnigent.core.bus import encode_event
from omnigent.model import OutputTextDelta, SessionStatusChanged
from omnigent.stores import StoredEvent, open_store
from omnigent.testing import probe


async def omnigent_turn(db: str, n: int) -> tuple[float, int]:
    spec = {
        "name": "bench",
        "executor": {
            "config": {
                "harness": "scripted",
                "script": [{"say": " ".join(f"w{i}" for i in range(n))}],
            }
        },
    }
    async with omnigent.open_runtime(db=db) as rt:
        agent = await rt.create_agent(spec)
        session = await rt.create_session(agent.id)
        writes = 0
        original = probe(rt).store.append_events

        async def counting(events: list[StoredEvent]) -> None:
            nonlocal writes
            writes += 1
            await original(events)

        probe(rt).store.append_events = counting  # type: ignore[method-assign]
        deltas = 0
        async with rt.subscribe(session.id) as events:
            start = time.perf_counter()
            await rt.send_message(session.id, "go")
            async for event in events:
                deltas += isinstance(event, OutputTextDelta)
                if isinstance(event, SessionStatusChanged) and event.status == "idle":
                    break
            elapsed = time.perf_counter() - start
        assert deltas == n, deltas
        return elapsed, writes


async def one_write_per_event(path: Path, n: int) -> float:
    async with open_store(str(path)) as store:
        session = session_row("conv_x")
        await store.insert_session(session)
        start = time.perf_counter()
        for i in range(n):
            event = OutputTextDelta(response_id="r", item_id="i", delta=f"w{i} ").stamped(
                session_id="conv_x", event_id=i + 1, created_at=0.0
            )
            row = StoredEvent("conv_x", i + 1, event.type, encode_event(event))
            await store.append_events([row])
        return time.perf_counter() - start


async def main(n: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        elapsed, writes = await omnigent_turn(f"sqlite:///{tmp}/a.db", n)
        baseline = await one_write_per_event(Path(tmp) / "b.db", n)
    print(f"deltas: {n}")
    print(f"omnigent (batched): {elapsed:.3f} s, {n / elapsed:,.0f} deltas/s, {writes} writes")
    print(f"baseline (1/event): {baseline:.3f} s, {n / baseline:,.0f} deltas/s, {n} writes")
    print(f"speed-up: {baseline / elapsed:.1f}x")


if __name__ == "__main__":
    trio.run(main, int(sys.argv[1]) if len(sys.argv) > 1 else 20000)
