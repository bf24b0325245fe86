"""Stdio MCP servers of a runner-bound session run on the runner (its workspace, its
processes); their tools pass the server's tool path, their elicitations are asked on the
server; one that fails to start fails the turn with its stderr; the runner refuses a
program its operator did not allow."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
import trio

from omnigent.client import OmnigentClient
from omnigent.model import FunctionCallOutputItem, ResponseFailed

from ..external_helpers import HARNESSES
from ..reliability.serve_rig import Watch, stop, summary, terminal_count, write_agents
from .rig import open_runners, start_server
from .test_faults import alive

pytest.importorskip("mcp")

SERVER = [sys.executable, str(HARNESSES / "mcp_server.py")]


def agent(name: str, *turns: list[dict[str, Any]], **server: Any) -> dict[str, Any]:
    config = {"harness": "scripted", "turns": list(turns)}
    return {
        "name": name,
        "executor": {"type": "omnigent", "config": config},
        "mcp_servers": [{"name": "calc", "command": SERVER, **server}],
    }


def failures(events: list[Any]) -> list[Any]:
    return [e for e in events if isinstance(e, ResponseFailed)]


async def test_stdio_mcp_servers_run_on_the_runner(tmp_path: Path) -> None:
    server_root = tmp_path / "server"
    script = [
        {"call": "mcp__calc__where", "args": {"name": "CALC_MODE"}},
        {"call": "mcp__calc__add", "args": {"a": 20, "b": 22}},
        {"call": "mcp__calc__confirm", "args": {"what": "delete"}},
        {"say": "done"},
    ]
    env = {"MCP_PID_FILE": "mcp.pid", "CALC_MODE": "remote"}
    write_agents(
        server_root,
        [
            agent(
                "calc-user", script, [{"call": "mcp__calc__add", "args": {"a": 1, "b": 2}}], env=env
            ),
            agent("broken", [{"say": "never"}], command=[*SERVER, "--fail"]),
        ],
    )
    with trio.fail_after(90):
        served = await start_server(server_root)
        try:
            async with open_runners() as runners, OmnigentClient(served.url) as client:
                allow = ["--allow-command", sys.executable, "--allow-env", "MCP_PID_FILE"]
                allow += ["--allow-env", "CALC_*"]
                runner = await runners.start(tmp_path / "laptop", served.url, "laptop", *allow)
                stranger = await runners.start(tmp_path / "box", served.url, "box")
                session = await client.create_session(agent_name="calc-user", runner_id="laptop")
                broken = await client.create_session(agent_name="broken", runner_id="laptop")
                refused = await client.create_session(agent_name="calc-user", runner_id="box")
                async with trio.open_nursery() as nursery:
                    watches = [Watch(client, s.id) for s in (session, broken, refused)]
                    for watch in watches:
                        await nursery.start(watch.run)
                    for s in (session, broken, refused):
                        await client.send_message(s.id, "go")
                    # The server's elicitation, asked for the runner's MCP server.
                    await watches[0].wait_for(
                        lambda ev: any(e.type == "response.elicitation_request" for e in ev),
                        "the MCP server's question",
                    )
                    asked = next(
                        e for e in watches[0].events if e.type == "response.elicitation_request"
                    )
                    assert asked.params.phase == "mcp_elicitation"  # type: ignore[attr-defined]
                    await client.resolve_elicitation(
                        session.id,
                        asked.elicitation_id,  # type: ignore[attr-defined]
                        "accept",
                        {"ok": True},
                    )
                    for watch in watches:
                        await watch.wait_for(lambda ev: terminal_count(ev) == 1, "each turn's end")
                    nursery.cancel_scope.cancel()
                assert not failures(watches[0].events), summary(watches[0].events)
                items = await client.list_items(session.id)
                outputs = [i.output for i in items if isinstance(i, FunctionCallOutputItem)]
                workspace = runner.workspace.resolve()
                assert outputs == [f"{workspace} remote", "42", "accept: delete (True)"]
                # Its process is the runner's, in the runner's workspace.
                pid = int((runner.workspace / "mcp.pid").read_text())
                assert alive(pid)
                assert not list(server_root.rglob("mcp.pid"))
                # A server that does not start fails the turn, naming it and its stderr.
                [failed] = failures(watches[1].events)
                assert failed.error.code == "mcp_server_failed"
                assert "cannot open the abacus" in failed.error.message
                # A runner whose operator did not allow the program refuses it.
                [refusal] = failures(watches[2].events)
                assert "omnigent runner --allow-command" in refusal.error.message, refusal
                assert not (stranger.workspace / "mcp.pid").exists()
                # kill -9 of the runner: its MCP server goes with it (its stdin closes);
                # the next runner starts it again for the session's next call.
                await runner.kill_9()
                await runners.start(tmp_path / "laptop", served.url, "laptop", *allow)
                while alive(pid):
                    await trio.sleep(0.05)
                async with trio.open_nursery() as nursery:
                    watch = Watch(client, session.id)
                    await nursery.start(watch.run)
                    await client.send_message(session.id, "again")
                    await watch.wait_for(lambda ev: terminal_count(ev) == 2, "the next turn")
                    nursery.cancel_scope.cancel()
                items = await client.list_items(session.id)
                outputs = [i.output for i in items if isinstance(i, FunctionCallOutputItem)]
                assert outputs[-1] == "3", summary(watch.events)
                again = int((runner.workspace / "mcp.pid").read_text())
                assert again != pid and alive(again)
                # The session's end stops its server on the runner.
                await client.delete_session(session.id)
                while alive(again):
                    await trio.sleep(0.05)
        finally:
            await stop(served)
