"""Does a turn cost more on a long session? A one-delta turn, empty vs 10,000 items.

Runs, in one process on a real SQLite file (WAL): two sessions of one scripted agent
whose turn streams a single delta — one session empty, one holding N items (default
10,000: user and assistant messages, as a long conversation leaves). After one
warm-up turn each (a session's history is read once, then kept), it times T turns on
each, alternating, from ``send_message`` to the terminal ``session.status`` seen by a
subscriber, and reports the medians and their ratio.

Usage: ``python benchmarks/turn_cost.py [N] [T]`` (defaults 10000 and 60).
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time

import trio

import omnigent
from omnigent.model import TERMINAL_STATUSES, MessageItem, OutputText, SessionStatusChanged
from omnigent.model import InputText as Text
from omnigent.testing import probe

SPEC = {
    "name": "one-delta",
    "executor": {"type": "omnigent", "config": {"harness": "scripted", "script": [{"say": "ok"}]}},
}


async def fill(rt: omnigent.Runtime, session_id: str, n: int) -> None:
    """Store ``n`` conversation items in the session (as a long chat would)."""
    batch = []
    for i in range(n):
        if i % 2 == 0:
            item = MessageItem(role="user", content=(Text(f"question {i} " * 8),))
        else:
            item = MessageItem(role="assistant", content=(OutputText(f"answer {i} " * 20),))
        batch.append(item.to_dict())
        if len(batch) == 1000:
            await probe(rt).store.put_items(session_id, batch)
            batch = []
    if batch:
        await probe(rt).store.put_items(session_id, batch)


async def one_turn(rt: omnigent.Runtime, session_id: str) -> float:
    async with rt.subscribe(session_id) as events:
        start = time.perf_counter()
        await rt.send_message(session_id, "go")
        async for event in events:
            if isinstance(event, SessionStatusChanged) and event.status in TERMINAL_STATUSES:
                assert event.status == "idle", event
                return time.perf_counter() - start
    raise AssertionError("the turn did not end")


async def quiet(rt: omnigent.Runtime) -> None:
    while rt.statistics()["tasks"]:  # noqa: ASYNC110 - no event says "no work left"
        await trio.sleep(0.001)


async def main(n: int, turns: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        async with omnigent.open_runtime(db=f"sqlite:///{tmp}/bench.db") as rt:
            agent = await rt.create_agent(SPEC)
            empty = (await rt.create_session(agent.id)).id
            full = (await rt.create_session(agent.id)).id
            await fill(rt, full, n)
            first = {}
            for name, session in (("empty", empty), ("full", full)):
                first[name] = await one_turn(rt, session)  # the history is read here
                await quiet(rt)
            times: dict[str, list[float]] = {"empty": [], "full": []}
            for _ in range(turns):
                for name, session in (("empty", empty), ("full", full)):
                    times[name].append(await one_turn(rt, session))
                    await quiet(rt)
    medians = {name: statistics.median(values) for name, values in times.items()}
    print(f"items in the long session: {n}; timed turns per session: {turns}")
    print(
        f"first turn (history read): empty {first['empty'] * 1e3:.2f} ms, "
        f"full {first['full'] * 1e3:.2f} ms"
    )
    for name, value in medians.items():
        print(f"median turn, {name}: {value * 1e3:.2f} ms")
    print(f"ratio full/empty: {medians['full'] / medians['empty']:.3f}")


if __name__ == "__main__":
    args = [int(a) for a in sys.argv[1:]]
    trio.run(main, *(args + [10_000, 60][len(args) :]))
