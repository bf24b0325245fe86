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

from ..reliability.serve_rig import Watch, stop, summary, terminal_count, write_agents
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
                    {"say": "all done here"},
                ],
                policies=[{"name": "no_rm", "type": "deny_tools", "tools": ["sys_os_delete"]}],
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
                answers = [i for i in items if isinstance(i, MessageItem) and i.role == "assistant"]
                assert [item_text(i) for i in answers] == ["all done here"]
        finally:
            await stop(served)
