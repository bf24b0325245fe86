"""Terminals of a runner-bound session: the panes run on the runner (its tmux server, its
workspace), their life and events stay on the server; a session stopped or deleted ends
its panes there, and a runner stopped (SIGTERM) its whole tmux server; a runner killed
outright leaves its panes to the next runner, which ends them; the runner refuses what
the session's spec does not declare."""

from __future__ import annotations

import json
import os
import secrets
import signal
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio

from omnigent.client import OmnigentClient
from omnigent.model import FunctionCallOutputItem
from omnigent.rpc import INVALID_PARAMS, RpcError
from omnigent.runner import PANE_FAILED, open_runner_place
from omnigent.runner._panes import LinkPanes
from omnigent.runner._specs import SessionSpecs
from omnigent.spec import AgentSpec

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
from .rig import (
    Runner,
    open_runners,
    pane_servers,
    processes_where,
    start_server,
    wait_for_no_pane_server,
)
from .test_faults import alive


def term(tool: str, session: str, **args: Any) -> dict[str, Any]:
    return {
        "call": f"sys_terminal_{tool}",
        "args": {"terminal": "bash", "session": session, **args},
    }


def resource_events(events: list[Any], kind: str) -> list[str]:
    """The ids of the terminals created (or deleted), in order."""
    return [
        e.resource["id"] if kind == "created" else e.resource_id
        for e in events
        if e.type == f"session.resource.{kind}"
    ]


ALLOW = ["--allow-command", "bash", "--allow-env", "PS1"]  # BASH sets PS1

AGENT = {
    "name": "term",
    "executor": {
        "type": "omnigent",
        "config": {
            "harness": "scripted",
            "turns": [
                [
                    term("launch", "one", cwd="sub"),
                    term("send", "one", text="echo $$ > ../one.pid; pwd > ../where.txt"),
                    term("launch", "two"),
                    term("send", "two", text="echo $$ > two.pid; echo marker-$((6 * 7))"),
                    {"say": "launched"},
                ],
                [
                    term("read", "one"),
                    term("close", "one"),
                    {"call": "sys_terminal_list", "args": {}},
                    {"say": "closed"},
                ],
            ],
        },
    },
    "terminals": {"bash": BASH},
}


async def test_terminals_run_on_the_runner_and_end_with_it(tmp_path: Path) -> None:
    server_root = tmp_path / "server"
    write_agents(server_root, [AGENT])
    with trio.fail_after(90):
        served = await start_server(server_root, "--runner-timeout", "3")
        try:
            async with (
                open_runners() as runners,
                OmnigentClient(served.url) as client,
                httpx.AsyncClient(base_url=served.url) as http,
            ):
                laptop = tmp_path / "laptop"
                (laptop / "workspace" / "sub").mkdir(parents=True)
                runner = await runners.start(laptop, served.url, "laptop", *ALLOW)
                workspace = runner.workspace.resolve()
                session = await client.create_session(agent_name="term", runner_id="laptop")
                async with trio.open_nursery() as nursery:
                    watch = Watch(client, session.id)
                    await nursery.start(watch.run)
                    await client.send_message(session.id, "go")
                    await watch.wait_for(lambda ev: terminal_count(ev) == 1, "the first turn")
                    assert watch.events[-1].type == "session.status", summary(watch.events)
                    one = int((await wait_for_file(runner.workspace / "one.pid")).strip())
                    two = int((await wait_for_file(runner.workspace / "two.pid")).strip())
                    # The panes are the runner's: in its workspace, not the server's.
                    assert (await wait_for_file(runner.workspace / "where.txt")).strip() == str(
                        workspace / "sub"
                    )
                    assert Path(os.readlink(f"/proc/{two}/cwd")) == workspace
                    assert not list(server_root.rglob("*.pid"))
                    created = resource_events(watch.events, "created")
                    assert created == ["terminal_bash_one", "terminal_bash_two"]
                    base = f"/v1/sessions/{session.id}"
                    listed = (await http.get(f"{base}/resources")).json()["data"]
                    assert [r["id"] for r in listed] == created
                    # A client reads a screen through the server, from the runner's pane.
                    url = f"{base}/resources/terminal_bash_two/screen"
                    while "marker-42" not in (await http.get(url)).json()["screen"]:
                        await trio.sleep(0.05)

                    await client.send_message(session.id, "close one")
                    await watch.wait_for(lambda ev: terminal_count(ev) == 2, "the second turn")
                    assert resource_events(watch.events, "deleted") == ["terminal_bash_one"]
                    assert not alive(one)
                    outputs = [
                        i.output
                        for i in await client.list_items(session.id)
                        if isinstance(i, FunctionCallOutputItem)
                    ]
                    assert "$ " in json.loads(outputs[-3])["screen"], outputs
                    assert [t["session"] for t in json.loads(outputs[-1])] == ["two"]

                    # kill -9 of the runner: the server's terminal ends with the link
                    # (one deleted event); the pane outlives the runner until the next
                    # runner on this machine ends it.
                    await runner.kill_9()
                    await watch.wait_for(
                        lambda ev: len(resource_events(ev, "deleted")) == 2, "the second's end"
                    )
                    nursery.cancel_scope.cancel()
                assert resource_events(watch.events, "deleted")[-1] == "terminal_bash_two"
                assert (await http.get(f"{base}/resources")).json()["data"] == []
                assert alive(two)
                await runners.start(laptop, served.url, "laptop", *ALLOW)
                assert not alive(two)
        finally:
            await stop(served)


def sleeper(seconds: str) -> dict[str, Any]:
    """An agent whose one turn opens a terminal running ``sleep seconds`` (a command line
    no other test runs, found in ``/proc`` — inside a sandbox's pid namespace too)."""
    return {
        "name": "pane",
        "executor": {
            "type": "omnigent",
            "config": {
                "harness": "scripted",
                "turns": [[term("launch", "s"), term("send", "s", text=f"sleep {seconds}")]],
            },
        },
        "terminals": {"bash": BASH},
    }


async def open_pane(client: OmnigentClient, runner: Runner, seconds: str) -> tuple[str, int]:
    """A new session on ``runner`` whose terminal runs ``sleep seconds``; its id and the
    sleep's pid, once the pane's server is up."""
    session = await client.create_session(agent_name="pane", runner_id=runner.name)
    async with trio.open_nursery() as nursery:
        watch = Watch(client, session.id)
        await nursery.start(watch.run)
        await client.send_message(session.id, "go")
        await watch.wait_for(lambda ev: terminal_count(ev) == 1, "the launch")
        nursery.cancel_scope.cancel()
    command = [b"sleep", seconds.encode(), b""]
    while not (sleeping := processes_where(lambda argv: argv == command)):
        await trio.sleep(0.02)  # typed into the pane: nothing announces it
    assert pane_servers(runner.home)
    return session.id, sleeping[0]


@pytest.mark.parametrize("boxed", [False, True], ids=["plain", "sandboxed"])
async def test_a_runners_pane_server_ends_with_the_sessions_and_with_the_runner(
    tmp_path: Path, boxed: bool
) -> None:
    """Stopping a session, deleting one, and stopping the runner with SIGTERM with a
    terminal open each leave no pane process and no tmux server of the runner's (a
    runner killed at the end of a test used to leave its server, and the pane in it)."""
    seconds = f"3600.{secrets.randbelow(10**9)}"
    agent = sleeper(seconds)
    if boxed:
        require_bwrap()
        agent["os_env"] = {"sandbox": {"type": "linux_bwrap"}}
    server_root = tmp_path / "server"
    write_agents(server_root, [agent])
    with trio.fail_after(60):
        served = await start_server(server_root)
        try:
            async with open_runners() as runners, OmnigentClient(served.url) as client:
                runner = await runners.start(tmp_path / "laptop", served.url, "laptop", *ALLOW)
                stopped, pid = await open_pane(client, runner, seconds)
                await client.stop_session(stopped)
                await wait_for_no_pane_server(runner.home)
                assert not alive(pid)
                deleted, pid = await open_pane(client, runner, seconds)
                await client.delete_session(deleted)
                await wait_for_no_pane_server(runner.home)
                assert not alive(pid)
                last, pid = await open_pane(client, runner, seconds)
                await runner.stop(how=signal.SIGTERM)
                assert runner.process.returncode == 0, runner.lines
                assert not alive(pid)
                await wait_for_no_pane_server(runner.home)
                # The server's terminal ends with the link, as one whose pane exited.
                async with trio.open_nursery() as nursery:
                    watch = Watch(client, last)
                    await nursery.start(watch.run)
                    await watch.wait_for(lambda ev: resource_events(ev, "deleted"), "its end")
                    nursery.cancel_scope.cancel()
        finally:
            await stop(served)


async def test_a_runner_runs_only_the_panes_a_session_declares(tmp_path: Path) -> None:
    """``panes/*`` requests the server might send beyond the spec are refused."""
    spec = AgentSpec.from_dict({**AGENT, "terminals": {"bash": BASH}})
    (tmp_path / "ws").mkdir()
    with trio.fail_after(30):
        async with (
            open_runner_place(tmp_path / "ws", tmp_path / "home") as place,
            trio.open_nursery() as nursery,
        ):
            specs = SessionSpecs(place)
            specs.remember("s1", spec)
            panes = LinkPanes(place, specs, lambda: nursery)
            start = {
                "session_id": "s1",
                "session_name": "omnigent_test1",
                "cwd": str(tmp_path / "ws"),
                "command": "bash",
                "args": BASH["args"],
                "env": BASH["env"],
            }
            for bad in (
                {"command": "sh"},
                {"args": []},
                {"session_id": "s2"},
                {"cwd": str(tmp_path)},
                {"session_name": "a;b"},
            ):
                with pytest.raises(RpcError) as refused:
                    await panes.handle("panes/start", {**start, **bad})
                assert refused.value.code == INVALID_PARAMS or "outside" in refused.value.message
            answer = await panes.handle("panes/start", start)
            pane = {"pane_id": answer["pane_id"], "scrollback": 0}
            await panes.handle("panes/capture", {"session_id": "s1", **pane})
            with pytest.raises(RpcError) as other:
                await panes.handle("panes/capture", {"session_id": "s2", **pane})
            assert other.value.code == INVALID_PARAMS
            outside = {"session_id": "s1", "cwd": None, "spec_cwd": None, "raw": "/etc"}
            with pytest.raises(RpcError) as escaped:
                await panes.handle("panes/directory", outside)
            assert escaped.value.code == PANE_FAILED
            assert escaped.value.data == {"code": "tool_error"}
            assert alive(answer["pid"])
            await panes.aclose()  # the link ended: its panes end
            assert not alive(answer["pid"])
