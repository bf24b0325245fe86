"""The store's write hop under a busy event loop: how long ``append_events`` takes.

Run: ``python benchmarks/store_hop.py [--batch 8] [--writes 300] [--busy 200]``

One process, one SQLite file (WAL). ``--busy`` tasks keep the event loop as busy as a
server streaming to that many subscribers does: each builds a 2 KiB chunk and sends
it over a socket pair (a reader task drains the other end), round after round. Meanwhile
``--writes`` batches of ``--batch`` events are written one after the other with
``append_events`` (the bus's call), each timed from the call to its return, and to its
``on_stored`` callback (where the bus delivers a batch: SQLite calls it from the
commit's completion, before the caller resumes). Printed: the p50, p90, p99 and max of
each, and the same with the loop idle (the baseline), and the length of one scheduler
round under that load (a checkpoint's), so the write can be read in rounds. Run it
against two builds with ``PYTHONPATH=…`` to compare their write paths.
"""

from __future__ import annotations

import argparse
import socket
import sys
import tempfile
import time
from functools import partial

import trio
from _procs import HERE, percentile, session_row

sys.path.insert(0, str(HERE.parent))

from omnigent.core.bus import encode_event
from omnigent.model import OutputTextDelta
from omnigent.stores import StoredEvent, open_store


def batch(session_id: str, first: int, count: int) -> list[StoredEvent]:
    out = []
    for i in range(first, first + count):
        event = OutputTextDelta(response_id="resp_x", item_id="item_x", delta=f"w{i} ").stamped(
            session_id=session_id, event_id=i, created_at=1764547200.0
        )
        out.append(StoredEvent(session_id, i, event.type, encode_event(event)))
    return out


async def busy(stop: trio.Event) -> None:
    """Send 2 KiB chunks over a socket pair until ``stop``, yielding between sends."""
    left, right = socket.socketpair()
    a, b = trio.socket.from_stdlib_socket(left), trio.socket.from_stdlib_socket(right)

    async def drain() -> None:
        while not stop.is_set():
            await b.recv(1 << 16)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(drain)
        counter = 0
        while not stop.is_set():
            counter += 1
            chunk = b"".join(f"data: {counter} {i}\n\n".encode() for i in range(150))
            await a.send(chunk[:2048])
        nursery.cancel_scope.cancel()
    a.close()
    b.close()


def stamp(into: list[float]) -> None:
    into.append(time.perf_counter())


async def measure(
    store: object, session_id: str, first: int, args: argparse.Namespace
) -> tuple[list[float], list[float]]:
    """Each write's time to its return, and to its ``on_stored`` callback (where the
    bus delivers the batch to subscribers)."""
    took, stored = [], []
    for n in range(args.writes):
        rows = batch(session_id, first + n * args.batch, args.batch)
        started = time.perf_counter()
        at: list[float] = []
        await store.append_events(rows, on_stored=partial(stamp, at))  # type: ignore[attr-defined]
        took.append(time.perf_counter() - started)
        stored.append(at[0] - started)
    return took, stored


def show(name: str, took: list[float]) -> None:
    p = [percentile(took, f) * 1000 for f in (0.5, 0.9, 0.99)]
    print(
        f"  {name:<22} p50 {p[0]:6.2f} ms  p90 {p[1]:6.2f} ms  p99 {p[2]:6.2f} ms"
        f"  max {max(took) * 1000:6.2f} ms"
    )


async def main(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        async with open_store(f"sqlite:///{tmp}/hop.db") as store:
            await store.insert_session(session_row("conv_hop"))
            idle, idle_stored = await measure(store, "conv_hop", 1, args)
            stop = trio.Event()
            async with trio.open_nursery() as nursery:
                for _ in range(args.busy):
                    nursery.start_soon(busy, stop)
                await trio.sleep(0.2)
                rounds = []  # one scheduler round: a checkpoint's length
                for _ in range(50):
                    started = time.perf_counter()
                    await trio.lowlevel.checkpoint()
                    rounds.append(time.perf_counter() - started)
                first = 1 + args.writes * args.batch
                loaded, loaded_stored = await measure(store, "conv_hop", first, args)
                stop.set()
    print(f"append_events of {args.batch} events, {args.writes} writes:")
    show("idle loop, return", idle)
    show("idle loop, on_stored", idle_stored)
    show(f"{args.busy} busy, return", loaded)
    show(f"{args.busy} busy, on_stored", loaded_stored)
    round_ = percentile(rounds, 0.5)
    print(
        f"  a scheduler round with {args.busy} busy tasks: p50 {round_ * 1000:.2f} ms;"
        f" the write's p50 is {percentile(loaded, 0.5) / round_:.1f} rounds to its return,"
        f" {percentile(loaded_stored, 0.5) / round_:.1f} to on_stored"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--writes", type=int, default=300)
    parser.add_argument("--busy", type=int, default=200)
    trio.run(main, parser.parse_args())
