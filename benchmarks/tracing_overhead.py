"""Tracing overhead: a 20,000-delta relay with OpenTelemetry tracing on vs off, in one run.

Run: ``python benchmarks/tracing_overhead.py [--deltas 20000] [--rounds 7]``
(needs the ``otel`` extra)

Four processes and a receiver: the model (``omnigent mock-llm`` playing a
``--deltas``-chunk answer, one word per chunk); two ``omnigent serve`` on their own
SQLite files with the same ``loop`` agent on that model — one untraced, one with
``OTEL_EXPORTER_OTLP_ENDPOINT`` set (tracing on: ``invoke_agent`` and ``chat`` spans per
turn, batched and exported over OTLP HTTP); an OTLP HTTP receiver in this process (a
thread: it counts the export requests and their bytes, so the run shows spans really
left); and this client. Each round streams one turn from each server
(``POST /v1/sessions/{id}/events?stream=true`` on a new session), in alternating order,
timed from the request to the end of the stream and checked for every word; round 0
warms up. Printed: the medians, the traced / untraced ratio of each round and of the
medians (target ≤ 1.1x), each server's CPU time per turn (from ``/proc``), and what the
receiver got.
"""

from __future__ import annotations

import argparse
import contextlib
import http.server
import json
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import trio
from _procs import OMNIGENT, cpu_seconds, median, served
from relay import DELTA, read_frames, word


class _Sink(http.server.BaseHTTPRequestHandler):
    """Accepts OTLP export requests (any path), counting them and their bytes."""

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        with self.server.lock:  # type: ignore[attr-defined]
            self.server.requests += 1  # type: ignore[attr-defined]
            self.server.bytes += len(body)  # type: ignore[attr-defined]
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@contextlib.contextmanager
def otlp_sink() -> Iterator[http.server.ThreadingHTTPServer]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Sink)
    server.lock = threading.Lock()  # type: ignore[attr-defined]
    server.requests = 0  # type: ignore[attr-defined]
    server.bytes = 0  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


async def main(deltas: int, rounds: int) -> None:
    text = "".join(word(i) for i in range(deltas))
    message = {"type": "message", "data": {"content": [{"type": "input_text", "text": "go"}]}}
    with tempfile.TemporaryDirectory() as tmp, otlp_sink() as sink:
        script = Path(tmp) / "script.json"
        script.write_text(
            json.dumps([{"text": text, "chunk_size": len(word(0))}] * 2 * (rounds + 1))
        )
        model_argv = [*OMNIGENT, "mock-llm", "--port", "0", "--script", str(script)]
        endpoint = f"http://127.0.0.1:{sink.server_port}"
        # Both servers see the same environment but for the exporter's endpoint; the
        # batch processor exports every 0.5 s (so spans leave during the run, not only
        # at exit).
        traced = {"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint, "OTEL_BSP_SCHEDULE_DELAY": "500"}
        untraced = {"OTEL_EXPORTER_OTLP_ENDPOINT": "", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": ""}
        async with contextlib.AsyncExitStack() as stack:
            model, _ = await stack.enter_async_context(served(model_argv, "serving on "))
            client = await stack.enter_async_context(httpx.AsyncClient(timeout=120))
            servers: dict[str, tuple[str, int, str]] = {}
            for name, env in (("off", untraced), ("on", traced)):
                home = Path(tmp) / name
                home.mkdir(mode=0o700)
                argv = [*OMNIGENT, "serve", "--port", "0", "--db", f"sqlite:///{home}/r.db"]
                argv += ["--allow-model-url", model]
                url, pid = await stack.enter_async_context(
                    served(argv, "omnigent serving on ", env={**env, "OMNIGENT_HOME": str(home)})
                )
                config = {"harness": "loop", "model": "mock-model", "base_url": model}
                spec = {"name": "relay", "executor": {"config": config}}
                answer = await client.post(f"{url}/v1/agents", json=spec)
                assert answer.status_code == 201, answer.text
                servers[name] = (url, pid, answer.json()["id"])

            async def relay(name: str) -> tuple[float, int, int]:
                url, _pid, agent_id = servers[name]
                created = await client.post(f"{url}/v1/sessions", json={"agent_id": agent_id})
                stream = f"{url}/v1/sessions/{created.json()['id']}/events?stream=true"
                return await read_frames(client, stream, message, DELTA)

            times: dict[str, list[float]] = {name: [] for name in servers}
            cpu: dict[str, list[float]] = {name: [] for name in servers}
            for number in range(rounds + 1):  # round 0 warms both up
                order = ["off", "on"] if number % 2 else ["on", "off"]
                for name in order:
                    pid = servers[name][1]
                    used = cpu_seconds(pid)
                    seconds, _frames, words = await relay(name)
                    used = cpu_seconds(pid) - used
                    assert words == deltas, (name, words)
                    if number:
                        times[name].append(seconds)
                        cpu[name].append(used)
            await trio.sleep(1.0)  # the traced server's last batch leaves
    print(f"a {deltas}-delta relay, tracing off vs on, {rounds} rounds (median, then each):")
    for name, values in times.items():
        each = " / ".join(f"{v:.3f}" for v in values)
        seconds, used = median(values), median(cpu[name])
        print(f"  tracing {name:<3} {seconds:.3f} s  ({each});  server CPU {used:.3f} s")
    ratios = [on / off for on, off in zip(times["on"], times["off"], strict=True)]
    each = " / ".join(f"{r:.2f}" for r in ratios)
    print(
        f"  on / off: {median(times['on']) / median(times['off']):.2f}x of the medians;"
        f" median of the rounds {median(ratios):.2f}x ({each}); target <= 1.1x"
    )
    print(
        f"  server CPU on / off: {median(cpu['on']) / median(cpu['off']):.2f}x of the medians,"
        f" {sum(cpu['on']) / sum(cpu['off']):.2f}x of the totals"
        f" ({sum(cpu['on']):.2f} s / {sum(cpu['off']):.2f} s over {rounds} turns each)"
    )
    print(f"  the receiver got {sink.requests} OTLP export requests, {sink.bytes:,} bytes")  # type: ignore[attr-defined]
    assert sink.requests > 0, "the traced server exported nothing: is the otel extra installed?"  # type: ignore[attr-defined]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--deltas", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    trio.run(main, args.deltas, args.rounds)
