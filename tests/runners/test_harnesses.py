"""The harnesses on a runner, as separate processes: the ``loop`` harness reaches its model
from the runner, an external harness's process is the runner's (allowed by its operator,
refused otherwise), and a sub-agent's child session inherits its parent's runner."""

from __future__ import annotations

import json
from pathlib import Path

import trio

from omnigent.client import OmnigentClient
from omnigent.model import FunctionCallOutputItem, MessageItem, ResponseFailed, item_text
from omnigent.testing import MockLLM

from ..external_helpers import STDLIB, external
from ..reliability.serve_rig import Watch, stop, summary, terminal_count, write_agents
from .rig import open_runners, start_server


def outputs(items: list[object]) -> list[str]:
    return [i.output for i in items if isinstance(i, FunctionCallOutputItem)]


def answers(items: list[object]) -> list[str]:
    return [item_text(i) for i in items if isinstance(i, MessageItem) and i.role == "assistant"]


async def test_loop_external_and_sub_agents_on_a_runner(tmp_path: Path) -> None:
    mock = MockLLM()
    mock.reply_tool_call("sys_os_shell", {"command": "echo from-the-loop > loop.txt"})
    mock.reply_text("the loop is done")
    server_root = tmp_path / "server"
    with trio.fail_after(90):
        async with mock.serve() as model_url:
            loop = {
                "name": "looper",
                "executor": {
                    "type": "omnigent",
                    "config": {"harness": "loop", "model": "m", "base_url": model_url},
                },
            }
            parent = {
                "name": "parent",
                "async_enabled": True,
                "executor": {
                    "type": "omnigent",
                    "config": {
                        "harness": "scripted",
                        "turns": [
                            [
                                {
                                    "call": "sys_session_send",
                                    "args": {"agent": "helper", "title": "t", "args": "write it"},
                                }
                            ],
                            [{"say": "the child answered"}],
                        ],
                    },
                },
                "tools": {"agents": ["helper"]},
                "sub_agents": [
                    {
                        "name": "helper",
                        "executor": {
                            "type": "omnigent",
                            "config": {
                                "harness": "scripted",
                                "script": [
                                    {
                                        "call": "sys_os_shell",
                                        "args": {"command": "echo child > child.txt"},
                                    },
                                    {"say": "written"},
                                ],
                            },
                        },
                    }
                ],
            }

            def shell_in(name: str, cwd: str) -> dict[str, object]:
                return {
                    "name": name,
                    "os_env": {"cwd": cwd},
                    "executor": {
                        "type": "omnigent",
                        "config": {
                            "harness": "scripted",
                            "script": [{"call": "sys_os_shell", "args": {"command": "pwd"}}],
                        },
                    },
                }

            agents = [loop, external("ext"), parent, shell_in("deep", "deep/er")]
            write_agents(server_root, [*agents, shell_in("escaper", "../outside")])
            served = await start_server(server_root)
            try:
                async with open_runners() as runners, OmnigentClient(served.url) as client:
                    allow = ["--allow-command", STDLIB[0], "--allow-model-url", model_url]
                    laptop = await runners.start(tmp_path / "laptop", served.url, "laptop", *allow)
                    await runners.start(tmp_path / "strict", served.url, "strict")
                    sessions = [
                        await client.create_session(agent_name="looper", runner_id="laptop"),
                        await client.create_session(agent_name="ext", runner_id="laptop"),
                        await client.create_session(agent_name="ext", runner_id="strict"),
                        await client.create_session(agent_name="parent", runner_id="laptop"),
                        await client.create_session(agent_name="deep", runner_id="laptop"),
                        await client.create_session(agent_name="escaper", runner_id="laptop"),
                    ]
                    prompts = ["go", "env", "env", "go", "go", "go"]
                    ends = [1, 1, 1, 2, 1, 1]  # the parent wakes up with its child's result
                    async with trio.open_nursery() as nursery:
                        watches = [Watch(client, s.id) for s in sessions]
                        for watch, session, prompt in zip(watches, sessions, prompts, strict=True):
                            await nursery.start(watch.run)
                            await client.send_message(session.id, prompt)
                        for watch, count in zip(watches, ends, strict=True):
                            await watch.wait_for(
                                lambda ev, n=count: terminal_count(ev) >= n, "the turns' ends"
                            )
                        nursery.cancel_scope.cancel()
                    looper, ext, _, parent_session, deep, escaper = sessions
                    workspace = laptop.workspace.resolve()
                    # loop: the model was reached from the runner; its tool ran there.
                    assert (laptop.workspace / "loop.txt").read_text() == "from-the-loop\n"
                    assert answers(await client.list_items(looper.id)) == ["the loop is done"]
                    assert len(mock.requests) == 2
                    # external: its process ran in the runner's workspace.
                    said = answers(await client.list_items(ext.id))
                    assert json.loads(said[-1])["cwd"] == str(workspace), said
                    # a runner whose operator did not allow the program refuses it.
                    [failed] = [e for e in watches[2].events if isinstance(e, ResponseFailed)]
                    assert "omnigent runner --allow-command" in failed.error.message
                    # the sub-agent's child inherited the runner and worked there.
                    children, _ = await client.list_sessions(parent_session_id=parent_session.id)
                    assert [c.raw["runner_id"] for c in children] == ["laptop"]
                    assert (laptop.workspace / "child.txt").read_text() == "child\n"
                    items = await client.list_items(children[0].id)
                    assert any(isinstance(i, FunctionCallOutputItem) for i in items)
                    # os_env.cwd is resolved inside the runner's workspace, never outside.
                    [shell] = outputs(await client.list_items(deep.id))
                    assert json.loads(shell)["stdout"].strip() == str(workspace / "deep" / "er")
                    [escaped] = outputs(await client.list_items(escaper.id))
                    assert escaped.startswith("Error: ") and "outside" in escaped, escaped
                    assert not (laptop.root / "outside").exists()
                    assert answers(await client.list_items(parent_session.id))[-1] == (
                        "the child answered"
                    ), summary(watches[3].events)
            finally:
                await stop(served)
