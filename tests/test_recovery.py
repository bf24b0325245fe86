"""After ``kill -9``: a real runtime process killed mid-turn, then a restart.

Regression test for issue 8 (measured before the fix: the killed turn had
``response.created`` and no terminal event, the buffered message was never answered,
the background shell's result never reached the inbox, and every shell the tools had
started survived the crash and the restart).
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import trio

import omnigent
from omnigent.model import (
    FunctionCallOutputItem,
    InboxUpdated,
    MessageItem,
    ResponseCreated,
    ResponseFailed,
    SessionStatusChanged,
    item_text,
)

SCRIPT = Path(__file__).with_name("crash_script.py")
ROOT = str(Path(__file__).resolve().parent.parent)
BOOT_ID = Path("/proc/sys/kernel/random/boot_id").read_text().strip()


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie does not: it is dead, waiting to be reaped)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2 :].split()[0] != "Z"


async def kill_when_ready(script: Path, *args: str, home: Path) -> list[str]:
    """Run ``script`` until it prints ``READY …``, then ``kill -9`` it; the words after."""
    env = {**os.environ, "OMNIGENT_HOME": str(home)}
    env["PYTHONPATH"] = os.pathsep.join([ROOT, env.get("PYTHONPATH", "")])
    process = await trio.lowlevel.open_process(
        [sys.executable, str(script), *args], stdout=subprocess.PIPE, env=env
    )
    try:
        assert process.stdout is not None
        line = b""
        while not line.endswith(b"\n"):
            chunk = await process.stdout.receive_some(1)
            assert chunk, f"the script exited early: {line!r}"
            line += chunk
        word, *rest = line.decode().split()
        assert word == "READY"
        process.send_signal(signal.SIGKILL)
        assert await process.wait() == -signal.SIGKILL
        return rest
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
        if process.stdout is not None:
            await process.stdout.aclose()


async def crash_mid_turn(db: str, workdir: Path) -> str:
    """Run the crash script until it is mid-turn, then ``kill -9`` it; its session id."""
    (session,) = await kill_when_ready(SCRIPT, db, str(workdir), home=workdir / "home")
    return session


async def restart(
    db: str, workdir: Path, session: str, pids: list[int]
) -> tuple[list[Any], tuple[Any, ...]]:
    """Open the database again; the killed session's log (up to two answered turns)
    and its items."""
    async with omnigent.open_runtime(db=db, workspace=workdir) as rt:
        # The shells the dead runtime's tools started are gone.
        for pid in pids:
            await wait_dead(pid)
        async with rt.subscribe(session, after=0) as events:
            log: list[Any] = []
            answered = 0
            async for event in events:
                log.append(event)
                if isinstance(event, SessionStatusChanged) and event.status == "idle":
                    answered += 1
                    if answered == 2:  # the buffered message, then the inbox
                        break
        return log, (await rt.list_items(session)).data


async def wait_dead(pid: int) -> None:
    while alive(pid):
        await trio.sleep(0.01)


async def test_a_restart_after_kill_9_finishes_what_was_in_flight(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'crash.db'}"
    with trio.fail_after(60):
        session = await crash_mid_turn(db, tmp_path)
        pids = [int((tmp_path / f"{name}.pid").read_text()) for name in ("fg", "bg")]
        try:
            assert all(alive(pid) for pid in pids), "the tools' shells outlive the crash"
            log, items = await restart(db, tmp_path, session, pids)
        finally:
            for pid in pids:  # should the test fail: leave nothing of ours running
                if alive(pid):
                    os.kill(pid, signal.SIGKILL)

    # The killed turn ended with its terminal pair, saying why.
    created = [i for i, e in enumerate(log) if isinstance(e, ResponseCreated)]
    killed = log[created[0] :]
    failed = next(e for e in killed if isinstance(e, ResponseFailed))
    assert failed.response.id == log[created[0]].response.id
    assert failed.error.code == "runtime_restarted"
    status = log[log.index(failed) + 1]
    assert isinstance(status, SessionStatusChanged) and status.status == "failed"
    assert status.error is not None and status.error.code == "runtime_restarted"
    assert [e.type for e in log].count("response.failed") == 1
    # Its shell call, which never returned, has an output saying it was interrupted.
    outputs = [i for i in items if isinstance(i, FunctionCallOutputItem)]
    shell_output = [o for o in outputs if "interrupted" in o.output]
    assert len(shell_output) == 1 and shell_output[0].output.startswith("Error:")
    # The buffered message got a continuation turn, and the background task a
    # ``failed`` inbox item that woke the session.
    texts = [item_text(i) for i in items if isinstance(i, MessageItem)]
    assert "and this?" in texts
    assert texts.index("and this?") < texts.index("answered")
    notice = next(t for t in texts if t.startswith("[System: task"))
    assert "failed" in notice and "interrupted by a restart" in notice
    assert texts.count("answered") == 2
    # Nothing is left recorded as running.
    raw = sqlite3.connect(tmp_path / "crash.db")
    try:
        assert raw.execute("SELECT COUNT(*) FROM process_groups").fetchone()[0] == 0
        assert raw.execute("SELECT COUNT(*) FROM running_tasks").fetchone()[0] == 0
        assert raw.execute("SELECT COUNT(*) FROM items WHERE pending = 1").fetchone()[0] == 0
    finally:
        raw.close()


async def test_a_recorded_group_whose_pid_was_recycled_is_left_alone(tmp_path: Path) -> None:
    """The start time is checked: a live process that reuses a recorded pid is not ours."""
    db = f"sqlite:///{tmp_path / 'r.db'}"
    async with omnigent.open_runtime(db=db) as rt:
        session = (await rt.create_session((await rt.create_agent(_agent())).id)).id
    bystander = await trio.lowlevel.open_process(["sleep", "30"], start_new_session=True)
    try:
        raw = sqlite3.connect(tmp_path / "r.db", isolation_level=None)
        # Recorded with another start time: a group that died, whose pid was reused.
        raw.execute(
            "INSERT INTO process_groups VALUES (?, ?, ?, ?, 0)",
            (bystander.pid, 1, BOOT_ID, session),
        )
        raw.close()
        async with omnigent.open_runtime(db=db):
            pass
        assert alive(bystander.pid)
        raw = sqlite3.connect(tmp_path / "r.db")
        assert raw.execute("SELECT COUNT(*) FROM process_groups").fetchone()[0] == 0
        raw.close()
    finally:
        bystander.kill()
        await bystander.wait()


def _agent() -> dict[str, Any]:
    return json.loads(
        '{"name": "a", "executor": {"type": "omnigent", "config": {"harness": "scripted"}}}'
    )


async def test_a_result_that_arrived_during_a_cut_short_turn_wakes_its_session(
    tmp_path: Path,
) -> None:
    """Regression (issue 17, found by the kill -9 suite): a background task finished
    while its session's turn ran; the process died before the turn ended, so nobody
    read the result — and the next start woke only sessions with a task *running*, so
    the result sat unread in the inbox forever."""
    db = f"sqlite:///{tmp_path / 'inbox.db'}"
    spec = {
        "name": "notified",
        "async_enabled": True,
        "executor": {
            "type": "omnigent",
            "config": {
                "harness": "scripted",
                "turns": [
                    [
                        {
                            "call": "sys_call_async",
                            "args": {"tool": "sys_os_shell", "args": {"command": "echo quick"}},
                        },
                        {"sleep": 600},
                    ],
                    [{"say": "noted"}],
                ],
            },
        },
    }
    with trio.fail_after(30):
        async with omnigent.open_runtime(db=db, workspace=tmp_path) as rt:
            session = (await rt.create_session((await rt.create_agent(spec)).id)).id
            async with rt.subscribe(session) as events:
                await rt.send_message(session, "go")
                async for event in events:
                    if isinstance(event, InboxUpdated):
                        break
        # The turn was cut short (here by a shutdown; a kill -9 leaves the same).
        async with omnigent.open_runtime(db=db, workspace=tmp_path) as rt:
            async with rt.subscribe(session, after=0) as events:
                async for event in events:
                    if isinstance(event, SessionStatusChanged) and event.status == "idle":
                        break
            items = (await rt.list_items(session)).data
    texts = [item_text(i) for i in items if isinstance(i, MessageItem)]
    notice = next(t for t in texts if t.startswith("[System: task"))
    assert "completed" in notice and "quick" in notice
    assert texts[-1] == "noted"


TAKE_SCRIPT = Path(__file__).with_name("crash_take_script.py")
NOTICE_SCRIPT = Path(__file__).with_name("crash_notice_script.py")


async def idle_twice(rt: omnigent.Runtime, session: str) -> None:
    """Wait until the session's log shows its second ``idle``."""
    async with rt.subscribe(session, after=0) as events:
        answered = 0
        async for event in events:
            if isinstance(event, SessionStatusChanged) and event.status == "idle":
                answered += 1
                if answered == 2:
                    return


async def test_a_message_taken_by_a_turn_whose_start_was_not_yet_durable_is_answered(
    tmp_path: Path,
) -> None:
    """Regression (issue 17): a turn took its message (``pending`` cleared) while its
    ``session.status running`` still waited in the event writer's queue; a kill then
    left a session stored ``idle`` with its message taken and none of that turn's
    events — never answered as far as its log showed, and no recovery found it. Now
    a turn's start is durable before it takes its messages."""
    db = f"sqlite:///{tmp_path / 'take.db'}"
    with trio.fail_after(60):
        session, message = await kill_when_ready(TAKE_SCRIPT, db, home=tmp_path / "home")
        async with omnigent.open_runtime(db=db, workspace=tmp_path) as rt:
            await idle_twice(rt, session)
            items = (await rt.list_items(session)).data
    ids = [i.id for i in items]
    texts = [item_text(i) for i in items if isinstance(i, MessageItem)]
    assert texts == ["first", "ok", "second", "ok"] and ids.count(message) == 1


async def test_a_kill_while_the_wake_up_message_is_stored_loses_no_result(
    tmp_path: Path,
) -> None:
    """Regression (issue 17): the inbox was marked read first and the wake-up message
    that carries it stored after; a kill in between lost the result (read, and in no
    message). Now the message is stored first: a kill in between leaves the result
    unread, and the next start delivers it."""
    db = f"sqlite:///{tmp_path / 'notice.db'}"
    with trio.fail_after(60):
        (session,) = await kill_when_ready(NOTICE_SCRIPT, db, str(tmp_path), home=tmp_path / "home")
        async with omnigent.open_runtime(db=db, workspace=tmp_path) as rt:
            await idle_twice(rt, session)
            items = (await rt.list_items(session)).data
    texts = [item_text(i) for i in items if isinstance(i, MessageItem)]
    notices = [t for t in texts if t.startswith("[System: task")]
    assert len(notices) == 1 and "quick" in notices[0], texts
    assert texts[-1] == "noted"
