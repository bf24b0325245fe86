"""The event bus's hot path: ``EventBus.publish`` alone, and with its writer and a reader.

Run: ``python benchmarks/bus_publish.py [--events 2000] [--reps 60] [--stream 50000]``

Two measurements in one process, on an in-memory store, of the public bus only (so
the same script measures any build: ``PYTHONPATH=/other/tree python
benchmarks/bus_publish.py``):

(a) **publish alone**: ``--events`` deltas published on one session of a bus whose
    writer is not running, so nothing else runs — encode, stamp, queue, the
    checkpoint and the yield every 16 — ``--reps`` times on a new bus; µs per publish
    (best, quartile, median of the repetitions);
(b) **publish, write, deliver**: ``--stream`` deltas published with the writer running
    and a live subscriber reading them all, seven times; the process's CPU time per
    event (all threads: the store's writes included), best and median.

(a) is the figure to compare builds by: it is CPU-bound and short, so other work on
the machine moves it least (compare best figures).
"""

from __future__ import annotations

import argparse
import statistics
import time

import trio
from _procs import session_row

from omnigent.core.bus import EventBus
from omnigent.model import OutputTextDelta
from omnigent.stores import Store, open_store

SESSION = "conv_bench"


def deltas(n: int) -> list[OutputTextDelta]:
    return [OutputTextDelta(response_id="r", item_id="i", delta=f"w{i} ") for i in range(n)]


async def publish_alone(store: Store, events: list[OutputTextDelta], reps: int) -> list[float]:
    """µs per publish, one figure per repetition (a bus whose writer does not run)."""
    times = []
    for _ in range(reps):
        bus = EventBus(store)
        await bus.publish(SESSION, events[0])  # the counter is read from the store
        started = time.perf_counter()
        for event in events[1:]:
            await bus.publish(SESSION, event)
        times.append((time.perf_counter() - started) / (len(events) - 1) * 1e6)
    return times


async def publish_and_deliver(store: Store, events: list[OutputTextDelta]) -> float:
    """CPU µs per event: publish, the writer's batches, a live reader taking them all."""
    bus = EventBus(store)
    async with trio.open_nursery() as nursery:
        await nursery.start(bus.run)
        async with bus.subscribe(SESSION, None) as subscription:

            async def read() -> None:
                seen = 0
                async for _ in subscription:
                    seen += 1
                    if seen == len(events):
                        return

            started = time.process_time()
            async with trio.open_nursery() as inner:
                inner.start_soon(read)
                for event in events:
                    await bus.publish(SESSION, event)
            used = time.process_time() - started
        await bus.close()
    return used / len(events) * 1e6


async def main(args: argparse.Namespace) -> None:
    async with open_store(None) as store:
        await store.insert_session(session_row(SESSION))
        alone = sorted(await publish_alone(store, deltas(args.events), args.reps))
        quartile = alone[len(alone) // 4]
        print(
            f"(a) publish alone, {args.events} events x {args.reps}: best {alone[0]:.2f} µs, "
            f"quartile {quartile:.2f} µs, median {statistics.median(alone):.2f} µs"
        )
        stream = deltas(args.stream)
        cpu = sorted([await publish_and_deliver(store, stream) for _ in range(7)])
        print(
            f"(b) publish, write, deliver, {args.stream} events x 7: CPU best "
            f"{cpu[0]:.2f} µs/event, median {statistics.median(cpu):.2f} µs/event"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=2000)
    parser.add_argument("--reps", type=int, default=60)
    parser.add_argument("--stream", type=int, default=50000)
    trio.run(main, parser.parse_args())
