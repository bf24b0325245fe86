"""Store: events written per second, batched vs one row per round trip (SQLite, PostgreSQL).

Run: ``python benchmarks/store_writes.py [--events 20000] [--writers 100] [--no-postgres]``

On each store (a SQLite file; PostgreSQL — a private cluster from the machine's
binaries, ``fsync=off``, as the test suite starts — in the same run), ``--events``
``response.output_text.delta`` rows are written to one session three ways:

(a) **batched**: ``append_events`` with 1,024 rows a call — what the event bus does;
(b) **one row per round trip**: ``append_events`` with one row, ``--events`` times in
    a row — the naive way, the baseline;
(c) **concurrent single rows**: ``--writers`` tasks writing one row per call at once,
    to a session each (as a hundred tasks ending together write their inbox items):
    on SQLite the writes that wait together share a transaction (group commit).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from typing import Any

import trio
from _procs import HERE, session_row

from omnigent.core.bus import encode_event
from omnigent.model import OutputTextDelta
from omnigent.stores import Store, StoredEvent, open_store

sys.path.insert(0, str(HERE.parent))

BATCH = 1024


def rows(session_id: str, first: int, count: int) -> list[StoredEvent]:
    out = []
    for i in range(first, first + count):
        event = OutputTextDelta(response_id="resp_x", item_id="item_x", delta=f"w{i} ").stamped(
            session_id=session_id, event_id=i, created_at=1764547200.0
        )
        out.append(StoredEvent(session_id, i, event.type, encode_event(event)))
    return out


async def measure(store: Store, events: int, writers: int, tag: str) -> dict[str, float]:
    for name in ("batched", "single", *(f"w{k}" for k in range(writers))):
        await store.insert_session(session_row(f"conv_{tag}_{name}"))
    batched = rows(f"conv_{tag}_batched", 1, events)
    started = time.perf_counter()
    for at in range(0, events, BATCH):
        await store.append_events(batched[at : at + BATCH])
    took_batched = time.perf_counter() - started

    single = rows(f"conv_{tag}_single", 1, events)
    started = time.perf_counter()
    for row in single:
        await store.append_events([row])
    took_single = time.perf_counter() - started

    per_writer = events // writers

    async def writer(k: int) -> None:
        for row in rows(f"conv_{tag}_w{k}", 1, per_writer):
            await store.append_events([row])

    started = time.perf_counter()
    async with trio.open_nursery() as nursery:
        for k in range(writers):
            nursery.start_soon(writer, k)
    took_concurrent = time.perf_counter() - started
    for name, count in (("batched", events), ("single", events), ("w0", per_writer)):
        assert await store.max_event_id(f"conv_{tag}_{name}") == count
    return {
        "batched": events / took_batched,
        "single": events / took_single,
        "concurrent": per_writer * writers / took_concurrent,
    }


async def main(args: argparse.Namespace) -> None:
    results: list[tuple[str, dict[str, Any]]] = []
    with tempfile.TemporaryDirectory() as tmp:
        async with open_store(f"sqlite:///{tmp}/store.db") as store:
            results.append(("SQLite file", await measure(store, args.events, args.writers, "s")))
        if not args.no_postgres:
            from tests.pg_cluster import PgCluster, find_bindir

            bindir = find_bindir()
            if bindir is None:
                print("no PostgreSQL binaries on this machine: SQLite only")
            else:
                cluster = PgCluster(bindir)
                try:
                    async with open_store(cluster.url(cluster.create_database())) as store:
                        measured = await measure(store, args.events, args.writers, "p")
                        results.append(("PostgreSQL", measured))
                finally:
                    cluster.destroy()
    print(f"{args.events} event rows per way; {args.writers} concurrent writers for (c):")
    for name, r in results:
        print(
            f"  {name:<12} (a) batched {r['batched']:>9,.0f} rows/s   (b) one per round trip "
            f"{r['single']:>7,.0f} rows/s   ({r['batched'] / r['single']:.0f}x)   "
            f"(c) {args.writers} writers {r['concurrent']:>7,.0f} rows/s"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--writers", type=int, default=100)
    parser.add_argument("--no-postgres", action="store_true")
    trio.run(main, parser.parse_args())
