"""A runner-bound session's turn: the runner runs the harness and the tools, in its own
workspace and process tree; the server keeps the events, the items and the policies."""

from __future__ import annotations

import json
from pathlib import Path

import trio

from omnigent.client import OmnigentClient
from omnigent.model import (
    FunctionCallOutputItem,
    MessageItem,
    OutputTextDelta,
    SessionStatusChanged,
    item_text,
)

from ..reliability.procs import read_proc
from ..reliability.serve_rig import (
    Watch,
    stop,
    summary,
    terminal_count,
    wait_for_file,
    write_agents,
)
from .rig import open_runners, start_server


def scripted(name: str, script: list[dict[str, object]], **extra: object) -> dict[str, object]:
    return {
        "name": name,
        "executor": {"type": "omnigent", "config": {"harness": "scripted", "script": script}},
        **extra,
    }


def ended(events: list[object]) -> bool:
    return terminal_count(events) >= 1  # type: ignore[arg-type]


async def test_a_turn_runs_on_the_runner_and_its_events_on_the_server(tmp_path: Path) -> None:
    server_root = tmp_path / "server"
    write_agents(
        server_root,
        [
            scripted(
                "remote",
                [
                    {"call": "sys_os_shell", "args": {"command": "echo hi > made.txt; pwd"}},
                    {"call": "sys_os_read", "args": {"path": "made.txt"}},
                    {"call": "sys_session_list", "args": {}},
                    {"call": "sys_session_get_info", "args": {}},
                    {"call": "sys_os_write", "args": {"path": "written.txt", "content": "w"}},
                    {"say": "all done here"},
                ],
                policies=[{"name": "no_rm", "type": "deny_tools", "tools": ["sys_os_delete"]}],
                spawn=True,
            )
        ],
    )
    with trio.fail_after(60):
        served = await start_server(server_root)
        try:
            async with open_runners() as runners, OmnigentClient(served.url) as client:
                runner = await runners.start(tmp_path / "laptop", served.url, "laptop")
                session = await client.create_session(agent_name="remote", runner_id="laptop")
                assert session.raw["runner_id"] == "laptop"
                async with trio.open_nursery() as nursery:
                    watch = Watch(client, session.id)
                    await nursery.start(watch.run)
                    await client.send_message(session.id, "go")
                    await watch.wait_for(ended, "the end of the turn")
                    nursery.cancel_scope.cancel()
                statuses = [e.status for e in watch.events if isinstance(e, SessionStatusChanged)]
                assert statuses == ["running", "idle"], summary(watch.events)
                text = "".join(e.delta for e in watch.events if isinstance(e, OutputTextDelta))
                assert text == "all done here"
                items = await client.list_items(session.id)
                outputs = [i for i in items if isinstance(i, FunctionCallOutputItem)]
                shell = json.loads(outputs[0].output)
                # The shell ran in the runner's workspace, never the server's.
                assert shell["stdout"].strip() == str(runner.workspace.resolve())
                assert (runner.workspace / "made.txt").read_text() == "hi\n"
                assert not list(server_root.rglob("made.txt"))
                assert json.loads(outputs[1].output)["content"] == "hi\n"
                # The orchestration tools tell which runner a session is on, and whether
                # it is connected.
                listed = json.loads(outputs[2].output)["sessions"]
                row = next(r for r in listed if r["session_id"] == session.id)
                assert (row["runner_id"], row["runner_online"]) == ("laptop", True)
                info = json.loads(outputs[3].output)
                assert (info["runner_id"], info["runner_online"]) == ("laptop", True)
                # A write runs there too (its policy context names no server directory: it
                # once asked for one, and the turn failed with an internal error).
                assert not outputs[4].output.startswith("Error"), outputs[4].output
                assert (runner.workspace / "written.txt").read_text() == "w"
                answers = [i for i in items if isinstance(i, MessageItem) and i.role == "assistant"]
                assert [item_text(i) for i in answers] == ["all done here"]
        finally:
            await stop(served)


async def test_policies_approvals_interrupts_and_background_shells_on_a_runner(
    tmp_path: Path,
) -> None:
    """The server's policies gate the runner's tools (an ASK waits for a person); an
    interrupt on the server stops the runner's shell; a background shell runs there."""
    server_root = tmp_path / "server"
    write_agents(
        server_root,
        [
            scripted(
                "asker",
                [{"call": "sys_os_shell", "args": {"command": "echo approved > ok.txt"}}],
                policies=[{"name": "ask_shell", "type": "ask_tools", "tools": ["sys_os_shell"]}],
            ),
            scripted(
                "sleeper",
                [
                    {
                        "call": "sys_os_shell",
                        "args": {"command": "echo $$ > sleep.pid; exec sleep 1000"},
                    }
                ],
            ),
            {
                "name": "background",
                "async_enabled": True,
                "executor": {
                    "type": "omnigent",
                    "config": {
                        "harness": "scripted",
                        "turns": [
                            [
                                {
                                    "call": "sys_call_async",
                                    "args": {
                                        "tool": "sys_os_shell",
                                        "args": {"command": "echo bg > bg.txt"},
                                    },
                                }
                            ],
                            [{"say": "read it"}],
                        ],
                    },
                },
            },
        ],
    )
    with trio.fail_after(60):
        served = await start_server(server_root)
        try:
            async with open_runners() as runners, OmnigentClient(served.url) as client:
                runner = await runners.start(tmp_path / "laptop", served.url, "laptop")
                asker = await client.create_session(agent_name="asker", runner_id="laptop")
                sleeper = await client.create_session(agent_name="sleeper", runner_id="laptop")
                background = await client.create_session(
                    agent_name="background", runner_id="laptop"
                )
                async with trio.open_nursery() as nursery:
                    watches = {s.id: Watch(client, s.id) for s in (asker, sleeper, background)}
                    for watch in watches.values():
                        await nursery.start(watch.run)
                    for session in (asker, sleeper, background):
                        await client.send_message(session.id, "go")
                    # The ASK: the shell waits for a person, on the server.
                    await watches[asker.id].wait_for(
                        lambda ev: any(e.type == "response.elicitation_request" for e in ev),
                        "the approval request",
                    )
                    assert not (runner.workspace / "ok.txt").exists()
                    request = next(
                        e
                        for e in watches[asker.id].events
                        if e.type == "response.elicitation_request"
                    )
                    await client.resolve_elicitation(
                        asker.id,
                        request.elicitation_id,
                        "accept",  # type: ignore[attr-defined]
                    )
                    # The interrupt: the runner's shell is killed, the turn ends cancelled.
                    pid = int((await wait_for_file(runner.workspace / "sleep.pid")).strip())
                    await client.interrupt(sleeper.id)
                    for watch in watches.values():
                        await watch.wait_for(lambda ev: terminal_count(ev) >= 1, "each turn's end")
                    await watches[background.id].wait_for(
                        lambda ev: terminal_count(ev) == 2, "the wake-up turn with the result"
                    )
                    nursery.cancel_scope.cancel()
                asked = await client.list_items(asker.id)
                assert (runner.workspace / "ok.txt").exists(), (
                    summary(watches[asker.id].events),
                    asked,
                )
                assert (runner.workspace / "ok.txt").read_text() == "approved\n"
                last = [
                    e for e in watches[sleeper.id].events if isinstance(e, SessionStatusChanged)
                ]
                assert last[-1].status == "cancelled"
                assert read_proc(pid) is None or read_proc(pid).state == "Z"  # type: ignore[union-attr]
                assert (runner.workspace / "bg.txt").read_text() == "bg\n"
                items = await client.list_items(background.id)
                wake = [
                    item_text(i) for i in items if isinstance(i, MessageItem) and i.role == "user"
                ]
                assert "completed — sys_os_shell returned" in wake[-1], wake
        finally:
            await stop(served)
