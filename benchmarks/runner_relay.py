"""A turn through a runner against the same turn run locally, in one run.

One server runtime (in this process: the store on a real SQLite file, the runner hub,
the HTTP app on loopback) and one ``omnigent runner`` in its own process (its own
interpreter, as on another machine), dialled over a real WebSocket. Two scripted
agents, each run twice — on a session bound to the runner and on a local one:

* **deltas**: one ``say`` of N one-word deltas (default 20,000). Timed from
  ``send_message`` to the terminal status, seen by a live subscriber that has received
  every delta (each one ``response.output_text.delta`` event, as locally). Target:
  through the runner ≤ 1.3x local.
* **tool calls**: M calls (default 1,000) of ``sys_os_read`` on a 5-byte file, each
  through the server's policies; on the runner each also crosses the link twice
  (``turn/call_tool`` to the server, ``tool/run`` back). Reported per call.

A warm-up turn runs first on each session. The order of the two runs alternates over
``--rounds`` rounds (default 3) and the medians are reported.

Usage: ``python benchmarks/runner_relay.py [--deltas N] [--calls M] [--rounds R]``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from functools import partial
from pathlib import Path
from typing import Any

import hypercorn.trio
import trio
from hypercorn.config import Config

import omnigent
from omnigent.model import OutputTextDelta, SessionStatusChanged
from omnigent.transports.http import create_app
from omnigent.transports.runner import RunnerSettings, open_runner_hub

TOKEN = "benchmark-token-0123456789"


def word(i: int) -> str:
    return f"w{i:06d} "


def deltas_spec(n: int) -> dict[str, Any]:
    text = "".join(word(i) for i in range(n))
    turns = [[{"say": "warm"}], [{"say": text}]]
    return {"name": "deltas", "executor": {"config": {"harness": "scripted", "turns": turns}}}


def calls_spec(m: int) -> dict[str, Any]:
    read = {"call": "sys_os_read", "args": {"path": "small.txt"}}
    turns = [[read], [read] * m]
    return {
        "name": "calls",
        "os_env": {"cwd": "bench"},
        "executor": {"config": {"harness": "scripted", "turns": turns}},
    }


async def timed_turn(rt: omnigent.Runtime, session_id: str) -> tuple[float, int]:
    """(seconds, delta events) of one turn, from the message to its terminal status."""
    deltas = 0
    async with rt.subscribe(session_id) as events:
        started = time.perf_counter()
        await rt.send_message(session_id, "go")
        async for event in events:
            if isinstance(event, OutputTextDelta):
                deltas += 1
            if isinstance(event, SessionStatusChanged) and event.status.terminal:
                assert event.status == "idle", event
                return time.perf_counter() - started, deltas
    raise AssertionError("the stream ended early")


async def start_runner(url: str, root: Path) -> trio.Process:
    """``omnigent runner`` in its own process; returns once it is connected."""
    (root / "workspace" / "bench").mkdir(parents=True)
    (root / "workspace" / "bench" / "small.txt").write_text("data\n")
    env = {**os.environ, "OMNIGENT_HOME": str(root / "home")}
    command = [sys.executable, "-m", "omnigent", "runner", "--server", url, "--token", TOKEN]
    command += ["--name", "bench", "--workspace", str(root / "workspace")]
    process = await trio.lowlevel.open_process(
        command, stderr=subprocess.PIPE, env=env, start_new_session=True
    )
    assert process.stderr is not None
    said = b""
    while b"connected to" not in said:
        chunk = await process.stderr.receive_some()
        assert chunk, said.decode()
        said += chunk
    return process


async def main(n: int, m: int, rounds: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "server" / "bench").mkdir(parents=True)
        (root / "server" / "bench" / "small.txt").write_text("data\n")
        settings = RunnerSettings((TOKEN,))
        async with (
            open_runner_hub(settings) as hub,
            omnigent.open_runtime(
                db=f"sqlite:///{root / 'server.db'}",
                home=root / "server" / "home",
                workspace=root / "server",
                runners=hub,
            ) as rt,
            trio.open_nursery() as nursery,
        ):
            config = Config()
            config.bind = ["127.0.0.1:0"]
            config.accesslog = None
            config.websocket_max_message_size = 64 * 1024 * 1024
            shutdown = trio.Event()
            app = create_app(rt, runners=hub)
            urls = await nursery.start(
                partial(hypercorn.trio.serve, app, config, shutdown_trigger=shutdown.wait)
            )
            runner = await start_runner(urls[0], root / "runner")
            try:
                results = await run_rounds(rt, n, m, rounds)
            finally:
                runner.terminate()
                await runner.wait()
                shutdown.set()
    report(results, n, m)


async def run_rounds(rt: omnigent.Runtime, n: int, m: int, rounds: int) -> dict[str, list[float]]:
    results: dict[str, list[float]] = {}
    for name, spec in (("deltas", deltas_spec(n)), ("calls", calls_spec(m))):
        agent = await rt.create_agent(spec)
        for r in range(rounds):
            order = ("local", "runner") if r % 2 == 0 else ("runner", "local")
            for where in order:
                runner_id = "bench" if where == "runner" else None
                session = await rt.create_session(agent.id, runner_id=runner_id)
                await timed_turn(rt, session.id)  # warm-up: the harness, the link
                seconds, deltas = await timed_turn(rt, session.id)
                if name == "deltas":
                    assert deltas == n, deltas
                results.setdefault(f"{name} {where}", []).append(seconds)
    return results


def report(results: dict[str, list[float]], n: int, m: int) -> None:
    med = {key: statistics.median(values) for key, values in results.items()}
    for key, values in results.items():
        runs = ", ".join(f"{v:.2f}" for v in values)
        print(f"{key:<16} median {med[key]:.3f} s   (runs: {runs})")
    ratio = med["deltas runner"] / med["deltas local"]
    print(f"{n} deltas through a runner / locally: {ratio:.2f}x (target <= 1.3x)")
    per_call = (med["calls runner"] - med["calls local"]) / m * 1000
    print(
        f"{m} tool calls: {med['calls local'] / m * 1000:.2f} ms each locally, "
        f"{med['calls runner'] / m * 1000:.2f} ms through the runner "
        f"(+{per_call:.2f} ms per call)"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--deltas", type=int, default=20_000)
    parser.add_argument("--calls", type=int, default=1_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    trio.run(main, args.deltas, args.calls, args.rounds)
