"""Fan-out: one session streaming to 200 SSE subscribers vs a bare Hypercorn broadcast.

Run: ``python benchmarks/fanout.py [--subscribers 200] [--turns 3] [--deltas 500]
[--interval 0.002]``

Processes: a paced model (``benchmarks/bare.py model``: ``--deltas`` chunks
``--interval`` s apart, each carrying the moment it was sent), ``omnigent serve`` on a
SQLite file with a ``loop`` agent on that model, the bare server (``benchmarks/bare.py
fanout``: one broadcast, each frame built once and sent to every open stream), and
this client.

(a) bare: ``--subscribers`` streams on the bare server, then ``--turns`` broadcasts
    of ``--deltas`` frames paced the same way; then the same on a second bare server
    with ``--settled-gc`` ("bare, gc"): its garbage collector set once it is up as
    ``omnigent serve`` sets its own (``omnigent/_gc.py``), so the comparison is also
    made with the collector's stops taken out of both sides;
(b) omnigent: ``--subscribers`` streams ``GET /v1/sessions/{id}/stream``, then
    ``--turns`` messages, one after the other (each turn the model's ``--deltas``).

For every delta frame every subscriber receives, the delay is the moment it was read
here minus the frame's ``created_at`` — when omnigent's bus stamped the event as it
was published (ms resolution; then persisted, fanned out, framed, written), or when
the bare server built the frame. Its p50, p99 and max are printed, and the delay from
each delta's own send (the model's, for omnigent: the harness's share included), and
the server's resident set growth per open stream (``VmRSS`` once every stream is
open, before anything is sent, minus before the first one opened).
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import tempfile
import time
from typing import Any

import httpx
import trio
from _procs import HERE, OMNIGENT, cpu_seconds, percentile, rss_kib, served

BARE = [sys.executable, str(HERE / "bare.py")]


class Watcher:
    """One SSE subscriber: the delay of every delta timestamp it reads."""

    def __init__(
        self, client: httpx.AsyncClient, url: str, progress: trio.lowlevel.ParkingLot
    ) -> None:
        self._client = client
        self._url = url
        self.progress = progress  # unparked after every chunk read
        self.delays: list[float] = []  # publish (the frame's created_at) to receipt
        self.from_source: list[float] = []  # each delta's send (model or broadcast) to receipt
        self.last_receipt = 0.0
        self.idle = 0  # session.status idle frames seen (omnigent's turns ending)
        self.connected = trio.Event()

    async def run(self, stop: trio.Event) -> None:
        buffer = b""
        async with self._client.stream("GET", self._url) as response:
            assert response.status_code == 200, response.status_code
            self.connected.set()
            async for chunk in response.aiter_raw():
                received = time.time()
                *frames, buffer = (buffer + chunk).split(b"\n\n")
                for frame in frames:
                    if b"event: session.status" in frame and b'"status":"idle"' in frame:
                        self.idle += 1
                    if b"event: response.output_text.delta" not in frame:
                        continue
                    start = frame.index(b'"delta":"') + 9
                    text = frame[start : frame.index(b'"', start)]
                    self.from_source.extend(received - float(t) for t in text.split())
                    at = frame.index(b'"created_at":') + 13
                    self.delays.append(received - float(frame[at : frame.index(b"}", at)]))
                    self.last_receipt = received
                self.progress.unpark_all()
                if stop.is_set():
                    return


async def watch_all(
    client: httpx.AsyncClient, url: str, subscribers: int, expected: int, drive: Any
) -> list[Watcher]:
    """Open the streams, run ``drive(watchers)``, wait until every delta is in."""
    progress = trio.lowlevel.ParkingLot()
    watchers = [Watcher(client, url, progress) for _ in range(subscribers)]
    stop = trio.Event()
    async with trio.open_nursery() as nursery:
        for watcher in watchers:
            nursery.start_soon(watcher.run, stop)
        for watcher in watchers:
            await watcher.connected.wait()
        await drive(watchers)
        with trio.fail_after(600):
            while sum(len(w.from_source) for w in watchers) < expected * subscribers:
                await progress.park()
        stop.set()
        nursery.cancel_scope.cancel()
    return watchers


def report(name: str, watchers: list[Watcher], cpu: float, memory: int) -> tuple[float, float]:
    delays = [d for w in watchers for d in w.delays]
    source = [d for w in watchers for d in w.from_source]
    p50, p99 = percentile(delays, 0.5), percentile(delays, 0.99)
    print(
        f"  {name:<9} publish → receipt: p50 {p50 * 1000:6.1f} ms  p99 {p99 * 1000:6.1f} ms  "
        f"max {max(delays) * 1000:6.1f} ms ({len(delays)} frames); send → receipt: p50 "
        f"{percentile(source, 0.5) * 1000:6.1f} ms  p99 {percentile(source, 0.99) * 1000:6.1f} ms"
        f"; server CPU {cpu:.2f} s; memory per open stream {memory / len(watchers):.1f} KiB"
    )
    return p50, p99


async def bare_broadcasts(
    client: httpx.AsyncClient, args: argparse.Namespace, *extra: str
) -> tuple[list[Watcher], float, int]:
    """The baseline: ``args.turns`` broadcasts on a bare server; its watchers, its CPU,
    and the KiB its resident set grew by once every stream was open."""
    async with served([*BARE, "fanout", *extra], "serving on ") as (bare, bare_pid):

        async def drive_bare(watchers: list[Watcher]) -> None:
            assert (await client.get(f"{bare}/count")).json()["streams"] == args.subscribers
            memory.append(rss_kib(bare_pid))
            for _ in range(args.turns):
                query = f"deltas={args.deltas}&interval={args.interval}"
                answer = await client.post(f"{bare}/start?{query}", timeout=None)
                assert answer.json()["streams"] == args.subscribers

        memory = [rss_kib(bare_pid)]
        used = cpu_seconds(bare_pid)
        expected = args.turns * args.deltas
        run = await watch_all(client, f"{bare}/stream", args.subscribers, expected, drive_bare)
        return run, cpu_seconds(bare_pid) - used, memory[1] - memory[0]


async def main(args: argparse.Namespace) -> None:
    expected = args.turns * args.deltas
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=None)
    model_argv = [*BARE, "model", "--deltas", str(args.deltas), "--interval", str(args.interval)]
    with tempfile.TemporaryDirectory() as tmp:
        serve_argv = [*OMNIGENT, "serve", "--port", "0", "--db", f"sqlite:///{tmp}/fanout.db"]
        async with contextlib.AsyncExitStack() as stack:
            model, _ = await stack.enter_async_context(served(model_argv, "serving on "))
            # The benchmark's spec names the model's URL, as a client's: the operator allows it.
            serve_argv += ["--allow-model-url", model]
            omni, omni_pid = await stack.enter_async_context(
                served(serve_argv, "omnigent serving on ")
            )
            client = await stack.enter_async_context(
                httpx.AsyncClient(timeout=httpx.Timeout(30, read=None), limits=limits)
            )
            baselines: dict[str, tuple[list[Watcher], float, int]] = {}
            if not args.omnigent_only:
                baselines["bare"] = await bare_broadcasts(client, args)
                # The same server with its collector set as omnigent serve sets its own.
                baselines["bare, gc"] = await bare_broadcasts(client, args, "--settled-gc")

            spec = {
                "name": "fanout",
                "executor": {
                    "config": {"harness": "loop", "model": "mock-model", "base_url": f"{model}/v1"}
                },
            }
            agent = (await client.post(f"{omni}/v1/agents", json=spec)).json()["id"]
            session = (await client.post(f"{omni}/v1/sessions", json={"agent_id": agent})).json()
            stream = f"{omni}/v1/sessions/{session['id']}/stream?after={session['last_event_id']}"
            message = {
                "type": "message",
                "data": {"content": [{"type": "input_text", "text": "go"}]},
            }

            async def drive_omnigent(watchers: list[Watcher]) -> None:
                memory.append(rss_kib(omni_pid))  # every stream open, nothing sent yet
                turns_took = []
                for turn in range(args.turns):
                    started = time.perf_counter()
                    url = f"{omni}/v1/sessions/{session['id']}/events"
                    answer = await client.post(url, json=message)
                    assert answer.status_code == 202, answer.text
                    while watchers[0].idle <= turn:  # the turn's end, as a subscriber saw it
                        await watchers[0].progress.park()
                    turns_took.append(time.perf_counter() - started)
                took = " / ".join(f"{t:.2f}" for t in turns_took)
                print(f"  omnigent's turns took {took} s (the model's {args.deltas} deltas each)")

            memory = [rss_kib(omni_pid)]
            used = cpu_seconds(omni_pid)
            omni_run = await watch_all(client, stream, args.subscribers, expected, drive_omnigent)
            omni_cpu = cpu_seconds(omni_pid) - used
            omni_memory = memory[1] - memory[0]
    print(
        f"fan-out: {args.subscribers} subscribers, {args.turns} turns of {args.deltas} deltas "
        f"{args.interval * 1000:g} ms apart:"
    )
    bare_p = {name: report(name, *run) for name, run in baselines.items()}
    omni_p = report("omnigent", omni_run, omni_cpu, omni_memory)
    for name, (p50, p99) in bare_p.items():
        print(
            f"  p99 omnigent / {name}: {omni_p[1] / p99:.2f}x;"
            f"  p50 omnigent / {name}: {omni_p[0] / p50:.2f}x"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--subscribers", type=int, default=200)
    parser.add_argument("--turns", type=int, default=3)
    parser.add_argument("--deltas", type=int, default=500)
    parser.add_argument("--interval", type=float, default=0.002)
    parser.add_argument("--omnigent-only", action="store_true", help="skip the baselines")
    trio.run(main, parser.parse_args())
