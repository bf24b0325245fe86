"""A sandboxed session on a runner, with real bubblewrap on the runner's side: its shell,
its terminal and its stdio MCP server run confined there (the runner's home, its
``$OMNIGENT_HOME`` and the workspace's dotfiles hidden, nothing written outside), and a
sub-agent's child without a sandbox of its own runs in its parent's."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
import trio

from omnigent.client import OmnigentClient
from omnigent.model import FunctionCallOutputItem

from ..external_helpers import HARNESSES
from ..reliability.serve_rig import (
    Watch,
    stop,
    summary,
    terminal_count,
    wait_for_file,
    write_agents,
)
from ..sandbox.helpers import require_bwrap
from ..terminal_helpers import BASH
from .rig import open_runners, start_server

pytest.importorskip("mcp")

SECRET = "PRIVATE-KEY-0123"
PROBE = "echo out > {outside}/{leak}; cat ~/.ssh/id_ed25519 .env; echo in > {made} && echo made"


def outputs(items: list[Any]) -> list[str]:
    return [i.output for i in items if isinstance(i, FunctionCallOutputItem)]


async def test_a_sandboxed_session_runs_confined_on_its_runner(tmp_path: Path) -> None:
    require_bwrap()
    laptop = tmp_path / "laptop"
    workspace, outside = laptop / "workspace", tmp_path / "outside"
    for folder in (laptop / "home" / ".ssh", workspace, outside):
        folder.mkdir(parents=True)
    (laptop / "home" / ".ssh" / "id_ed25519").write_text(SECRET + "\n")
    (workspace / ".env").write_text("TOKEN=" + SECRET + "\n")
    shell = PROBE.format(outside=outside, leak="leak", made="made.txt")
    pane = PROBE.format(outside=outside, leak="pane-leak", made="pane.txt") + " > pane.out 2>&1"
    kid = PROBE.format(outside=outside, leak="kid-leak", made="kid.txt")
    calc = [sys.executable, str(HARNESSES / "mcp_server.py")]
    boxed = {
        "name": "boxed",
        "async_enabled": True,
        "os_env": {"sandbox": {"type": "linux_bwrap"}},
        "terminals": {"bash": BASH},
        "mcp_servers": [{"name": "calc", "command": calc}],
        "tools": {"agents": ["kid"]},
        "executor": {
            "type": "omnigent",
            "config": {
                "harness": "scripted",
                "turns": [
                    [
                        {"call": "sys_os_shell", "args": {"command": shell}},
                        {"call": "mcp__calc__where", "args": {"name": "OMNIGENT_HOME"}},
                        {
                            "call": "sys_terminal_launch",
                            "args": {"terminal": "bash", "session": "t"},
                        },
                        {
                            "call": "sys_terminal_send",
                            "args": {"terminal": "bash", "session": "t", "text": pane},
                        },
                        {
                            "call": "sys_session_send",
                            "args": {"agent": "kid", "title": "k", "args": "go"},
                        },
                    ],
                    [{"say": "kid done"}],
                ],
            },
        },
        "sub_agents": [
            {
                "name": "kid",
                "executor": {
                    "type": "omnigent",
                    "config": {
                        "harness": "scripted",
                        "script": [{"call": "sys_os_shell", "args": {"command": kid}}],
                    },
                },
            }
        ],
    }
    server_root = tmp_path / "server"
    write_agents(server_root, [boxed])
    with trio.fail_after(90):
        served = await start_server(server_root)
        try:
            async with open_runners() as runners, OmnigentClient(served.url) as client:
                allow = ["--allow-command", "bash", "--allow-command", sys.executable]
                allow += ["--allow-env", "PS1"]
                await runners.start(laptop, served.url, "laptop", *allow)
                session = await client.create_session(agent_name="boxed", runner_id="laptop")
                async with trio.open_nursery() as nursery:
                    watch = Watch(client, session.id)
                    await nursery.start(watch.run)
                    await client.send_message(session.id, "go")
                    await watch.wait_for(lambda ev: terminal_count(ev) == 2, "the wake-up turn")
                    nursery.cancel_scope.cancel()
                said = outputs(await client.list_items(session.id))
                shell_out, where = json.loads(said[0]), said[1]
                assert shell_out["sandbox"] == "linux_bwrap", summary(watch.events)
                assert shell_out["stdout"].endswith("made\n")
                # The MCP server ran in the workspace, inside the sandbox (no
                # $OMNIGENT_HOME in its environment).
                assert where == f"{workspace.resolve()} -", said
                assert (await wait_for_file(workspace / "pane.out")).endswith("made\n")
                children, _ = await client.list_sessions(parent_session_id=session.id)
                [kid_out] = outputs(await client.list_items(children[0].id))
                assert json.loads(kid_out)["sandbox"] == "linux_bwrap"
                seen = json.dumps(said) + (workspace / "pane.out").read_text() + kid_out
                assert SECRET not in seen
                assert list(outside.iterdir()) == []
                for made in ("made.txt", "pane.txt", "kid.txt"):
                    assert (workspace / made).read_text() == "in\n"
        finally:
            await stop(served)
