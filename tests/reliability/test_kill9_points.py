"""``kill -9`` at many points of a busy turn, and a second kill during the recovery.

A real ``omnigent serve`` runs a turn that streams, calls a tool, starts a background
task and has a second message buffered; the server is killed once a client has seen
the N-th event of the session, for N spread over the whole turn (so each round dies
somewhere else: before the tool call, during it, while the background task runs,
after its result arrived, during the continuation turn…). Whatever the point, after a
restart on the same database the same invariants hold.

The second test kills the server again while the restart's continuation turn runs: a
message is answered by at most one turn, so the third start does not run it again.

Rounds: ``OMNIGENT_CRASH_POINTS`` (comma-separated event counts) replaces the default
points, for a longer run.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest
import trio

from omnigent.client import OmnigentClient
from omnigent.model import TERMINAL_STATUSES, SessionStatusChanged

from .procs import wait_no_stragglers
from .serve_rig import (
    Watch,
    kill_9,
    start,
    stop,
    summary,
    terminal_count,
    wait_for_file,
    write_agents,
)
from .store_checks import (
    check_answers,
    check_ids,
    check_nothing_in_flight,
    check_turn_pairs,
    events_of,
    read_db,
    texts_of,
)

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux /proc")

DEFAULT_POINTS = (2, 5, 9, 13, 17, 22)


def points() -> list[int]:
    raw = os.environ.get("OMNIGENT_CRASH_POINTS")
    return [int(p) for p in raw.split(",")] if raw else list(DEFAULT_POINTS)


def busy_agent() -> dict[str, Any]:
    """A turn with something in flight at every moment (paced by short sleeps)."""
    shell = {"command": "sleep 0.05; echo fg"}
    background = {"tool": "sys_os_shell", "args": {"command": "sleep 0.1; echo bg"}}
    first = [
        {"say": "one two three"},
        {"sleep": 0.02},
        {"call": "sys_call_async", "args": background},
        {"call": "sys_os_shell", "args": shell},
        {"say": "four five"},
        {"sleep": 0.15},
        {"say": "six seven"},
    ]
    config = {"harness": "scripted", "turns": [first, [{"sleep": 0.05}, {"say": "after"}]]}
    return {
        "name": "busy",
        "async_enabled": True,
        "executor": {"type": "omnigent", "config": config},
    }


async def quiet(watch: Watch, db: Path) -> None:
    """Wait until the session has nothing left to do: its stream has caught up with the
    store, shows a terminal status last, and the store holds no message, task or result
    waiting for a turn.

    The store is polled (it has no events of its own), between events of the stream.
    Caught up matters: a kill just after a turn's terminal status leaves the watcher on
    a terminal event while the restart's recovery and continuation turn are already in
    the store, not yet in the stream it reconnected.
    """
    sid = watch.session_id
    while True:
        last = watch.events[-1] if watch.events else None
        if isinstance(last, SessionStatusChanged) and last.status in TERMINAL_STATUSES:
            waiting = read_db(
                db,
                "SELECT (SELECT COUNT(*) FROM items WHERE session_id = ?1 AND pending = 1)"
                " + (SELECT COUNT(*) FROM running_tasks WHERE session_id = ?1)"
                " + (SELECT COUNT(*) FROM inbox WHERE session_id = ?1 AND delivered = 0),"
                " (SELECT MAX(event_id) FROM events WHERE session_id = ?1)",
                sid,
            )
            if waiting == [(0, last.event_id)]:
                return
        with trio.move_on_after(0.05):
            await watch.changed()


def background_in_flight(db: Path, session_id: str) -> bool:
    """Whether the background task had started (running, or its result unread)."""
    rows = read_db(
        db,
        "SELECT (SELECT COUNT(*) FROM running_tasks WHERE session_id = ?1)"
        " + (SELECT COUNT(*) FROM inbox WHERE session_id = ?1)",
        session_id,
    )
    return rows != [(0,)]


def check_round(db: Path, watch: Watch, point: int, background: bool) -> None:
    """The invariants that hold wherever the kill landed.

    ``background``: the task had started when the server died, so its result (or its
    interruption) must have reached the session.
    """
    sid = watch.session_id
    log = events_of(db, sid)
    where = f"killed after event {point}: {summary(watch.events)}"
    check_ids(where, log)
    check_turn_pairs(where, log)
    assert [e.to_dict() for e in watch.events] == log, where
    user = texts_of(db, sid, "user")
    # Each message is in the history once, and each got exactly one turn (a turn the
    # kill cut short before it took its messages took none: check_answers).
    assert user.count("go") == 1 and user.count("more") == 1, (where, user)
    answering = check_answers(where, db, sid, log)
    notices = [t for t in user if t.startswith("[System:")]
    assert answering == 2 + len(notices), (where, user)
    assert len(notices) == (1 if background or answering > 2 else 0), (where, user)
    check_nothing_in_flight(db)


@pytest.mark.parametrize("point", points())
async def test_kill_9_at_any_point_of_a_busy_turn(tmp_path: Path, point: int) -> None:
    write_agents(tmp_path, [busy_agent()])
    first = await start(tmp_path)
    second = None
    try:
        with trio.fail_after(60):
            async with (
                OmnigentClient(first.url, timeout=10) as client,
                trio.open_nursery() as watchers,
            ):
                sid = (await client.create_session(agent_name="busy")).id
                watch = Watch(client, sid)
                await watchers.start(watch.run)
                await client.send_message(sid, "go")
                await watch.wait_for(lambda events: len(events) >= 2, "the turn")
                await client.send_message(sid, "more")
                await watch.wait_for(lambda events: len(events) >= point, f"event {point}")
                tree = await kill_9(first)
                background = background_in_flight(first.db_path, sid)
                second = await start(tmp_path, port=first.port, log_name="restart.log")
                await quiet(watch, first.db_path)
                await wait_no_stragglers(tree, timeout=20)
                watchers.cancel_scope.cancel()
            await wait_no_stragglers(await stop(second), timeout=20)
    finally:
        with trio.CancelScope(shield=True):
            for served in (first, second):
                if served is not None and served.process.returncode is None:
                    served.process.kill()
                    await served.process.wait()
    check_round(first.db_path, watch, point, background)


def twice_agent(marker: Path) -> dict[str, Any]:
    def shell(name: str) -> dict[str, Any]:
        command = f"echo $$ > {marker / name}.pid; exec sleep 1000"
        return {"call": "sys_os_shell", "args": {"command": command, "timeout": 900}}

    config = {"harness": "scripted", "turns": [[shell("one")], [shell("two")], [{"say": "done"}]]}
    return {"name": "twice", "executor": {"type": "omnigent", "config": config}}


async def test_a_second_kill_during_the_recovery_turn_runs_nothing_a_third_time(
    tmp_path: Path,
) -> None:
    marker = tmp_path / "marks"
    marker.mkdir()
    write_agents(tmp_path, [twice_agent(marker)])
    servers = [await start(tmp_path)]
    trees = []
    try:
        with trio.fail_after(60):
            async with (
                OmnigentClient(servers[0].url, timeout=10) as client,
                trio.open_nursery() as watchers,
            ):
                sid = (await client.create_session(agent_name="twice")).id
                watch = Watch(client, sid)
                await watchers.start(watch.run)
                await client.send_message(sid, "one")
                await wait_for_file(marker / "one.pid")
                assert (await client.send_message(sid, "two")).status == "buffered"
                trees.append(await kill_9(servers[0]))
                # The restart fails the killed turn and answers "two": kill it there.
                servers.append(await start(tmp_path, port=servers[0].port, log_name="2.log"))
                await wait_for_file(marker / "two.pid")
                trees.append(await kill_9(servers[1]))
                servers.append(await start(tmp_path, port=servers[0].port, log_name="3.log"))
                await watch.wait_for(lambda events: terminal_count(events) == 2, "two failures")
                for tree in trees:
                    await wait_no_stragglers(tree, timeout=20)
                watchers.cancel_scope.cancel()
            await wait_no_stragglers(await stop(servers[2]), timeout=20)
    finally:
        with trio.CancelScope(shield=True):
            for served in servers:
                if served.process.returncode is None:
                    served.process.kill()
                    await served.process.wait()
    db = servers[0].db_path
    log = events_of(db, sid)
    check_ids("twice", log)
    check_turn_pairs("twice", log)
    failures = [e for e in log if e["type"] == "response.failed"]
    assert [f["error"]["code"] for f in failures] == ["runtime_restarted"] * 2
    assert [e["status"] for e in log if e["type"] == "session.status"][-1] == "failed"
    assert texts_of(db, sid) == ["one", "two"]  # "two" once, and no third turn ("done")
    check_nothing_in_flight(db)
