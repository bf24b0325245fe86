"""Does memory grow with the number of sessions a process has touched?

Runs one runtime on a real SQLite file and touches sessions one after another —
each is created and runs one scripted turn (one delta) to its end — a few at a time
(``--concurrency``). The process's resident set size (``VmRSS``) is read after the
first 1,000 sessions and after all N (default 100,000), each time with no work left
and after a garbage collection; the report compares them. What a session leaves in
memory once it is idle (its event counter, status, kept history) is bounded or gone,
so the two should be close.

Usage: ``python benchmarks/memory_flat.py [N] [--concurrency C]`` (100000, 16).
"""

from __future__ import annotations

import argparse
import gc
import tempfile
import time
from pathlib import Path

import trio

import omnigent
from omnigent.model import TERMINAL_STATUSES, SessionStatusChanged
from omnigent.testing import probe

SPEC = {
    "name": "touch",
    "executor": {"type": "omnigent", "config": {"harness": "scripted", "script": [{"say": "ok"}]}},
}


def rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


async def touch(rt: omnigent.Runtime, agent_id: str) -> None:
    session = (await rt.create_session(agent_id)).id
    async with rt.subscribe(session) as events:
        await rt.send_message(session, "hi")
        async for event in events:
            if isinstance(event, SessionStatusChanged) and event.status in TERMINAL_STATUSES:
                return


async def touch_many(rt: omnigent.Runtime, agent_id: str, count: int, concurrency: int) -> None:
    limit = trio.CapacityLimiter(concurrency)

    async def one() -> None:
        async with limit:
            await touch(rt, agent_id)

    async with trio.open_nursery() as nursery:
        for _ in range(count):
            await limit.acquire()  # back-pressure: never more than C sessions at once
            limit.release()
            nursery.start_soon(one)


async def settled(rt: omnigent.Runtime) -> float:
    while rt.statistics()["tasks"]:  # noqa: ASYNC110 - no event says "no work left"
        await trio.sleep(0.01)
    await probe(rt).bus.flush()
    gc.collect()
    return rss_mib()


async def main(n: int, concurrency: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        async with omnigent.open_runtime(db=f"sqlite:///{tmp}/mem.db") as rt:
            agent = (await rt.create_agent(SPEC)).id
            start = time.perf_counter()
            await touch_many(rt, agent, 1000, concurrency)
            at_1000 = await settled(rt)
            await touch_many(rt, agent, n - 1000, concurrency)
            at_n = await settled(rt)
            elapsed = time.perf_counter() - start
            kept = probe(rt).bus.statistics()["sessions"]
    print(f"sessions touched: {n} ({n / elapsed:,.0f}/s, concurrency {concurrency})")
    print(f"RSS after 1,000: {at_1000:.1f} MiB; after {n:,}: {at_n:.1f} MiB")
    print(f"growth: {(at_n / at_1000 - 1) * 100:+.1f} %; sessions the bus keeps: {kept}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("n", type=int, nargs="?", default=100_000)
    parser.add_argument("--concurrency", type=int, default=16)
    options = parser.parse_args()
    trio.run(main, options.n, options.concurrency)
