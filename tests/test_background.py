"""Session tools end to end: OS tools in a session, background tasks, the inbox."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
import trio

import omnigent
from omnigent.harnesses.base import TurnContext, TurnRequest
from omnigent.model import ChangedFilesInvalidated, InboxUpdated, item_text
from omnigent.testing import RecordingHarness, collect_turn, probe, run_turn, scripted_agent

from .conftest import all_tasks, statuses, wait_quiet


def pid_gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:
        with open(f"/proc/{pid}/status") as status:
            return any(line.startswith("State:\tZ") for line in status)
    except FileNotFoundError:
        return True


async def wait_gone(*pids: int) -> None:
    with trio.fail_after(10):
        while not all(pid_gone(p) for p in pids):
            await trio.sleep(0.05)


async def tool_session(rt: omnigent.Runtime, recorder: RecordingHarness, **spec: Any) -> str:
    rt.register_harness("recorder", recorder.factory)
    agent = await rt.create_agent({**scripted_agent("tooler", harness="recorder"), **spec})
    return (await rt.create_session(agent.id)).id


def calls(*steps: tuple[str, dict[str, Any]]) -> Any:
    """A recorder body that makes the given tool calls and keeps their outputs."""
    outputs: list[str] = []

    async def body(request: TurnRequest, ctx: TurnContext) -> None:
        for name, args in steps:
            outputs.append(await ctx.call_tool(name, args))

    body.outputs = outputs  # type: ignore[attr-defined]
    return body


async def test_os_tools_use_the_per_session_workspace(
    rt: omnigent.Runtime, recorder: RecordingHarness, omnigent_home: Path
) -> None:
    session = await tool_session(rt, recorder)
    recorder.body = calls(
        ("sys_os_write", {"path": "notes/a.txt", "content": "hello"}),
        ("sys_os_read", {"path": "notes/a.txt"}),
        ("sys_os_shell", {"command": "pwd"}),
        ("sys_os_write", {"path": "../escape.txt", "content": "x"}),
    )
    events = await run_turn(rt, session)
    outputs = recorder.body.outputs
    assert json.loads(outputs[0])["created"] is True
    assert json.loads(outputs[1])["content"] == "hello"
    workspace = omnigent_home / "workspaces" / session / "workspace"
    assert json.loads(outputs[2])["stdout"].strip() == str(workspace.resolve())
    assert outputs[3].startswith("Error: ")
    assert not (workspace.parent / "escape.txt").exists()
    # Two writes and a shell command in one turn: one refetch signal (leading edge).
    assert sum(isinstance(e, ChangedFilesInvalidated) for e in events) == 1
    changed = next(e for e in events if isinstance(e, ChangedFilesInvalidated))
    assert changed.to_dict()["environment_id"] == "default"


async def test_os_env_cwd_absolute_and_dot(tmp_path: Path, recorder: RecordingHarness) -> None:
    start = tmp_path / "start"
    start.mkdir()
    elsewhere = tmp_path / "elsewhere"
    async with omnigent.open_runtime(workspace=start) as rt:
        dot = await tool_session(rt, recorder, os_env={"type": "caller_process", "cwd": "."})
        recorder.body = calls(("sys_os_write", {"path": "here.txt", "content": "1"}))
        await run_turn(rt, dot)
        agent = await rt.create_agent(
            {**scripted_agent("abs", harness="recorder"), "os_env": {"cwd": str(elsewhere)}}
        )
        absolute = (await rt.create_session(agent.id)).id
        await run_turn(rt, absolute)
    assert (start / "here.txt").read_text() == "1"
    assert (elsewhere / "here.txt").read_text() == "1"


async def test_interrupting_a_shell_kills_its_whole_process_group(
    rt: omnigent.Runtime, recorder: RecordingHarness, tmp_path: Path
) -> None:
    session = await tool_session(rt, recorder, os_env={"cwd": str(tmp_path)})
    script = "trap '' TERM; sleep 1000 & echo $! > child.pid; echo $$ > shell.pid; wait"
    recorder.body = calls(("sys_os_shell", {"command": script, "timeout": 600}))
    async with rt.subscribe(session) as events:
        await rt.send_message(session, "go")
        with trio.fail_after(10):
            while not (tmp_path / "child.pid").exists() or not (tmp_path / "shell.pid").exists():
                await trio.sleep(0.02)
        await rt.interrupt(session)
        seen = await collect_turn(events)
    assert statuses(seen) == ["running", "cancelled"]
    pids = [int((tmp_path / f).read_text()) for f in ("child.pid", "shell.pid")]
    await wait_gone(*pids)


async def background(rt: omnigent.Runtime, recorder: RecordingHarness) -> str:
    return await tool_session(rt, recorder, async_enabled=True)


async def test_async_tools_are_offered_unless_disabled(
    rt: omnigent.Runtime, recorder: RecordingHarness
) -> None:
    plain = await tool_session(rt, recorder)
    await run_turn(rt, plain)
    names = {t.name for t in recorder.requests[-1].tools}
    assert {"sys_os_read", "sys_os_shell"} <= names
    assert {"sys_call_async", "sys_read_inbox", "sys_cancel_async"} <= names  # every agent's
    agent = await rt.create_agent(
        {**scripted_agent("quiet", harness="recorder"), "async_enabled": False}
    )
    disabled = (await rt.create_session(agent.id)).id
    await run_turn(rt, disabled)
    names = {t.name for t in recorder.requests[-1].tools}
    assert not {"sys_call_async", "sys_read_inbox", "sys_cancel_async"} & names


async def test_background_success_writes_one_inbox_item_and_wakes_the_session(
    rt: omnigent.Runtime, recorder: RecordingHarness
) -> None:
    session = await background(rt, recorder)
    recorder.body = calls(
        ("sys_call_async", {"tool": "sys_os_shell", "args": {"command": "sleep 0.2; echo done"}})
    )
    async with rt.subscribe(session) as events:
        await rt.send_message(session, "start it")
        first = await collect_turn(events)
        started = json.loads(recorder.body.outputs[0])
        assert started["status"] == "running"
        assert started["tool"] == "sys_os_shell"
        recorder.body = None  # the wake-up turn just echoes
        wake = await collect_turn(events)
    assert statuses(first) == ["running", "idle"]
    assert statuses(wake) == ["running", "idle"]
    assert [e.count for e in wake if isinstance(e, InboxUpdated)] == [1, 0]
    notice = item_text(recorder.requests[-1].input[0])
    assert notice.startswith(f"[System: task {started['handle_id']} completed — sys_os_shell")
    assert '"stdout": "done\\n"' in notice
    await wait_quiet(rt)
    assert await probe(rt).store.inbox_count(session) == 0


async def test_background_failure_and_cancel_each_write_one_item(
    rt: omnigent.Runtime, recorder: RecordingHarness
) -> None:
    session = await background(rt, recorder)
    started = trio.Event()
    outputs: list[str] = []

    async def body(request: TurnRequest, ctx: TurnContext) -> None:
        if request.turn_number > 0:
            return
        outputs.append(
            await ctx.call_tool("sys_call_async", {"tool": "sys_os_read", "args": {"path": "nope"}})
        )
        outputs.append(
            await ctx.call_tool(
                "sys_call_async",
                {"tool": "sys_os_shell", "args": json.dumps({"command": "sleep 100"})},
            )
        )
        handle = json.loads(outputs[-1])["handle_id"]
        outputs.append(await ctx.call_tool("sys_cancel_async", {"handle_id": handle}))
        outputs.append(await ctx.call_tool("sys_cancel_async", {"handle_id": "task_nope"}))
        started.set()

    recorder.body = body
    async with rt.subscribe(session) as events:
        await rt.send_message(session, "go")
        await collect_turn(events)
        await collect_turn(events)  # woken by the inbox
    await wait_quiet(rt)
    assert json.loads(outputs[2])["status"] == "cancelling"
    assert outputs[3].startswith("Error: no running background task")
    lines = "\n".join(item_text(m) for r in recorder.requests[1:] for m in r.input)
    assert lines.count("[System: task") == 2
    assert "failed — sys_os_read" in lines
    assert "was cancelled — sys_os_shell" in lines


async def test_read_inbox_drains_and_reports_malformed_items(
    rt: omnigent.Runtime, recorder: RecordingHarness
) -> None:
    session = await background(rt, recorder)
    await probe(rt).store.add_inbox_item(
        session,
        "inbox_1",
        json.dumps({"handle_id": "task_a", "tool": "t", "status": "completed", "output": ""}),
    )
    await probe(rt).store.add_inbox_item(session, "inbox_2", "{not json")
    await probe(rt).store.add_inbox_item(
        session,
        "inbox_3",
        json.dumps({"handle_id": "task_b", "tool": "t", "status": "completed", "output": "42"}),
    )
    recorder.body = calls(("sys_read_inbox", {}), ("sys_read_inbox", {}))
    await run_turn(rt, session)
    first, second = recorder.body.outputs
    assert first.splitlines() == [
        "[System: task task_a completed — t produced no output]",
        "[System: inbox item inbox_2 is malformed and was skipped]",
        "[System: task task_b completed — t returned: 42]",
    ]
    assert second == "The inbox is empty."


async def test_bad_async_calls_are_errors(rt: omnigent.Runtime, recorder: RecordingHarness) -> None:
    session = await background(rt, recorder)
    recorder.body = calls(
        ("sys_call_async", {"tool": "nope"}),
        ("sys_call_async", {"tool": "sys_read_inbox"}),
        ("sys_call_async", {"tool": "sys_os_read", "args": "{broken"}),
        ("sys_call_async", {}),
        ("sys_cancel_async", {"handle": "x"}),
    )
    await run_turn(rt, session)
    assert all(o.startswith("Error:") for o in recorder.body.outputs)
    await wait_quiet(rt)
    assert await probe(rt).store.inbox_count(session) == 0


async def test_a_thousand_background_tasks_cancelled_leave_nothing(
    rt: omnigent.Runtime, recorder: RecordingHarness
) -> None:
    async def wait_forever() -> str:
        await trio.sleep_forever()
        return ""

    rt.register_tool(wait_forever)
    session = await background(rt, recorder)
    before = all_tasks()

    async def body(request: TurnRequest, ctx: TurnContext) -> None:
        tools = ctx._tools  # type: ignore[attr-defined]
        for _ in range(1000):
            tools.start_background("wait_forever", {})

    recorder.body = body
    await run_turn(rt, session)
    assert probe(rt).background_tasks(session) == 1000
    with trio.fail_after(30):
        await rt.stop_session(session)
    assert probe(rt).actor_state(session) is None
    assert all_tasks() <= before
    assert await probe(rt).store.inbox_count(session) == 1000


async def test_stop_session_kills_background_processes(
    rt: omnigent.Runtime, recorder: RecordingHarness, tmp_path: Path
) -> None:
    session = await tool_session(rt, recorder, async_enabled=True, os_env={"cwd": str(tmp_path)})
    command = "trap '' TERM; sleep 1000 & echo $! > child.pid; wait"
    recorder.body = calls(
        ("sys_call_async", {"tool": "sys_os_shell", "args": {"command": command, "timeout": 600}})
    )
    await run_turn(rt, session)
    with trio.fail_after(10):
        while not (tmp_path / "child.pid").exists():
            await trio.sleep(0.02)
    await rt.stop_session(session)
    await wait_gone(int((tmp_path / "child.pid").read_text()))


async def test_an_undelivered_inbox_item_survives_a_restart(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'inbox.db'}"
    recorder = RecordingHarness()
    async with omnigent.open_runtime(db=db) as rt:
        session = await background(rt, recorder)
        recorder.body = calls(
            ("sys_call_async", {"tool": "sys_os_shell", "args": {"command": "sleep 30"}})
        )
        await run_turn(rt, session)
    # Shutdown cancelled the task; its (cancelled) result is in the inbox, unread —
    # and the next start wakes the session with it (issue 17).
    recorder.body = None
    async with omnigent.open_runtime(db=db, harnesses={"recorder": recorder.factory}) as rt:
        with trio.fail_after(10):
            async with rt.subscribe(session, after=0) as events:
                idle = 0
                async for event in events:
                    idle += getattr(event, "status", None) == "idle"
                    if idle == 2:  # the turn before the restart, then the wake-up
                        break
        assert await probe(rt).store.inbox_count(session) == 0
    woken = recorder.requests[-1]
    assert "was cancelled — sys_os_shell" in item_text(woken.input[0])


@pytest.mark.parametrize("async_enabled", [True])
async def test_background_task_of_a_deleted_session_is_cancelled(
    rt: omnigent.Runtime, recorder: RecordingHarness, async_enabled: bool
) -> None:
    session = await tool_session(rt, recorder, async_enabled=async_enabled)
    recorder.body = calls(
        ("sys_call_async", {"tool": "sys_os_shell", "args": {"command": "sleep 60"}})
    )
    before = all_tasks()
    await run_turn(rt, session)
    with trio.fail_after(10):
        await rt.delete_session(session)
    assert all_tasks() <= before
    assert rt.statistics()["active_sessions"] == 0
