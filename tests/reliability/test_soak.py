"""A bounded soak: turns, interrupts, background tasks and reconnects, with flat costs.

A runtime on a SQLite file is served over loopback (Hypercorn, as ``omnigent serve``
does) and driven over HTTP, round after round, for ``OMNIGENT_SOAK_SECONDS``
(default 40; CI runs the default). Each round:

* a turn streamed with ``POST …/events?stream=true``, read to its terminal event;
* a turn interrupted mid-stream (``interrupt``), watched on the session's SSE stream
  until it ends ``cancelled``;
* a reconnecting client: a stream from ``after=0`` dropped after a few frames, then
  resumed with ``Last-Event-ID``, which must continue exactly where it stopped;
* every third round, a background shell (``sys_call_async``) whose result wakes its
  session for a second turn;
* every ten rounds (a *block*) the sessions are deleted and made anew, so what a live
  server keeps per session must go with them.

The first quarter of the time warms up (caches fill, pools open). Then, after each
block and once the runtime is quiet, the soak samples the process's open file
descriptors (``/proc/self/fd``), its Trio tasks, its RSS, its live (GC-tracked)
Python objects and what the runtime keeps per session (actors, subscribers, the
bus's counters, kept histories). At the end: descriptors and tasks are back to the
warm level (waited for, bounded: a server task may outlive its client's close by a
moment); nothing is kept for the deleted sessions; the live objects have not grown
(the medians of the first and last four samples within 3,000 — the GC's sawtooth is
about ±1,500; a leak of ten objects a turn fails a 15 s soak); RSS within 8 MiB.
"""

from __future__ import annotations

import gc
import os
import sys
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio

from omnigent.model import TERMINAL_STATUSES
from omnigent.testing import probe

from ..conftest import all_tasks, wait_quiet
from ..http_helpers import HTTPX_GENERATORS, Server, SSEReader, open_server, open_stream

pytestmark = [
    *HTTPX_GENERATORS,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux /proc"),
]

SECONDS = float(os.environ.get("OMNIGENT_SOAK_SECONDS", "40"))


def agents() -> list[dict[str, Any]]:
    def scripted(name: str, turns: list[list[dict[str, Any]]], **extra: Any) -> dict[str, Any]:
        config = {"harness": "scripted", "turns": turns}
        return {"name": name, "executor": {"type": "omnigent", "config": config}, **extra}

    words = " ".join(f"w{i}" for i in range(40))
    shell = {"tool": "sys_os_shell", "args": {"command": "echo soaked"}}
    background = [{"call": "sys_call_async", "args": shell}, {"say": "started"}]
    return [
        scripted("chat", [[{"say": words}]]),
        scripted("slow", [[{"say": "about to wait"}, {"sleep": 600}]]),
        # A background task, then the turn its result wakes; sessions live 10 rounds.
        scripted("tasker", [background, [{"say": "read it"}]] * 5, async_enabled=True),
    ]


@attrs.frozen
class Sample:
    fds: int
    tasks: int
    rss: int
    objects: int
    kept: tuple[int, ...]  # what the runtime keeps per session (see ``kept``)


def fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def rss() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def kept(runtime: Any) -> tuple[int, ...]:
    """Actors, subscribers, sessions the bus keeps, kept histories and their items."""
    stats, bus = runtime.statistics(), probe(runtime).bus.statistics()
    histories = probe(runtime).history_statistics()
    return (
        stats["active_sessions"],
        stats["tasks"],
        stats["subscribers"],
        bus["sessions"],
        bus["queued"],
        histories["sessions"],
        histories["items"],
    )


def sample(runtime: Any) -> Sample:
    gc.collect()
    return Sample(fds(), len(all_tasks()), rss(), len(gc.get_objects()), kept(runtime))


def message(text: str) -> dict[str, Any]:
    return {"type": "message", "data": {"content": [{"type": "input_text", "text": text}]}}


@attrs.define
class Soak:
    server: Server
    sessions: dict[str, str] = attrs.Factory(dict)
    rounds: int = 0
    turns: int = 0

    async def delete_sessions(self) -> None:
        for session_id in self.sessions.values():
            answer = await self.server.client.delete(f"/v1/sessions/{session_id}")
            assert answer.status_code in (200, 204), answer.text
        self.sessions.clear()

    async def new_sessions(self) -> None:
        for name in ("chat", "slow", "tasker"):
            answer = await self.server.client.post("/v1/sessions", json={"agent_name": name})
            assert answer.status_code == 201, answer.text
            self.sessions[name] = answer.json()["id"]

    async def block(self) -> None:
        """Ten rounds on new sessions, which are then deleted; returns once quiet."""
        await self.new_sessions()
        for _ in range(10):
            await self.round()
        await self.delete_sessions()
        await wait_quiet(self.server.runtime, timeout=10)

    async def round(self) -> None:
        await self.streamed_turn()
        await self.interrupted_turn()
        await self.reconnect()
        if self.rounds % 3 == 0:
            await self.background_turn()
        self.rounds += 1

    async def streamed_turn(self) -> None:
        url = f"/v1/sessions/{self.sessions['chat']}/events?stream=true"
        async with open_stream(self.server.client, "POST", url, json=message("hi")) as reader:
            frames = await reader.read_until(lambda f: f.event == "response.completed")
        assert frames[-1].event == "response.completed", [f.event for f in frames]
        self.turns += 1

    async def last_id(self, session_id: str) -> int:
        answer = await self.server.client.get(f"/v1/sessions/{session_id}")
        last: int = answer.json()["last_event_id"]
        return last

    async def interrupted_turn(self) -> None:
        sid = self.sessions["slow"]
        after = await self.last_id(sid)
        url = f"/v1/sessions/{sid}/stream"
        async with open_stream(self.server.client, "GET", url, params={"after": after}) as reader:
            await self.post(sid, message("wait"))
            await reader.read_until(lambda f: f.event == "response.output_item.done")
            await self.post(sid, {"type": "interrupt", "data": {}})
            frames = await reader.read_until(_terminal)
        assert frames[-1].data["status"] == "cancelled", [f.event for f in frames]
        self.turns += 1

    async def background_turn(self) -> None:
        """A background shell, then the turn its result wakes (two terminal statuses)."""
        sid = self.sessions["tasker"]
        after = await self.last_id(sid)
        url = f"/v1/sessions/{sid}/stream"
        async with open_stream(self.server.client, "GET", url, params={"after": after}) as reader:
            await self.post(sid, message("go"))
            first = await reader.read_until(_terminal)
            second = await reader.read_until(_terminal)
        assert [first[-1].data["status"], second[-1].data["status"]] == ["idle", "idle"]
        self.turns += 2

    async def reconnect(self) -> None:
        """Drop a replaying stream after a few frames; resuming continues exactly there."""
        sid = self.sessions["chat"]
        last = await self.last_id(sid)
        url = f"/v1/sessions/{sid}/stream"
        cut = 1 + self.rounds % 7
        async with open_stream(self.server.client, "GET", url, params={"after": 0}) as reader:
            seen = [f.id for f in await reader.read_until(count=cut)]
        headers = {"Last-Event-ID": str(seen[-1])}
        async with open_stream(self.server.client, "GET", url, headers=headers) as reader:
            rest = await _read_to(reader, last)
        assert seen + rest == list(range(1, last + 1))

    async def post(self, session_id: str, body: dict[str, Any]) -> None:
        answer = await self.server.client.post(f"/v1/sessions/{session_id}/events", json=body)
        assert answer.status_code == 202, answer.text


def _terminal(frame: Any) -> bool:
    return frame.event == "session.status" and frame.data["status"] in TERMINAL_STATUSES


async def _read_to(reader: SSEReader, last: int) -> list[int]:
    ids: list[int] = []
    while not ids or ids[-1] < last:
        frame = await reader.next()
        assert frame is not None and frame.id is not None
        ids.append(frame.id)
    return ids


async def settle_to(warm: Sample, runtime: Any) -> Sample:
    """Sample until descriptors and tasks are back to the warm level (bounded).

    Polled: a server task may outlive its client's close by a moment, and nothing
    announces that it ended.
    """
    now = sample(runtime)
    with trio.move_on_after(10):
        while now.fds > warm.fds or now.tasks > warm.tasks:
            await trio.sleep(0.05)
            now = sample(runtime)
    return now


def median(values: list[int]) -> int:
    return sorted(values)[len(values) // 2]


async def test_a_soak_of_turns_interrupts_and_reconnects_keeps_costs_flat(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'soak.db'}"
    runtime = {"workspace": tmp_path}
    with trio.fail_after(SECONDS + 60):
        async with open_server(db, runtime_options=runtime) as server:
            for spec in agents():
                await server.runtime.create_agent(spec)
            soak = Soak(server)
            start = trio.current_time()
            while trio.current_time() - start < SECONDS / 4 or soak.rounds < 10:
                await soak.block()
            warm, samples = sample(server.runtime), []
            while trio.current_time() - start < SECONDS or len(samples) < 3:
                await soak.block()
                samples.append(sample(server.runtime))
            end = await settle_to(warm, server.runtime)
    rounds = len(samples) * 10
    report = f"{rounds} rounds ({soak.turns} turns in all): warm {warm}, end {end}"
    print(report)
    assert end.fds <= warm.fds, report
    assert end.tasks <= warm.tasks, report
    assert end.kept == warm.kept == (0, 0, 0, 0, 0, 0, 0), report
    # Memory: the garbage collector's generations make the object count a sawtooth
    # (about ±1,500 here), so medians of the first and last samples are compared; RSS
    # may still grow a little as SQLite's page caches fill.
    first, last = samples[:4], samples[-4:]
    growth = median([s.objects for s in last]) - median([s.objects for s in first])
    assert growth <= 3_000, f"{growth} more live objects; {report}"
    assert last[-1].rss <= first[0].rss + 8 * 2**20, report
