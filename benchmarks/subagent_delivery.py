"""How long a sub-agent's result takes to reach its parent's inbox, over a fan-out.

A scripted orchestrator dispatches to N children (``sys_session_send``, default 20) on
a real SQLite file; the children finish at staggered times. For each child this
measures the time from its *final event* — the terminal ``session.status`` of its last
turn, as it is handed to the event bus — to its result being in the parent's inbox
(the store transaction that finishes the work entry and writes the inbox item has
returned). Then the parent is woken once for them all.

Baseline, in the same run and on the same store: writing an inbox item and publishing
``session.inbox.updated`` directly (what a background task's delivery costs), N times.

Usage: ``python benchmarks/subagent_delivery.py [--children 20] [--runs 5]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import trio

import omnigent
from omnigent.model import InboxUpdated, SessionStatusChanged
from omnigent.testing import probe

STAGGER = 5  # sub-agents w0..w4 finish 0, 10, 20, 30, 40 ms into their turn


def spec(children: int) -> dict[str, Any]:
    dispatch = [
        {
            "call": "sys_session_send",
            "args": {"agent": f"w{n % STAGGER}", "title": f"part-{n}", "args": f"part {n}"},
        }
        for n in range(children)
    ]
    workers = [
        {
            "name": f"w{k}",
            "executor": {
                "config": {"harness": "scripted", "script": [{"sleep": 0.01 * k}, {"say": "done"}]}
            },
        }
        for k in range(STAGGER)
    ]
    return {
        "name": "lead",
        "executor": {"config": {"harness": "scripted", "turns": [dispatch, [{"say": "all in"}]]}},
        "sub_agents": workers,
        "tools": {"agents": [w["name"] for w in workers]},
    }


async def fan_out(db: str, children: int) -> tuple[list[float], float]:
    """Latencies (s) of each child's delivery, and the whole fan-out's wall time."""
    async with omnigent.open_runtime(db) as rt:
        final: dict[str, float] = {}
        latencies: list[float] = []
        bus, store = probe(rt).bus, probe(rt).store  # instrumentation only
        publish_now, finish_work = bus.publish_now, store.finish_work

        async def timed_publish(session_id: str, *events: Any) -> None:
            await publish_now(session_id, *events)
            if any(isinstance(e, SessionStatusChanged) and e.status == "idle" for e in events):
                final[session_id] = time.perf_counter()

        async def timed_finish(work_id: str, status: str, output: str, *rest: Any) -> Any:
            count = await finish_work(work_id, status, output, *rest)
            child = json.loads(rest[1])["task_id"]
            latencies.append(time.perf_counter() - final[child])
            return count

        bus.publish_now = timed_publish  # type: ignore[method-assign]
        store.finish_work = timed_finish  # type: ignore[method-assign]
        session = await rt.create_session((await rt.create_agent(spec(children))).id)
        async with rt.subscribe(session.id) as events:
            start = time.perf_counter()
            await rt.send_message(session.id, "go")
            async for event in events:
                idle = isinstance(event, SessionStatusChanged) and event.status == "idle"
                if idle and len(latencies) == children and not await pending(rt, session.id):
                    break
            elapsed = time.perf_counter() - start
        assert len(latencies) == children, latencies
        return latencies, elapsed


async def pending(rt: omnigent.Runtime, session_id: str) -> int:
    """Inbox items the parent has not read yet."""
    return await probe(rt).store.inbox_count(session_id)


async def baseline(db: str, children: int) -> list[float]:
    """Writing and announcing an inbox item directly, ``children`` times."""
    async with omnigent.open_runtime(db) as rt:
        session = await rt.create_session((await rt.create_agent({"name": "plain"})).id)
        took = []
        for n in range(children):
            start = time.perf_counter()
            count = await probe(rt).store.add_inbox_item(session.id, f"inbox_{n}", "{}")
            await probe(rt).bus.publish(session.id, InboxUpdated(count=count))
            took.append(time.perf_counter() - start)
        return took


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def main(children: int, runs: int) -> None:
    delivered: list[float] = []
    walls: list[float] = []
    floor: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        for run in range(runs + 1):  # the first run warms up, and is not counted
            db = f"sqlite:///{Path(tmp) / f'fan-{run}.db'}"
            latencies, wall = await fan_out(db, children)
            base = await baseline(f"sqlite:///{Path(tmp) / f'base-{run}.db'}", children)
            if run:
                delivered += latencies
                walls.append(wall)
                floor += base
    ms = 1000
    print(f"{runs} runs x {children} children ({len(delivered)} deliveries)")
    print(
        f"final event -> parent inbox: p50 {pct(delivered, 0.5) * ms:.2f} ms, "
        f"p99 {pct(delivered, 0.99) * ms:.2f} ms, max {max(delivered) * ms:.2f} ms"
    )
    print(
        f"baseline inbox write + publish: p50 {pct(floor, 0.5) * ms:.2f} ms, "
        f"p99 {pct(floor, 0.99) * ms:.2f} ms"
    )
    print(f"fan-out, send to parent woken with all results: {statistics.median(walls):.3f} s")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--children", type=int, default=20)
    parser.add_argument("--runs", type=int, default=5)
    options = parser.parse_args()
    trio.run(main, options.children, options.runs)
