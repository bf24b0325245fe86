"""Terminals over the library, with real tmux: tools, resource events, ownership, idleness."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

import pytest
import trio

import omnigent
from omnigent.harnesses.base import TurnContext, TurnRequest
from omnigent.model import Event, ResourceCreated, ResourceDeleted
from omnigent.testing import RecordingHarness, collect_turn, probe
from omnigent.tools.terminals import TERMINAL_TOOLS

from .conftest import wait_quiet
from .terminal_helpers import (
    SPAWN,
    ok,
    pid_alive,
    read_until,
    run_ok,
    spawned,
    target,
    terminal_agent,
    wait_gone,
)


async def terminal_session(
    rt: omnigent.Runtime, recorder: RecordingHarness, cwd: Path | None = None, **terminal: Any
) -> str:
    with contextlib.suppress(omnigent.Conflict):  # registered by an earlier call
        rt.register_harness("recorder", recorder.factory)
    spec = terminal_agent(**terminal)
    if cwd is not None:
        spec["os_env"] = {"cwd": str(cwd)}
    agent = await rt.create_agent(spec)
    return (await rt.create_session(agent.id)).id


def resource_events(events: list[Event]) -> list[Event]:
    return [e for e in events if isinstance(e, ResourceCreated | ResourceDeleted)]


async def test_launch_send_read_list_close(
    rt: omnigent.Runtime, recorder: RecordingHarness, tmp_path: Path
) -> None:
    session = await terminal_session(rt, recorder, cwd=tmp_path)
    seen: dict[str, Any] = {}

    async def body(request: TurnRequest, ctx: TurnContext) -> None:
        seen["launch"] = ok(await ctx.call_tool("sys_terminal_launch", target()))
        ok(await ctx.call_tool("sys_terminal_send", target(text="pwd; echo $((6 * 7))")))
        seen["read"] = await read_until(ctx, "42")
        seen["list"] = ok(await ctx.call_tool("sys_terminal_list", {}))
        seen["resources"] = await rt.list_resources(session)
        seen["close"] = ok(await ctx.call_tool("sys_terminal_close", target()))
        seen["after"] = ok(await ctx.call_tool("sys_terminal_list", {}))
        seen["send_after"] = await ctx.call_tool("sys_terminal_send", target(text="ls"))

    recorder.body = body
    events = await run_ok(rt, session)
    where = str(await trio.Path(tmp_path).resolve())
    assert seen["launch"] == {
        "terminal": "bash",
        "session": "s1",
        "resource_id": "terminal_bash_s1",
        "status": "launched",
        "cwd": where,
    }
    assert "42" in seen["read"]["screen"] and where in seen["read"]["screen"]
    assert [t["resource_id"] for t in seen["list"]] == ["terminal_bash_s1"]
    assert [r.to_dict() for r in seen["resources"]] == [
        {
            "id": "terminal_bash_s1",
            "type": "terminal",
            "metadata": {"terminal_name": "bash", "session_key": "s1", "running": True},
        }
    ]
    assert seen["close"]["status"] == "closed"
    assert seen["after"] == []
    assert seen["send_after"].startswith("Error: terminal bash (session s1) is not running")
    created, deleted = resource_events(events)
    assert created.to_dict()["resource"] == seen["resources"][0].to_dict()
    assert deleted.to_dict()["resource_id"] == "terminal_bash_s1"
    assert deleted.to_dict()["resource_type"] == "terminal"
    assert await rt.list_resources(session) == []
    await wait_quiet(rt)  # a closed terminal leaves the session nothing to run


async def test_launch_is_idempotent_and_announces_once(
    rt: omnigent.Runtime, recorder: RecordingHarness
) -> None:
    session = await terminal_session(rt, recorder)
    statuses: list[str] = []

    async def launch(ctx: TurnContext) -> None:
        statuses.append(ok(await ctx.call_tool("sys_terminal_launch", target()))["status"])

    async def body(request: TurnRequest, ctx: TurnContext) -> None:
        async with trio.open_nursery() as racing:  # two launches at once
            racing.start_soon(launch, ctx)
            racing.start_soon(launch, ctx)
        await launch(ctx)  # and one more, later
        ok(await ctx.call_tool("sys_terminal_launch", target("s2")))  # another key
        ok(await ctx.call_tool("sys_terminal_close", target()))
        closed_again = ok(await ctx.call_tool("sys_terminal_close", target()))
        statuses.append(closed_again["status"])

    recorder.body = body
    events = await run_ok(rt, session)
    assert sorted(statuses[:3]) == ["already_running", "already_running", "launched"]
    assert statuses[3] == "not_found"
    kinds = [
        (e.type, e.to_dict().get("resource_id") or e.to_dict()["resource"]["id"])
        for e in resource_events(events)
    ]
    assert kinds == [
        ("session.resource.created", "terminal_bash_s1"),
        ("session.resource.created", "terminal_bash_s2"),
        ("session.resource.deleted", "terminal_bash_s1"),
    ]
    assert [r.id for r in await rt.list_resources(session)] == ["terminal_bash_s2"]
    snapshot = (await rt.get_session(session)).to_dict()
    assert [r["id"] for r in snapshot["resources"]] == ["terminal_bash_s2"]
    await rt.stop_session(session)
    assert (await rt.get_session(session)).to_dict()["resources"] == []


async def test_terminal_tools_are_offered_only_when_the_spec_declares_terminals(
    rt: omnigent.Runtime, recorder: RecordingHarness
) -> None:
    rt.register_harness("recorder", recorder.factory)
    outputs: list[str] = []

    async def body(request: TurnRequest, ctx: TurnContext) -> None:
        outputs.append(await ctx.call_tool("sys_terminal_launch", target()))

    recorder.body = body
    plain = await rt.create_agent(
        {"name": "plain", "executor": {"config": {"harness": "recorder"}}}
    )
    plain_session = (await rt.create_session(plain.id)).id
    await run_ok(rt, plain_session)
    with_terminals = await terminal_session(rt, recorder)
    await run_ok(rt, with_terminals)
    plain_tools = {t.name for t in recorder.requests[0].tools}
    terminal_tools = {t.name for t in recorder.requests[1].tools}
    assert not plain_tools & set(TERMINAL_TOOLS)
    assert set(TERMINAL_TOOLS) <= terminal_tools
    assert terminal_tools - set(TERMINAL_TOOLS) == plain_tools
    assert outputs[0].startswith("Error: unknown tool 'sys_terminal_launch'")
    assert ok(outputs[1])["status"] == "launched"
    await rt.stop_session(with_terminals)


async def test_bad_arguments_are_errors_and_start_nothing(
    rt: omnigent.Runtime, recorder: RecordingHarness, tmp_path: Path
) -> None:
    inside = tmp_path / "work"
    inside.mkdir()
    session = await terminal_session(rt, recorder, cwd=inside)
    outputs: list[str] = []

    async def body(request: TurnRequest, ctx: TurnContext) -> None:
        for args in (
            {"terminal": "zsh", "session": "s1"},
            target(cwd=str(tmp_path)),
            target(cwd="../"),
            target("bad key"),
            {"terminal": "bash"},
        ):
            outputs.append(await ctx.call_tool("sys_terminal_launch", args))
        outputs.append(await ctx.call_tool("sys_terminal_read", target()))
        outputs.append(
            await ctx.call_tool("sys_terminal_close", {"terminal": "zsh", "session": "s"})
        )

    recorder.body = body
    events = await run_ok(rt, session)
    assert all(o.startswith("Error: ") for o in outputs), outputs
    assert "unknown terminal 'zsh' (declared in the spec: bash)" in outputs[0]
    assert "outside the working directory" in outputs[1]
    assert "outside the working directory" in outputs[2]
    assert "not running" in outputs[5]
    assert resource_events(events) == []
    await wait_quiet(rt)  # no terminal was left behind


async def test_text_reaches_the_terminal_exactly(
    rt: omnigent.Runtime, recorder: RecordingHarness
) -> None:
    session = await terminal_session(rt, recorder)
    screens: list[str] = []

    async def body(request: TurnRequest, ctx: TurnContext) -> None:
        ok(await ctx.call_tool("sys_terminal_launch", target()))
        # A trailing ";" separates tmux commands unless escaped; "#" is not a format.
        ok(await ctx.call_tool("sys_terminal_send", target(text="printf '<%s>\\n' '#S' a\\;")))
        screens.append((await read_until(ctx, "<a;>"))["screen"])
        ok(await ctx.call_tool("sys_terminal_send", target(text="seq 1 300", keys="Enter")))
        await read_until(ctx, "300\n$")
        visible = ok(await ctx.call_tool("sys_terminal_read", target()))["screen"]
        deeper = ok(await ctx.call_tool("sys_terminal_read", target(scrollback=400)))["screen"]
        screens.extend([visible, deeper])
        # C-c once something is surely waiting for input (the prompt is printed by
        # the waiting command itself, and spelled differently on the command line).
        ok(await ctx.call_tool("sys_terminal_send", target(text="read -p 'wait''ing> ' x")))
        await read_until(ctx, "waiting>")
        ok(await ctx.call_tool("sys_terminal_send", target(keys="C-c")))
        # The shell discards typeahead while it handles the interrupt: what is typed
        # before its next prompt may be lost, so type again until it is seen.
        for _ in range(20):
            ok(await ctx.call_tool("sys_terminal_send", target(text="echo after-$((1 + 1))")))
            with trio.move_on_after(1):
                await read_until(ctx, "after-2")
                break
        else:
            raise AssertionError("the shell never ran a command after C-c")

    recorder.body = body
    await run_ok(rt, session)
    assert "<#S>\n<a;>" in screens[0]
    assert "\n1\n" not in screens[1] and "\n1\n" in screens[2]
    await rt.stop_session(session)


async def _launch_and_spawn(rt: omnigent.Runtime, recorder: RecordingHarness, session: str) -> None:
    async def body(request: TurnRequest, ctx: TurnContext) -> None:
        ok(await ctx.call_tool("sys_terminal_launch", target()))
        ok(await ctx.call_tool("sys_terminal_send", target(text=SPAWN)))

    recorder.body = body
    await run_ok(rt, session)


async def test_stop_session_kills_the_pane_and_everything_in_it(
    rt: omnigent.Runtime, recorder: RecordingHarness, tmp_path: Path
) -> None:
    session = await terminal_session(rt, recorder, cwd=tmp_path)
    await _launch_and_spawn(rt, recorder, session)
    pids, server, socket = await spawned(tmp_path)
    assert all(pid_alive(p) for p in [*pids, server])
    async with rt.subscribe(session) as events:
        await rt.stop_session(session)
        with trio.fail_after(5):
            deleted = await events.__anext__()
    assert isinstance(deleted, ResourceDeleted) and deleted.resource_id == "terminal_bash_s1"
    await wait_gone(*pids, server)  # the stubborn job took SIGKILL; the server had no session
    assert await rt.list_resources(session) == []
    assert rt.statistics()["active_sessions"] == 0
    assert socket.parent.is_dir()  # the runtime's directory stays until it closes


async def test_delete_session_kills_its_terminals(
    rt: omnigent.Runtime, recorder: RecordingHarness, tmp_path: Path
) -> None:
    session = await terminal_session(rt, recorder, cwd=tmp_path)
    await _launch_and_spawn(rt, recorder, session)
    pids, server, _ = await spawned(tmp_path)
    await rt.delete_session(session)
    await wait_gone(*pids, server)
    with pytest.raises(omnigent.SessionNotFound):
        await rt.list_resources(session)


async def test_shutdown_kills_terminals_the_server_and_its_directory(
    recorder: RecordingHarness, tmp_path: Path
) -> None:
    async with omnigent.open_runtime() as rt:
        session = await terminal_session(rt, recorder, cwd=tmp_path)
        await _launch_and_spawn(rt, recorder, session)
        pids, server, socket = await spawned(tmp_path)
    assert not socket.parent.exists()
    await wait_gone(*pids, server)


async def test_shutdown_publishes_the_deletion_before_closing(
    recorder: RecordingHarness, tmp_path: Path
) -> None:
    db = f"sqlite:///{tmp_path / 'rt.db'}"
    async with omnigent.open_runtime(db) as rt:
        session = await terminal_session(rt, recorder, cwd=tmp_path)
        await _launch_and_spawn(rt, recorder, session)
        pids, server, _ = await spawned(tmp_path)
    await wait_gone(*pids, server)
    async with omnigent.open_runtime(db) as rt:
        types: list[str] = []
        async with rt.subscribe(session, after=0) as events:
            with trio.fail_after(5):
                async for event in events:
                    types.append(event.type)
                    if isinstance(event, ResourceDeleted):
                        break
    assert types.count("session.resource.created") == 1
    assert types.count("session.resource.deleted") == 1


async def test_a_terminal_whose_command_exits_is_announced_gone(
    rt: omnigent.Runtime, recorder: RecordingHarness
) -> None:
    session = await terminal_session(rt, recorder)

    async def body(request: TurnRequest, ctx: TurnContext) -> None:
        ok(await ctx.call_tool("sys_terminal_launch", target()))
        ok(await ctx.call_tool("sys_terminal_send", target(text="exit 3")))

    recorder.body = body
    async with rt.subscribe(session) as events:
        await rt.send_message(session, "go")
        with trio.fail_after(10):
            async for event in events:
                if isinstance(event, ResourceDeleted):
                    break
    assert await rt.list_resources(session) == []
    await wait_quiet(rt)


async def test_a_quiet_terminal_wakes_the_agent_with_an_idle_notice(
    rt: omnigent.Runtime, recorder: RecordingHarness
) -> None:
    session = await terminal_session(rt, recorder, idle_after=0.3)
    woken = trio.Event()

    async def body(request: TurnRequest, ctx: TurnContext) -> None:
        if len(recorder.requests) == 1:
            ok(await ctx.call_tool("sys_terminal_launch", target()))
            ok(await ctx.call_tool("sys_terminal_send", target(text="echo finished")))
            return  # the agent does not read: the output is news when it settles
        await read_until(ctx, "finished")
        woken.set()

    recorder.body = body
    await run_ok(rt, session)
    with trio.fail_after(10):
        await woken.wait()
    notice = recorder.requests[1].input[0]
    text = notice.content[0].text  # type: ignore[union-attr]
    assert "[System: terminal bash (session s1) is idle" in text
    assert "sys_terminal_read" in text
    await rt.stop_session(session)


async def test_idle_notices_go_to_sys_read_inbox_and_malformed_ones_are_skipped(
    rt: omnigent.Runtime, recorder: RecordingHarness
) -> None:
    session = await terminal_session(rt, recorder)
    spec = (await rt.get_agent_spec((await rt.get_session(session)).agent_id)).to_dict()
    agent = await rt.create_agent({**spec, "name": "reader", "async_enabled": True})
    session = (await rt.create_session(agent.id)).id
    store = probe(rt).store
    for item_id, data in [
        ("inbox_1", {"type": "terminal_idle", "terminal": 7, "session": "s1"}),
        ("inbox_2", ["not", "an", "object"]),
        ("inbox_3", {"type": "terminal_idle", "terminal": "bash"}),
        ("inbox_4", {"type": "terminal_idle", "terminal": "bash", "session": "s1"}),
    ]:
        await store.add_inbox_item(session, item_id, json.dumps(data))
    outputs: list[str] = []

    async def body(request: TurnRequest, ctx: TurnContext) -> None:
        outputs.append(await ctx.call_tool("sys_read_inbox", {}))

    recorder.body = body
    await run_ok(rt, session)
    lines = outputs[0].split("\n")
    assert lines[:3] == [
        "[System: malformed terminal_idle inbox item ignored — 'terminal' must be a string, got 7]",
        "[System: inbox item inbox_2 is malformed and was skipped]",
        "[System: malformed terminal_idle inbox item ignored — 'session' must be a string, "
        "got None]",
    ]
    assert lines[3].startswith("[System: terminal bash (session s1) is idle")
    assert await store.drain_inbox(session) == []  # drained, malformed ones too


async def test_without_tmux_a_launch_says_so(
    recorder: RecordingHarness, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    async with omnigent.open_runtime() as rt:
        session = await terminal_session(rt, recorder)
        outputs: list[str] = []

        async def body(request: TurnRequest, ctx: TurnContext) -> None:
            outputs.append(await ctx.call_tool("sys_terminal_launch", target()))

        recorder.body = body
        events = await run_ok(rt, session)
    assert outputs[0].startswith("Error: cannot start terminal bash: terminals need tmux")
    assert resource_events(events) == []


async def test_an_interrupt_ends_the_turn_not_the_terminals(
    rt: omnigent.Runtime, recorder: RecordingHarness, tmp_path: Path
) -> None:
    session = await terminal_session(rt, recorder, cwd=tmp_path)
    launched = trio.Event()

    async def body(request: TurnRequest, ctx: TurnContext) -> None:
        ok(await ctx.call_tool("sys_terminal_launch", target()))
        ok(await ctx.call_tool("sys_terminal_send", target(text=SPAWN)))
        launched.set()
        await trio.sleep_forever()

    recorder.body = body
    async with rt.subscribe(session) as events:
        await rt.send_message(session, "go")
        with trio.fail_after(10):
            await launched.wait()
        pids, server, _ = await spawned(tmp_path)
        await rt.interrupt(session)
        seen = await collect_turn(events)
    # An interrupt ends the turn, not the session's terminals.
    assert [e.type for e in resource_events(seen)] == ["session.resource.created"]
    assert all(pid_alive(p) for p in pids)
    await rt.stop_session(session)
    await wait_gone(*pids, server)


async def test_clients_read_resources_and_screens_through_the_runtime(
    rt: omnigent.Runtime, recorder: RecordingHarness
) -> None:
    session = await terminal_session(rt, recorder)
    with pytest.raises(omnigent.ResourceNotFound):  # no work, no terminals
        await rt.read_resource_screen(session, "terminal_bash_s1")
    assert await rt.list_resources(session) == []

    async def body(request: TurnRequest, ctx: TurnContext) -> None:
        ok(await ctx.call_tool("sys_terminal_launch", target()))
        # The marker is computed, so the typed command line does not already show it.
        ok(await ctx.call_tool("sys_terminal_send", target(text="seq 1 100; echo view-$((6 * 7))")))
        await read_until(ctx, "view-42")

    recorder.body = body
    await run_ok(rt, session)
    screen = await rt.read_resource_screen(session, "terminal_bash_s1")
    assert screen.id == "terminal_bash_s1" and screen.type == "terminal"
    assert "view-42" in screen.screen and "\n1\n" not in screen.screen
    deeper = await rt.read_resource_screen(session, "terminal_bash_s1", scrollback=200)
    assert "\n1\n" in deeper.screen and deeper.scrollback_lines == 200
    assert screen.to_dict().keys() == {"id", "type", "screen", "scrollback_lines", "truncated"}
    for bad in (-1, 10_001, True):
        with pytest.raises(omnigent.InvalidInput, match="scrollback"):
            await rt.read_resource_screen(session, "terminal_bash_s1", scrollback=bad)
    with pytest.raises(omnigent.ResourceNotFound):
        await rt.read_resource_screen(session, "terminal_bash_s2")
    with pytest.raises(omnigent.SessionNotFound):
        await rt.list_resources("conv_missing")
    with pytest.raises(omnigent.SessionNotFound):
        await rt.read_resource_screen("conv_missing", "terminal_bash_s1")
    await rt.stop_session(session)
