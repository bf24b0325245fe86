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


def asked(events: list[Any]) -> list[Any]:
    return [e for e in events if e.type == "response.elicitation_request"]


async def wait_until_gone(pid: int) -> None:
    """Return once ``pid`` has exited (polled; the caller's deadline bounds it)."""
    while alive(pid):
        await trio.sleep(0.05)


async def test_stdio_mcp_servers_run_on_the_runner(tmp_path: Path) -> None:
    """Where and while they run. A session's MCP servers live while it has work: they
    close when it goes idle (``mcp/close``, docs/mcp.md), so each check that one runs
    is made while a call of it waits on a person (``confirm``'s elicitation).

    Regression: the test checked the server alive *after* the turn ended, racing the
    idle close; it failed when the runner was quicker (2 of 5 runs under load)."""
    server_root = tmp_path / "server"
    first = [
        {"call": "mcp__calc__where", "args": {"name": "CALC_MODE"}},
        {"call": "mcp__calc__add", "args": {"a": 20, "b": 22}},
        {"call": "mcp__calc__confirm", "args": {"what": "delete"}},
        {"say": "done"},
    ]
    killed = [{"call": "mcp__calc__confirm", "args": {"what": "wait"}}, {"say": "never"}]
    last = [{"call": "mcp__calc__add", "args": {"a": 1, "b": 2}}]
    env = {"MCP_PID_FILE": "mcp.pid", "CALC_MODE": "remote"}
    write_agents(
        server_root,
        [
            agent("calc-user", first, killed, last, env=env),
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
                    await watches[0].wait_for(lambda ev: len(asked(ev)) == 1, "its question")
                    [question] = asked(watches[0].events)
                    assert question.params.phase == "mcp_elicitation"
                    # Its process is the runner's, in the runner's workspace, and runs
                    # while its call waits.
                    pid = int((runner.workspace / "mcp.pid").read_text())
                    assert alive(pid)
                    assert not list(server_root.rglob("mcp.pid"))
                    await client.resolve_elicitation(
                        session.id, question.elicitation_id, "accept", {"ok": True}
                    )
                    for watch in watches:
                        await watch.wait_for(lambda ev: terminal_count(ev) == 1, "each turn's end")
                    nursery.cancel_scope.cancel()
                assert not failures(watches[0].events), summary(watches[0].events)
                items = await client.list_items(session.id)
                outputs = [i.output for i in items if isinstance(i, FunctionCallOutputItem)]
                workspace = runner.workspace.resolve()
                assert outputs == [f"{workspace} remote", "42", "accept: delete (True)"]
                # The session went idle: its server stops on the runner (mcp/close).
                await wait_until_gone(pid)
                # A server that does not start fails the turn, naming it and its stderr.
                [failed] = failures(watches[1].events)
                assert failed.error.code == "mcp_server_failed"
                assert "cannot open the abacus" in failed.error.message
                # A runner whose operator did not allow the program refuses it.
                [refusal] = failures(watches[2].events)
                assert "omnigent runner --allow-command" in refusal.error.message, refusal
                assert not (stranger.workspace / "mcp.pid").exists()
                async with trio.open_nursery() as nursery:
                    watch = Watch(client, session.id)
                    await nursery.start(watch.run)
                    # The next turn starts it again; kill -9 of the runner mid-call
                    # takes it along (its stdin closes) and fails the turn.
                    await client.send_message(session.id, "again")
                    await watch.wait_for(lambda ev: len(asked(ev)) == 2, "its next question")
                    killed_pid = int((runner.workspace / "mcp.pid").read_text())
                    assert killed_pid != pid and alive(killed_pid)
                    await runner.kill_9()
                    await wait_until_gone(killed_pid)
                    # The next runner takes the name over: the old link, and the turn on
                    # it, end; the turn after starts the server there.
                    await runners.start(tmp_path / "laptop", served.url, "laptop", *allow)
                    await watch.wait_for(lambda ev: terminal_count(ev) == 2, "the failure")
                    assert [f.error.code for f in failures(watch.events)] == [
                        "runner_disconnected"
                    ], summary(watch.events)
                    await client.send_message(session.id, "last")
                    await watch.wait_for(lambda ev: terminal_count(ev) == 3, "the last turn")
                    nursery.cancel_scope.cancel()
                items = await client.list_items(session.id)
                outputs = [i.output for i in items if isinstance(i, FunctionCallOutputItem)]
                assert outputs[-1] == "3", summary(watch.events)
                assert int((runner.workspace / "mcp.pid").read_text()) != killed_pid
        finally:
            await stop(served)
