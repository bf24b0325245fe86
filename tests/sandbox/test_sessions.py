"""A sandboxed session, end to end with real bubblewrap: every process it starts is
confined the same way — the shell tool, a background shell, a terminal — the file
tools enforce the same sets, and stopping the session leaves nothing behind."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio

import omnigent
from omnigent.harnesses.base import TurnContext, TurnRequest
from omnigent.testing import RecordingHarness, run_turn

from ..terminal_helpers import BASH, ok, read_until, run_ok, target
from .helpers import require_bwrap

SECRET = "PRIVATE-KEY-0123"
ENV_SECRET = "env-secret-4567"
# Writes outside, reads of the home's secret and the environment's: what leaks shows.
PROBE = (
    "echo out > {outside}/leak; cat ~/.ssh/id_ed25519; echo $OMNIGENT_TEST_SECRET; "
    "cat .env; echo inside > made.txt && echo made"
)


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Path]]:
    require_bwrap()
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text(SECRET + "\n")
    workspace = tmp_path / "work"
    workspace.mkdir()
    (workspace / ".env").write_text("TOKEN=" + SECRET + "\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("OMNIGENT_TEST_SECRET", ENV_SECRET)
    yield {"home": home, "workspace": workspace, "outside": outside}


async def sandboxed_session(
    rt: omnigent.Runtime, recorder: RecordingHarness, workspace: Path, **spec: Any
) -> str:
    rt.register_harness("recorder", recorder.factory)
    agent = await rt.create_agent(
        {
            "name": "boxed",
            "executor": {"type": "omnigent", "config": {"harness": "recorder"}},
            "os_env": {"cwd": str(workspace), "sandbox": {"type": "linux_bwrap"}},
            **spec,
        }
    )
    return (await rt.create_session(agent.id)).id


def confined(output: str, world: dict[str, Path]) -> None:
    """What PROBE showed: nothing leaked, the workspace written."""
    assert SECRET not in output and ENV_SECRET not in output
    assert not (world["outside"] / "leak").exists()
    assert (world["workspace"] / "made.txt").read_text() == "inside\n"


async def test_the_shell_tool_runs_confined(
    rt: omnigent.Runtime, recorder: RecordingHarness, world: dict[str, Path]
) -> None:
    session = await sandboxed_session(rt, recorder, world["workspace"])
    seen: dict[str, Any] = {}

    async def body(request: TurnRequest, ctx: TurnContext) -> None:
        command = PROBE.format(outside=world["outside"])
        seen["shell"] = ok(await ctx.call_tool("sys_os_shell", {"command": command}))

    recorder.body = body
    with trio.fail_after(30):
        await run_ok(rt, session)
    shell = seen["shell"]
    assert shell["sandbox"] == "linux_bwrap" and shell["stdout"].endswith("made\n")
    confined(json.dumps(shell), world)


async def test_a_background_shell_runs_confined(
    rt: omnigent.Runtime, recorder: RecordingHarness, world: dict[str, Path]
) -> None:
    session = await sandboxed_session(rt, recorder, world["workspace"], async_enabled=True)
    seen: dict[str, Any] = {}

    async def body(request: TurnRequest, ctx: TurnContext) -> None:
        command = PROBE.format(outside=world["outside"])
        shell = {"tool": "sys_os_shell", "args": {"command": command}}
        ok(await ctx.call_tool("sys_call_async", shell))
        with trio.fail_after(20):
            while not (inbox := await ctx.call_tool("sys_read_inbox", {})).startswith("[System"):
                await trio.sleep(0.05)
        seen["inbox"] = inbox

    recorder.body = body
    with trio.fail_after(30):
        await run_ok(rt, session)
    assert "completed" in seen["inbox"] and "made" in seen["inbox"]
    confined(seen["inbox"], world)


async def test_a_terminal_runs_confined(
    rt: omnigent.Runtime, recorder: RecordingHarness, world: dict[str, Path]
) -> None:
    session = await sandboxed_session(rt, recorder, world["workspace"], terminals={"bash": BASH})
    seen: dict[str, Any] = {}

    async def body(request: TurnRequest, ctx: TurnContext) -> None:
        ok(await ctx.call_tool("sys_terminal_launch", target()))
        command = PROBE.format(outside=world["outside"]) + "; echo DONE$((1 + 1))"
        ok(await ctx.call_tool("sys_terminal_send", target(text=command)))
        seen["screen"] = (await read_until(ctx, "DONE2"))["screen"]
        ok(await ctx.call_tool("sys_terminal_close", target()))

    recorder.body = body
    with trio.fail_after(30):
        await run_ok(rt, session)
    assert "made" in seen["screen"]
    confined(seen["screen"], world)


async def test_the_file_tools_enforce_the_same_sets(
    rt: omnigent.Runtime, recorder: RecordingHarness, world: dict[str, Path]
) -> None:
    home = world["home"]
    (home / ".databrickscfg").write_text("[DEFAULT]\n")
    (home / ".ssh" / "known_hosts").write_text("")
    sandbox = {
        "type": "linux_bwrap",
        "read_paths": ["~/.databrickscfg"],
        "write_files": ["~/.ssh/known_hosts"],
    }
    rt.register_harness("recorder", recorder.factory)
    agent = await rt.create_agent(
        {
            "name": "files",
            "executor": {"type": "omnigent", "config": {"harness": "recorder"}},
            "os_env": {"cwd": str(world["workspace"]), "sandbox": sandbox},
        }
    )
    session = (await rt.create_session(agent.id)).id
    seen: dict[str, str] = {}

    async def body(request: TurnRequest, ctx: TurnContext) -> None:
        calls = {
            "dotenv": ("sys_os_read", {"path": ".env"}),
            "link": ("sys_os_read", {"path": "link"}),
            "granted": ("sys_os_read", {"path": str(home / ".databrickscfg")}),
            "key": ("sys_os_read", {"path": str(home / ".ssh" / "id_ed25519")}),
            "readonly": ("sys_os_write", {"path": str(home / ".databrickscfg"), "content": "x"}),
            "hosts": ("sys_os_write", {"path": str(home / ".ssh/known_hosts"), "content": "h\n"}),
            "new_dotfile": ("sys_os_write", {"path": ".git/config", "content": "x"}),
        }
        for name, (tool, args) in calls.items():
            seen[name] = await ctx.call_tool(tool, args)

    (world["workspace"] / "link").symlink_to(".env")
    recorder.body = body
    with trio.fail_after(30):
        await run_ok(rt, session)
    assert "hidden by the sandbox" in seen["dotenv"] and "hidden by the sandbox" in seen["link"]
    assert json.loads(seen["granted"])["content"] == "[DEFAULT]\n"
    assert "outside the working directory" in seen["key"] and SECRET not in seen["key"]
    assert "read-only in the sandbox" in seen["readonly"]
    assert json.loads(seen["hosts"])["bytes_written"] == 2
    assert (home / ".ssh" / "known_hosts").read_text() == "h\n"
    assert "hidden by the sandbox" in seen["new_dotfile"]


def _procs_with(marker: str) -> list[int]:
    """Host pids whose command line holds ``marker`` (its spaces: argument breaks)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as cmdline:
                if marker.replace(" ", "\0").encode() in cmdline.read():
                    found.append(int(entry))
        except OSError:
            continue
    return found


async def _wait_for(predicate: Any, timeout: float = 15) -> None:
    with trio.fail_after(timeout):
        while not predicate():
            await trio.sleep(0.05)


# Thirty children that leave the process group (setsid), a double-forked daemon, and
# a small fork tree; then the command waits. Their marker is a sleep time no one else
# uses.
ESCAPES = (
    "for i in $(seq 30); do setsid sleep 4321.$i & done; "
    "(setsid sleep 4322 &); "
    "sh -c 'sleep 4323 & sleep 4323 & sh -c \"sleep 4323 & wait\" & wait' & "
    "echo started; sleep 4324"
)


async def test_stop_session_leaves_no_process_behind(
    rt: omnigent.Runtime, recorder: RecordingHarness, world: dict[str, Path]
) -> None:
    session = await sandboxed_session(
        rt, recorder, world["workspace"], async_enabled=True, terminals={"bash": BASH}
    )

    async def body(request: TurnRequest, ctx: TurnContext) -> None:
        shell = {"tool": "sys_os_shell", "args": {"command": ESCAPES}}
        ok(await ctx.call_tool("sys_call_async", shell))
        ok(await ctx.call_tool("sys_terminal_launch", target()))
        escape = "setsid sleep 4325 & (setsid sleep 4326 &)"
        ok(await ctx.call_tool("sys_terminal_send", target(text=escape)))

    recorder.body = body
    with trio.fail_after(30):
        await run_ok(rt, session)
        await _wait_for(lambda: len(_procs_with("sleep 4321.")) == 30)
        await _wait_for(lambda: _procs_with("sleep 4326") and _procs_with("sleep 4322"))
        await rt.stop_session(session)
        await _wait_for(lambda: not _procs_with("sleep 432"))


async def test_a_stdio_mcp_server_runs_confined(
    rt: omnigent.Runtime, recorder: RecordingHarness, world: dict[str, Path]
) -> None:
    pytest.importorskip("mcp")
    server = Path(__file__).parent.parent / "harnesses" / "mcp_server.py"
    pid_file = world["workspace"] / "mcp.pid"
    env = {"MINE": "given", "MCP_PID_FILE": str(pid_file)}
    calc = {"name": "calc", "command": [sys.executable, str(server)], "env": env}
    session = await sandboxed_session(rt, recorder, world["workspace"], mcp_servers=[calc])
    seen: dict[str, str] = {}

    async def body(request: TurnRequest, ctx: TurnContext) -> None:
        for name in ("OMNIGENT_TEST_SECRET", "MINE"):
            seen[name] = await ctx.call_tool("mcp__calc__where", {"name": name})

    recorder.body = body
    with trio.fail_after(60):
        await run_ok(rt, session)
    assert seen["OMNIGENT_TEST_SECRET"] == f"{world['workspace']} -"
    assert seen["MINE"].endswith(" given")
    # The server is the first process bubblewrap's init started, in a pid namespace
    # of its own.
    assert pid_file.read_text() == "2"


async def test_an_external_harness_runs_confined(
    rt: omnigent.Runtime, world: dict[str, Path]
) -> None:
    from ..external_helpers import external
    from ..test_external_harness import said

    spec = {
        **external(env={"GIVEN": "by the spec"}),
        "os_env": {"cwd": str(world["workspace"]), "sandbox": {"type": "linux_bwrap"}},
    }
    agent = await rt.create_agent(spec)
    session = (await rt.create_session(agent.id)).id
    with trio.fail_after(30):
        report = json.loads(said(await run_turn(rt, session, "env")))
        pid = int(said(await run_turn(rt, session, "pid")))
    assert ENV_SECRET not in json.dumps(report)
    assert report["env"]["GIVEN"] == "by the spec"
    assert report["cwd"] == str(world["workspace"])
    assert pid == 2  # the first process of a pid namespace of its own


async def test_a_sub_agent_without_a_sandbox_runs_in_its_parents(
    rt: omnigent.Runtime, recorder: RecordingHarness, world: dict[str, Path]
) -> None:
    probe = PROBE.format(outside=world["outside"])
    worker = {
        "name": "worker",
        "description": "runs the probe",
        "executor": {
            "config": {
                "harness": "scripted",
                "script": [{"call": "sys_os_shell", "args": {"command": probe}}, {"say": "ok"}],
            }
        },
    }
    session = await sandboxed_session(
        rt, recorder, world["workspace"], sub_agents=[worker], tools={"agents": ["worker"]}
    )
    seen: dict[str, str] = {}

    async def body(request: TurnRequest, ctx: TurnContext) -> None:
        send = {"agent": "worker", "title": "probe", "args": "go"}
        ok(await ctx.call_tool("sys_session_send", send))
        with trio.fail_after(20):
            while not (inbox := await ctx.call_tool("sys_read_inbox", {})).startswith("[System"):
                await trio.sleep(0.05)
        seen["inbox"] = inbox

    recorder.body = body
    with trio.fail_after(30):
        await run_ok(rt, session)
    assert "completed" in seen["inbox"]
    confined(seen["inbox"], world)
    [child] = (await rt.list_sessions(parent_session_id=session)).data
    outputs = [i.output for i in (await rt.list_items(child.id)).data if hasattr(i, "output")]
    assert '"sandbox": "linux_bwrap"' in outputs[0]
