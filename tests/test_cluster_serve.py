"""Two real ``omnigent serve`` processes on one PostgreSQL database.

The end-to-end guarantees of a cluster, over HTTP and SSE against real processes:
a session created on one server is streamed from the other and posted to through it,
its turn runs once and both streams carry the same events with the same ids; a server
killed with ``kill -9`` mid-turn is taken over within the lease time, the turn ends
``failed`` (``runtime_restarted``), the next turn runs, and no event id is missing or
repeated on any stream; a restart of PostgreSQL itself mid-stream loses nothing.

Leases are short here (``--lease-ttl``), and every wait is bounded.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import trio

from .cluster_helpers import ServeProcess, message_body, open_serve_process
from .http_helpers import HTTPX_GENERATORS, Frame, SSEReader, is_terminal_status, open_stream
from .pg_cluster import PgCluster

pytestmark = HTTPX_GENERATORS

LEASE = 2.0

SLOW_AGENT = """
name: slow
executor:
  type: omnigent
  config:
    harness: scripted
    turns:
      - [{say: "first turn starts"}, {sleep: 30}, {say: "never said"}]
      - [{say: "second turn runs"}]
"""

CHATTY_AGENT = """
name: chatty
executor:
  type: omnigent
  config:
    harness: scripted
    script:
      - {say: "one two three four five six seven eight nine ten"}
      - {sleep: 0.3}
      - {say: "eleven twelve thirteen fourteen fifteen"}
      - {sleep: 0.3}
      - {say: "sixteen seventeen eighteen nineteen twenty"}
"""


WORDS = [
    *["one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten"],
    *["eleven", "twelve", "thirteen", "fourteen", "fifteen"],
    *["sixteen", "seventeen", "eighteen", "nineteen", "twenty"],
]


def agents_dir(tmp: Path) -> Path:
    folder = tmp / "agents"
    folder.mkdir(exist_ok=True)
    (folder / "slow.yaml").write_text(SLOW_AGENT)
    (folder / "chatty.yaml").write_text(CHATTY_AGENT)
    return folder


async def new_session(server: ServeProcess, agent: str) -> str:
    answer = await server.client.post("/v1/sessions", json={"agent_name": agent})
    assert answer.status_code == 201, answer.text
    session_id: str = answer.json()["id"]
    return session_id


def ids(frames: list[Frame]) -> list[int]:
    return [f.id for f in frames if f.id is not None]


def described(frames: list[Frame]) -> list[tuple[int | None, str | None]]:
    return [(f.id, f.event) for f in frames]


def contiguous(frames: list[Frame]) -> bool:
    got = ids(frames)
    return got == list(range(got[0], got[0] + len(got))) if got else True


def after_status(status: str) -> Callable[[Frame], bool]:
    return lambda f: f.event == "session.status" and f.data["status"] == status


async def read_until(reader: SSEReader, stop: Callable[[Frame], bool]) -> list[Frame]:
    frames = await reader.read_until(stop)
    assert frames and stop(frames[-1]), f"the stream ended early: {described(frames)}"
    return frames


async def test_create_on_a_stream_from_b_post_on_b(pg_url: str, tmp_path: Path) -> None:
    folder = agents_dir(tmp_path)
    extra = ["--lease-ttl", str(LEASE)]
    with trio.fail_after(90):
        async with (
            open_serve_process(pg_url, "a", tmp_path, agents=folder, extra=extra) as a,
            open_serve_process(pg_url, "b", tmp_path, agents=folder, extra=extra) as b,
        ):
            session = await new_session(a, "chatty")
            path = f"/v1/sessions/{session}/stream?after=0"
            async with (
                open_stream(a.client, "GET", path) as on_a,
                open_stream(b.client, "GET", path) as on_b,
            ):
                posted = await b.post(f"/v1/sessions/{session}/events", message_body("hi"))
                assert posted.status_code == 202, posted.text
                assert posted.json()["status"] == "accepted"
                seen_b = await read_until(on_b, is_terminal_status)
                seen_a = await read_until(on_a, is_terminal_status)
            assert described(seen_a) == described(seen_b)
            assert [f.data for f in seen_a] == [f.data for f in seen_b]
            assert ids(seen_b) == list(range(1, len(seen_b) + 1))
            assert [f.event for f in seen_b].count("response.created") == 1  # ran once
            assert seen_b[-1].data["status"] == "idle"
            text = "".join(f.data["delta"] for f in seen_b if f.event.endswith(".delta"))
            assert "twenty" in text
            # The servers list each other; the tree is released once idle.
            servers = (await a.client.get("/v1/servers")).json()["data"]
            assert sorted(s["id"] for s in servers) == ["a", "b"]
            health = (await b.client.get("/health")).json()
            assert health == {"status": "ok", "server_id": "b", "store": "postgresql"}
            # A reconnecting client gets the same log from either server.
            for server in (a, b):
                async with open_stream(server.client, "GET", path) as replay:
                    again = await replay.read_until(count=len(seen_b))
                assert described(again) == described(seen_b)


async def test_kill_the_owner_mid_turn(pg_url: str, tmp_path: Path) -> None:
    folder = agents_dir(tmp_path)
    extra = ["--lease-ttl", str(LEASE)]
    with trio.fail_after(120):
        async with (
            open_serve_process(pg_url, "a", tmp_path, agents=folder, extra=extra) as a,
            open_serve_process(pg_url, "b", tmp_path, agents=folder, extra=extra) as b,
        ):
            session = await new_session(b, "slow")
            path = f"/v1/sessions/{session}/stream?after=0"
            async with (
                open_stream(b.client, "GET", path) as on_b,
                open_stream(a.client, "GET", path) as on_a,
            ):
                # Posted on a, nobody owns the tree: a takes it and runs the turn.
                posted = await a.post(f"/v1/sessions/{session}/events", message_body("go"))
                assert posted.status_code == 202, posted.text
                started = await read_until(on_b, lambda f: f.event.endswith(".delta"))
                owners = {s["id"]: s["sessions"] for s in await servers(b.client)}
                assert owners == {"a": 1, "b": 0}
                seen_a = await read_until(on_a, lambda f: f.event.endswith(".delta"))
                # Posted on b while a runs the turn: handed to a, buffered there (and
                # stored pending, so a's death does not lose it).
                buffered = await b.post(f"/v1/sessions/{session}/events", message_body("more"))
                assert buffered.status_code == 202, buffered.text
                assert buffered.json()["status"] == "buffered"
                a.kill()
                killed_at = trio.current_time()
                ended = await read_until(on_b, is_terminal_status)
                took = trio.current_time() - killed_at
            first_turn = started + ended
            assert ended[-1].data["status"] == "failed"
            assert ended[-1].data["error"]["code"] == "runtime_restarted"
            assert [f.event for f in ended][-2:] == ["response.failed", "session.status"]
            assert took < LEASE + 3.0, f"takeover took {took:.1f} s (lease {LEASE} s)"
            # What a saw before it died is exactly the start of b's stream.
            assert described(seen_a) == described(first_turn[: len(seen_a)])
            async with open_stream(b.client, "GET", path) as replay:
                # The survivor answers the buffered message on its own (it was pending)…
                answered = await read_until(
                    replay, lambda f: is_terminal_status(f) and f.id > ended[-1].id
                )
                assert answered[-1].data["status"] == "idle"
                # … and the next message runs normally, on the survivor.
                posted = await b.post(f"/v1/sessions/{session}/events", message_body("again"))
                assert posted.status_code == 202, posted.text
                everything = answered + await read_until(replay, is_terminal_status)
            assert everything[-1].data["status"] == "idle"
            said = "".join(f.data["delta"] for f in everything if f.event.endswith(".delta"))
            assert said.count("second turn runs") == 2  # the pending message, then "again"
            assert [f.event for f in everything].count("response.created") == 3
            assert ids(everything) == list(range(1, len(everything) + 1))  # no gap, no repeat
            assert described(everything[: len(first_turn)]) == described(first_turn)
            assert [s["id"] for s in await servers(b.client)] == ["b"]


async def test_a_postgres_restart_mid_stream_loses_nothing(
    pg_cluster: PgCluster, pg_url: str, tmp_path: Path
) -> None:
    folder = agents_dir(tmp_path)
    with trio.fail_after(120):
        async with (
            open_serve_process(pg_url, "a", tmp_path, agents=folder) as a,
            open_serve_process(pg_url, "b", tmp_path, agents=folder) as b,
        ):
            session = await new_session(a, "chatty")
            path = f"/v1/sessions/{session}/stream?after=0"
            async with open_stream(b.client, "GET", path) as on_b:
                posted = await a.post(f"/v1/sessions/{session}/events", message_body("go"))
                assert posted.status_code == 202, posted.text
                first = await read_until(on_b, lambda f: f.event.endswith(".delta"))
                await trio.to_thread.run_sync(pg_cluster.restart)
                rest = await read_until(on_b, is_terminal_status)
            live = first + rest
            assert live[-1].data["status"] == "idle"
            assert ids(live) == list(range(1, len(live) + 1))
            said: dict[str, str] = {}  # each say is its own message item
            for f in live:
                if f.event.endswith(".delta"):
                    said[f.data["item_id"]] = said.get(f.data["item_id"], "") + f.data["delta"]
            assert " ".join(said.values()).split() == WORDS
            async with open_stream(a.client, "GET", path) as replay:
                again = await replay.read_until(count=len(live))
            assert described(again) == described(live)


async def servers(client: httpx.AsyncClient) -> list[dict[str, Any]]:
    answer = await client.get("/v1/servers")
    assert answer.status_code == 200, answer.text
    data: list[dict[str, Any]] = answer.json()["data"]
    return data
