"""``kill -9`` of a real ``omnigent serve`` with everything in flight, then a restart.

One server (a subprocess, loopback, its own SQLite file and home) is brought to a
state where every kind of work is in the middle of happening:

* ``worker``: a turn blocked in a foreground shell, with a background shell
  (``sys_call_async``) running and a second message buffered;
* ``notified``: a turn blocked in a foreground shell after a background task finished
  (its result is in the inbox, unread);
* ``lead``: idle after dispatching work to a sub-agent (``sys_session_send``) whose
  turn is blocked in a shell — child work in flight, its result undelivered;
* ``ext``: an external harness (a process of its own, which started a grandchild) in
  the middle of a streamed turn;
* ``asker``: ``examples/echo_harness.py`` waiting on an elicitation;
* ``quiet``: a session whose turn finished long ago.

Clients stream every session's events over SSE throughout. The server is frozen,
its process tree snapshotted from ``/proc``, and ``SIGKILL``\\ed; every process it had
started is shown to outlive it. A second server starts on the same database and port.
Then: every session ends in a terminal status or resumes and ends; nothing stored is
lost (items, inbox entries, the sub-agent's result); event ids continue without gap or
reuse, and every client saw every event once, in order, across the kill; no process
of the dead server's tree — or in its process groups — remains; and after the second
server stops, nothing is left in flight in the database.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio

from omnigent.client import OmnigentClient
from omnigent.model import (
    ElicitationRequest,
    Event,
    InboxUpdated,
    MessageItem,
    OutputItemDone,
    OutputTextDelta,
    ResponseFailed,
    item_text,
)

from ..external_helpers import STDLIB
from .procs import Proc, stragglers, wait_no_stragglers
from .serve_rig import (
    ROOT,
    Served,
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
    check_ids,
    check_nothing_in_flight,
    check_turn_pairs,
    events_of,
    items_of,
    notices,
    read_db,
    texts_of,
)

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux /proc")

ECHO = [sys.executable, str(ROOT / "examples" / "echo_harness.py")]


def shell(marker: Path, name: str) -> dict[str, Any]:
    """A shell that writes its pid to ``marker/name.pid`` and then sleeps (as itself)."""
    return {"command": f"echo $$ > {marker / name}.pid; exec sleep 1000", "timeout": 900}


def scripted(name: str, turns: list[list[dict[str, Any]]], **extra: Any) -> dict[str, Any]:
    config = {"harness": "scripted", "turns": turns}
    return {"name": name, "executor": {"type": "omnigent", "config": config}, **extra}


def external(name: str, command: list[str]) -> dict[str, Any]:
    config = {"harness": "external", "command": command}
    return {"name": name, "executor": {"type": "omnigent", "config": config}}


def background(args: dict[str, Any]) -> dict[str, Any]:
    return {"call": "sys_call_async", "args": {"tool": "sys_os_shell", "args": args}}


def agents(marker: Path) -> list[dict[str, Any]]:
    """The six agents of the scene (see the module docstring)."""
    worker = [
        background(shell(marker, "bg")),
        {"say": "started"},
        {"call": "sys_os_shell", "args": shell(marker, "fg")},
    ]
    notified = [
        background({"command": "echo quick"}),
        {"call": "sys_os_shell", "args": shell(marker, "notified")},
    ]
    send = {"call": "sys_session_send", "args": {"agent": "w", "title": "t", "args": "go"}}
    child = scripted("w", [[{"call": "sys_os_shell", "args": shell(marker, "child")}]])
    return [
        scripted("worker", [worker, [{"say": "answered"}]], async_enabled=True),
        scripted("notified", [notified, [{"say": "noted"}]], async_enabled=True),
        scripted(
            "lead",
            [[send, {"say": "dispatched"}], [{"say": "woken"}]],
            sub_agents=[child],
            tools={"agents": ["w"]},
        ),
        external("ext", STDLIB),
        external("asker", ECHO),
        scripted("quiet", [[{"say": "hello"}]]),
    ]


# Terminal statuses each session's stream shows once everything has settled after
# the restart: the killed turn's ``failed``, then the turns that resume the work.
SETTLED = {
    "worker": 3,  # killed turn; the buffered message; the inbox (background task failed)
    "notified": 2,  # killed turn; the inbox (the result that finished before the kill)
    "lead": 2,  # the dispatching turn (before); woken by the sub-agent's result
    "w": 1,  # the sub-agent's killed turn
    "ext": 3,  # two turns before; the killed one
    "asker": 1,  # the killed turn, waiting on its elicitation
    "quiet": 1,  # its one turn, long before the kill
}
KILLED = ("worker", "notified", "w", "ext", "asker")


def said(events: list[Event]) -> str:
    """The text of the last assistant message in ``events``."""
    done = [
        e.item for e in events if isinstance(e, OutputItemDone) and isinstance(e.item, MessageItem)
    ]
    assert done, summary(events)
    return item_text(done[-1])


@attrs.define
class Scene:
    """The sessions, their watchers and what is known about them before the kill."""

    root: Path
    client: OmnigentClient
    nursery: trio.Nursery
    ids: dict[str, str] = attrs.Factory(dict)
    watches: dict[str, Watch] = attrs.Factory(dict)
    pids: dict[str, int] = attrs.Factory(dict)

    @property
    def marker(self) -> Path:
        return self.root / "marks"

    async def open(self, name: str, session_id: str | None = None) -> str:
        if session_id is None:
            session_id = (await self.client.create_session(agent_name=name)).id
        self.ids[name] = session_id
        self.watches[name] = Watch(self.client, session_id)
        await self.nursery.start(self.watches[name].run)
        return session_id

    async def turns(self, name: str, count: int) -> None:
        await self.watches[name].wait_for(
            lambda e: terminal_count(e) >= count, f"{count} terminal statuses"
        )


async def bring_everything_in_flight(scene: Scene) -> None:
    """Drive each session to the middle of its work (concurrently)."""
    async with trio.open_nursery() as nursery:
        for drive in (_quiet, _worker, _notified, _lead, _ext, _asker):
            nursery.start_soon(drive, scene)


async def _quiet(scene: Scene) -> None:
    sid = await scene.open("quiet")
    await scene.client.send_message(sid, "hi")
    await scene.turns("quiet", 1)


async def _worker(scene: Scene) -> None:
    sid = await scene.open("worker")
    await scene.client.send_message(sid, "go")
    for name in ("fg", "bg"):
        scene.pids[name] = int(await wait_for_file(scene.marker / f"{name}.pid"))
    accepted = await scene.client.send_message(sid, "and this?")
    assert accepted.status == "buffered", accepted


async def _notified(scene: Scene) -> None:
    sid = await scene.open("notified")
    await scene.client.send_message(sid, "go")
    scene.pids["notified"] = int(await wait_for_file(scene.marker / "notified.pid"))
    await scene.watches["notified"].wait_for(
        lambda events: any(isinstance(e, InboxUpdated) for e in events), "the quick task's result"
    )


async def _lead(scene: Scene) -> None:
    sid = await scene.open("lead")
    await scene.client.send_message(sid, "go")
    await scene.turns("lead", 1)
    scene.pids["child"] = int(await wait_for_file(scene.marker / "child.pid"))
    children, _ = await scene.client.list_sessions(parent_session_id=sid)
    (child,) = children
    await scene.open("w", child.id)


async def _ext(scene: Scene) -> None:
    sid = await scene.open("ext")
    watch = scene.watches["ext"]
    for turn, word in enumerate(("pid", "child"), start=1):
        await scene.client.send_message(sid, word)
        await scene.turns("ext", turn)
        scene.pids[f"ext_{word}"] = int(said(watch.events))
    await scene.client.send_message(sid, "wait")
    await watch.wait_for(
        lambda events: isinstance(events[-1], OutputTextDelta) and events[-1].delta == "waiting",
        "the harness to stream",
    )


async def _asker(scene: Scene) -> None:
    sid = await scene.open("asker")
    await scene.client.send_message(sid, "ask")
    await scene.watches["asker"].wait_for(
        lambda events: any(isinstance(e, ElicitationRequest) for e in events), "the elicitation"
    )


@attrs.frozen
class AtKill:
    """What the database held when the server died."""

    events: dict[str, list[dict[str, Any]]]
    items: dict[str, list[str]]
    undelivered: list[tuple[str, str, str]]  # inbox (id, session, data)
    open_work: list[tuple[str, str, str]]  # (work id, parent, child)


def read_at_kill(db: Path, scene: Scene) -> AtKill:
    events = {name: events_of(db, sid) for name, sid in scene.ids.items()}
    items = {name: [i for i, _ in items_of(db, sid)] for name, sid in scene.ids.items()}
    undelivered = read_db(db, "SELECT id, session_id, data FROM inbox WHERE delivered = 0")
    work = read_db(
        db,
        "SELECT work_id, parent_session_id, child_session_id FROM subagent_work "
        "WHERE status IN ('launching', 'running')",
    )
    return AtKill(events, items, undelivered, work)


def assert_orphans_outlive_the_server(scene: Scene, tree: list[Proc]) -> None:
    """Before the restart the dead server's processes still run: the test can fail."""
    live = {p.pid for p in stragglers(tree)}
    assert set(scene.pids.values()) <= live, (scene.pids, live)
    records = list((scene.root / "home" / "run" / "processes").glob("*.json"))
    harnesses = {json.loads(r.read_text())["pid"] for r in records}
    assert len(harnesses) == 2 and harnesses <= live  # ext's and asker's


def left_socket_dirs(root: Path) -> list[Path]:
    """The harness socket directories the dead server left in the temp dir."""
    records = (root / "home" / "run" / "sockets").glob("*.json")
    dirs = [Path(json.loads(r.read_text())["socket_dir"]) for r in records]
    assert dirs and all(d.is_dir() for d in dirs)
    return dirs


async def settle(scene: Scene) -> None:
    """Wait until every session has reached its settled state after the restart."""
    for name, count in SETTLED.items():
        await scene.turns(name, count)


async def check_snapshots(scene: Scene) -> None:
    for name, sid in scene.ids.items():
        snapshot = await scene.client.get_session(sid)
        assert snapshot.status in ("idle", "failed", "cancelled"), (name, snapshot)
        assert not snapshot.busy and not snapshot.pending_elicitations, (name, snapshot)


def check_event_logs(db: Path, scene: Scene, at_kill: AtKill) -> None:
    """Ids continue without gap or reuse, and every client saw every event once, in order."""
    for name, sid in scene.ids.items():
        log = events_of(db, sid)
        check_ids(name, log)
        before = at_kill.events[name]
        assert log[: len(before)] == before, f"{name}: the log before the kill changed"
        seen = [e.to_dict() for e in scene.watches[name].events]
        assert seen == log, f"{name}: {summary(scene.watches[name].events)}"
        check_turn_pairs(name, log)


def check_nothing_lost(db: Path, scene: Scene, at_kill: AtKill) -> None:
    """Items, inbox entries and the sub-agent's result all survived and were delivered."""
    for name, sid in scene.ids.items():
        now = {item_id for item_id, _ in items_of(db, sid)}
        assert set(at_kill.items[name]) <= now, f"{name}: items were lost"
    assert at_kill.undelivered, "the scene has inbox entries in flight"
    for inbox_id, sid, data in at_kill.undelivered:
        ((delivered,),) = read_db(db, "SELECT delivered FROM inbox WHERE id = ?", inbox_id)
        handle = json.loads(data)["handle_id"]
        assert delivered == 1 and handle in notices(db, sid), (inbox_id, data)
    assert len(at_kill.open_work) == 1
    ((work_id, parent, child),) = at_kill.open_work
    ((status,),) = read_db(db, "SELECT status FROM subagent_work WHERE work_id = ?", work_id)
    assert status == "failed"
    assert f"sub-agent task {child} failed" in notices(db, parent)


def check_outcomes(db: Path, scene: Scene) -> None:
    """The killed turns say why they ended, and the resumed work is what was asked."""
    for name in KILLED:
        failed = [e for e in scene.watches[name].events if isinstance(e, ResponseFailed)]
        assert [f.error.code for f in failed] == ["runtime_restarted"], name
    worker = texts_of(db, scene.ids["worker"])
    assert worker.count("and this?") == 1 and worker.count("answered") == 2, worker
    assert "interrupted by a restart" in notices(db, scene.ids["worker"])
    assert 'completed — sys_os_shell returned: {"stdout": "quick' in notices(
        db, scene.ids["notified"]
    )


async def test_kill_9_mid_everything_then_restart_loses_nothing(tmp_path: Path) -> None:
    root = tmp_path
    (root / "marks").mkdir()
    write_agents(root, agents(root / "marks"))
    first = await start(root)
    second: Served | None = None
    try:
        with trio.fail_after(90):
            async with (
                OmnigentClient(first.url, timeout=10) as client,
                trio.open_nursery() as watchers,
            ):
                scene = Scene(root, client, watchers)
                await bring_everything_in_flight(scene)
                tree = await kill_9(first)
                assert_orphans_outlive_the_server(scene, tree)
                at_kill = read_at_kill(first.db_path, scene)
                sockets = left_socket_dirs(root)
                second = await start(root, port=first.port, log_name="restart.log")
                with trio.fail_after(30):
                    await settle(scene)
                await wait_no_stragglers(tree, timeout=20)
                assert not any(d.exists() for d in sockets), "the dead server's sockets stayed"
                await check_snapshots(scene)
                watchers.cancel_scope.cancel()
            await wait_no_stragglers(await stop(second), timeout=20)
    finally:
        with trio.CancelScope(shield=True):
            for served in (first, second):
                if served is not None and served.process.returncode is None:
                    served.process.kill()
                    await served.process.wait()
    db = first.db_path
    check_event_logs(db, scene, at_kill)
    check_nothing_lost(db, scene, at_kill)
    check_outcomes(db, scene)
    check_nothing_in_flight(db)
