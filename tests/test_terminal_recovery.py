"""A runtime that dies leaves no terminal behind for long: the next one kills its panes.

The crash is real: a child process opens a runtime, starts a terminal with jobs in it,
and SIGKILLs itself. Each test points the temporary directory (where runtimes keep
their tmux directories) at a short private one of its own.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio

import omnigent
from omnigent.harnesses.base import TurnContext, TurnRequest
from omnigent.testing import RecordingHarness
from omnigent.tools.terminals import default_base

from .terminal_helpers import (
    SPAWN,
    ok,
    pid_alive,
    run_ok,
    spawned,
    target,
    terminal_agent,
    wait_gone,
)

CHILD = """
import os, signal, sys, trio, omnigent

SPAWN = {spawn!r}
LAUNCH = {{"call": "sys_terminal_launch", "args": {{"terminal": "bash", "session": "s1"}}}}
TYPE = {{"terminal": "bash", "session": "s1", "text": SPAWN}}
SEND = {{"call": "sys_terminal_send", "args": TYPE}}

async def main():
    workdir = sys.argv[1]
    async with omnigent.open_runtime() as rt:
        agent = await rt.create_agent({{
            "name": "doomed",
            "executor": {{"config": {{"harness": "scripted", "script": [LAUNCH, SEND]}}}},
            "os_env": {{"cwd": workdir}},
            "terminals": {{"bash": {{"command": "bash", "args": ["--norc"], "idle_after": 0}}}},
        }})
        session = await rt.create_session(agent.id)
        async with rt.subscribe(session.id) as events:
            await rt.send_message(session.id, "go")
            async for event in events:
                if event.type == "session.status" and event.status == "idle":
                    break
        with trio.fail_after(10):
            while not os.path.exists(os.path.join(workdir, "tmux.env")):
                await trio.sleep(0.02)
        os.kill(os.getpid(), signal.SIGKILL)  # no cleanup of any kind

trio.run(main)
"""


@pytest.fixture
def short_tmp(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A short temporary directory used as the runtimes' (sockets must be short)."""
    base = Path(tempfile.mkdtemp(prefix="og-", dir="/tmp"))
    monkeypatch.setattr(tempfile, "tempdir", str(base))
    monkeypatch.setenv("TMPDIR", str(base))  # for child processes
    try:
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)


def runtime_dirs() -> list[Path]:
    base = default_base()
    return sorted(p for p in base.iterdir() if p.name.startswith("rt_")) if base.exists() else []


@contextlib.contextmanager
def killed_on_failure(pids: list[int]) -> Iterator[None]:
    try:
        yield
    finally:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


async def test_a_restart_kills_the_terminals_of_a_runtime_that_crashed(
    short_tmp: Path, tmp_path: Path
) -> None:
    script = tmp_path / "child.py"
    script.write_text(CHILD.format(spawn=SPAWN))
    with trio.fail_after(30):
        child = await trio.run_process(
            [sys.executable, str(script), str(tmp_path)], check=False, env={**os.environ}
        )
        assert child.returncode == -signal.SIGKILL, child
        pids, server, socket = await spawned(tmp_path)
        with killed_on_failure([*pids, server]):
            assert all(pid_alive(p) for p in [*pids, server])  # orphaned, still running
            assert runtime_dirs() == [socket.parent]
            async with omnigent.open_runtime():
                assert runtime_dirs() == []  # swept before the runtime was handed over
            await wait_gone(*pids, server)


async def test_a_live_runtime_keeps_its_terminals_when_another_starts(
    short_tmp: Path, tmp_path: Path, recorder: RecordingHarness
) -> None:
    with trio.fail_after(30):
        async with omnigent.open_runtime() as first:
            first.register_harness("recorder", recorder.factory)
            spec = {**terminal_agent(), "os_env": {"cwd": str(tmp_path)}}
            session = (await first.create_session((await first.create_agent(spec)).id)).id

            async def body(request: TurnRequest, ctx: TurnContext) -> None:
                ok(await ctx.call_tool("sys_terminal_launch", target()))
                ok(await ctx.call_tool("sys_terminal_send", target(text=SPAWN)))

            recorder.body = body
            await run_ok(first, session)
            pids, server, socket = await spawned(tmp_path)
            async with omnigent.open_runtime():
                pass
            assert all(pid_alive(p) for p in [*pids, server])
            assert runtime_dirs() == [socket.parent]
            assert [r.id for r in await first.list_resources(session)] == ["terminal_bash_s1"]
        await wait_gone(*pids, server)
        assert runtime_dirs() == []


async def test_leftovers_without_a_server_are_removed(short_tmp: Path) -> None:
    base = default_base()
    base.mkdir(mode=0o700)
    half_made = base / "rt_half"
    half_made.mkdir()  # a crash between mkdir and taking its lock
    unlocked = base / "rt_dead"
    unlocked.mkdir()
    (unlocked / "lock").touch()
    (unlocked / "tmux.sock").touch()  # not a socket: nothing answers on it
    (base / ".lock").touch()
    async with omnigent.open_runtime():
        pass
    assert runtime_dirs() == []
    assert (base / ".lock").exists()


async def test_a_base_directory_open_to_others_is_refused(
    short_tmp: Path, recorder: RecordingHarness, caplog: pytest.LogCaptureFixture
) -> None:
    base = default_base()
    base.mkdir()
    base.chmod(0o777)
    (base / "rt_someone").mkdir()
    outputs: list[str] = []

    async def body(request: TurnRequest, ctx: TurnContext) -> None:
        outputs.append(await ctx.call_tool("sys_terminal_launch", target()))

    async with omnigent.open_runtime() as rt:
        rt.register_harness("recorder", recorder.factory)
        spec: dict[str, Any] = terminal_agent()
        session = (await rt.create_session((await rt.create_agent(spec)).id)).id
        recorder.body = body
        await run_ok(rt, session)
    assert (base / "rt_someone").is_dir()  # nothing in it is trusted, or touched
    assert "not sweeping stale terminals" in caplog.text
    assert outputs[0].startswith("Error: cannot start terminal bash: ")
    assert "is not a private directory" in outputs[0]
