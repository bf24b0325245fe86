"""The faults of a remote runner, each with real processes: a runner that is offline, one
killed mid-turn, a network blip, a server restart (``docs/runners.md``, "Faults")."""

from __future__ import annotations

from pathlib import Path

import trio

from omnigent.client import OmnigentClient
from omnigent.model import (
    MessageItem,
    OutputTextDelta,
    ResponseFailed,
    SessionStatusChanged,
    item_text,
)

from ..reliability.procs import read_proc
from ..reliability.serve_rig import (
    Watch,
    kill_9,
    start,
    stop,
    summary,
    terminal_count,
    wait_for_file,
    write_agents,
)
from .rig import TOKEN, CuttableProxy, open_runners, start_server
from .test_turns import scripted

served_extra = ["--runner-token", TOKEN, "--runner-timeout", "5"]


def statuses(events: list[object]) -> list[str]:
    return [str(e.status) for e in events if isinstance(e, SessionStatusChanged)]


async def test_a_message_for_an_offline_runner_waits_for_it_then_fails(tmp_path: Path) -> None:
    """Answered once the runner connects; after --runner-wait, failed runner_offline."""
    server_root = tmp_path / "server"
    write_agents(server_root, [scripted("remote", [{"say": "hello from the laptop"}])])
    with trio.fail_after(60):
        served = await start_server(server_root, "--runner-wait", "6")
        try:
            async with open_runners() as runners, OmnigentClient(served.url) as client:
                late = await client.create_session(agent_name="remote", runner_id="late")
                never = await client.create_session(agent_name="remote", runner_id="never")
                async with trio.open_nursery() as nursery:
                    watch_late, watch_never = Watch(client, late.id), Watch(client, never.id)
                    await nursery.start(watch_late.run)
                    await nursery.start(watch_never.run)
                    await client.send_message(late.id, "are you there?")
                    await client.send_message(never.id, "anyone?")
                    await watch_late.wait_for(
                        lambda ev: "launching" in statuses(ev), "launching while it waits"
                    )
                    await runners.start(tmp_path / "late", served.url, "late")
                    await watch_late.wait_for(lambda ev: terminal_count(ev) == 1, "the answer")
                    await watch_never.wait_for(lambda ev: terminal_count(ev) == 1, "the failure")
                    nursery.cancel_scope.cancel()
                assert statuses(watch_late.events) == ["running", "launching", "running", "idle"]
                text = "".join(e.delta for e in watch_late.events if isinstance(e, OutputTextDelta))
                assert text == "hello from the laptop"
                assert statuses(watch_never.events)[-1] == "failed", summary(watch_never.events)
                failed = [e for e in watch_never.events if isinstance(e, ResponseFailed)]
                assert len(failed) == 1 and failed[0].error.code == "runner_offline"
                assert "never" in failed[0].error.message
                # The message is not lost: it is in the session's history.
                items = await client.list_items(never.id)
                kept = [item_text(i) for i in items if isinstance(i, MessageItem)]
                assert kept == ["anyone?"]
        finally:
            await stop(served)


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie does not count)."""
    proc = read_proc(pid)
    return proc is not None and proc.state != "Z"


async def test_kill_9_of_a_runner_mid_turn_fails_the_turn_and_the_next_runner_cleans_up(
    tmp_path: Path,
) -> None:
    server_root = tmp_path / "server"
    shell = "echo $$ > shell.pid; sleep 1000"
    write_agents(
        server_root,
        [
            scripted(
                "remote",
                [{"say": "starting"}, {"call": "sys_os_shell", "args": {"command": shell}}],
            )
        ],
    )
    with trio.fail_after(60):
        served = await start_server(server_root, "--runner-timeout", "3")
        try:
            async with open_runners() as runners, OmnigentClient(served.url) as client:
                runner = await runners.start(tmp_path / "laptop", served.url, "laptop")
                session = await client.create_session(agent_name="remote", runner_id="laptop")
                async with trio.open_nursery() as nursery:
                    watch = Watch(client, session.id)
                    await nursery.start(watch.run)
                    await client.send_message(session.id, "go")
                    pid = int((await wait_for_file(runner.workspace / "shell.pid")).strip())
                    assert alive(pid)
                    killed_at = trio.current_time()
                    await runner.kill_9()
                    await watch.wait_for(lambda ev: terminal_count(ev) == 1, "the failure")
                    noticed = trio.current_time() - killed_at
                    nursery.cancel_scope.cancel()
                assert noticed <= 3 + 1.5, noticed  # within the runner timeout
                assert statuses(watch.events) == ["running", "failed"], summary(watch.events)
                failed = [e for e in watch.events if isinstance(e, ResponseFailed)]
                assert [e.error.code for e in failed] == ["runner_disconnected"]
                # The dead runner's shell outlived it; the next runner on this machine
                # ends it before it connects.
                assert alive(pid)
                again = await runners.start(tmp_path / "laptop", served.url, "laptop")
                assert not alive(pid), again.lines
                snapshot = await client.get_session(session.id)
                assert snapshot.status == "failed"
        finally:
            await stop(served)


async def test_a_network_blip_loses_and_repeats_nothing(tmp_path: Path) -> None:
    """The connection is cut mid-stream; the runner reconnects and the turn goes on."""
    words = [f"w{n} " for n in range(3000)]
    server_root = tmp_path / "server"
    script = [
        {"say": "".join(words)},
        {"call": "sys_os_shell", "args": {"command": "echo after-the-blip"}},
        {"say": "the end"},
    ]
    write_agents(server_root, [scripted("remote", script)])
    with trio.fail_after(60):
        served = await start_server(server_root, "--runner-timeout", "5")
        try:
            async with (
                open_runners() as runners,
                OmnigentClient(served.url) as client,
                trio.open_nursery() as nursery,
            ):
                proxy = CuttableProxy(served.port)
                await nursery.start(proxy.run)
                runner = await runners.start(tmp_path / "laptop", proxy.url, "laptop")
                session = await client.create_session(agent_name="remote", runner_id="laptop")
                watch = Watch(client, session.id)
                await nursery.start(watch.run)
                await client.send_message(session.id, "stream")
                await watch.wait_for(
                    lambda ev: sum(isinstance(e, OutputTextDelta) for e in ev) >= 50, "deltas"
                )
                proxy.cut()
                await runner.wait_for_line("resumed the link")
                await watch.wait_for(lambda ev: terminal_count(ev) == 1, "the end of the turn")
                items = await client.list_items(session.id)
                nursery.cancel_scope.cancel()
            assert proxy.cuts == 1 and proxy.connections >= 2
            assert statuses(watch.events) == ["running", "idle"], summary(watch.events)
            ids = [e.event_id for e in watch.events]
            assert ids == list(range(1, len(ids) + 1))  # no gap, no repeat
            deltas = [e.delta for e in watch.events if isinstance(e, OutputTextDelta)]
            assert deltas == [*words, "the ", "end"]
            assert "after-the-blip" in str(items)
        finally:
            await stop(served)


async def test_the_server_restarts_while_the_runner_lives(tmp_path: Path) -> None:
    """The runner reconnects on its own; the bound sessions run there again; the inbox
    item and the sub-agent's undelivered result of before the crash reach the parent."""
    server_root = tmp_path / "server"
    sleeper = "echo $$ > {}.pid; exec sleep 1000"
    first = [
        {
            "call": "sys_call_async",
            "args": {"tool": "sys_os_shell", "args": {"command": "echo bg-result"}},
        },
        {"call": "sys_session_send", "args": {"agent": "w", "title": "t", "args": "work"}},
        {"call": "sys_os_shell", "args": {"command": sleeper.format("parent"), "timeout": 900}},
    ]
    lead = {
        "name": "lead",
        "async_enabled": True,
        "executor": {
            "type": "omnigent",
            "config": {"harness": "scripted", "turns": [first, [{"say": "woken"}]]},
        },
        "sub_agents": [
            {
                "name": "w",
                "executor": {
                    "config": {
                        "harness": "scripted",
                        "script": [
                            {"call": "sys_os_shell", "args": {"command": sleeper.format("child")}}
                        ],
                    }
                },
            }
        ],
        "tools": {"agents": ["w"]},
    }
    write_agents(server_root, [lead])
    with trio.fail_after(90):
        served = await start_server(server_root, "--runner-timeout", "5")
        try:
            async with open_runners() as runners:
                runner = await runners.start(tmp_path / "laptop", served.url, "laptop")
                async with OmnigentClient(served.url) as client:
                    parent = await client.create_session(agent_name="lead", runner_id="laptop")
                    await client.send_message(parent.id, "go")
                    await wait_for_file(runner.workspace / "parent.pid")
                    await wait_for_file(runner.workspace / "child.pid")
                    children, _ = await client.list_sessions(parent_session_id=parent.id)
                    assert [c.raw["runner_id"] for c in children] == ["laptop"]  # inherited
                mark = len(runner.lines)
                await kill_9(served)
                served = await start(server_root, port=served.port, extra=served_extra)
                # The runner was not restarted: it reconnects by itself, on a new link
                # (what it ran for the dead server was ended).
                await runner.wait_for_line("connected to", after=mark)
                async with OmnigentClient(served.url) as client:
                    watch = Watch(client, parent.id)
                    async with trio.open_nursery() as nursery:
                        await nursery.start(watch.run)
                        await watch.wait_for(
                            lambda ev: (
                                any(
                                    isinstance(e, OutputTextDelta) and e.delta == "woken"
                                    for e in ev
                                )
                                and terminal_count(ev) == 2
                            ),
                            "the wake-up turn on the runner",
                        )
                        nursery.cancel_scope.cancel()
                    items = await client.list_items(parent.id)
                    wake = [
                        item_text(i)
                        for i in items
                        if isinstance(i, MessageItem) and i.role == "user"
                    ][-1]
                    assert "bg-result" in wake, wake  # the inbox item survived
                    assert "sub-agent" in wake and "w:t" in wake, wake  # the child's result
                    assert wake.count("[System: sub-agent task") == 1
                for name in ("parent", "child"):
                    pid = int((runner.workspace / f"{name}.pid").read_text())
                    assert not alive(pid), name  # the dead server's shells, ended by the runner
        finally:
            await stop(served)
