"""Helpers for the terminal tests: agents with terminals, pids, bounded waits."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import trio

import omnigent
from omnigent.harnesses.base import TurnContext
from omnigent.model import Event
from omnigent.testing import run_turn

from .conftest import statuses

# A bash that reads no startup files, with a prompt the tests can recognise.
BASH: dict[str, Any] = {
    "command": "bash",
    "args": ["--norc", "--noprofile"],
    "env": {"PS1": "$ "},
    "idle_after": 0,
}


def terminal_agent(name: str = "term", **terminal: Any) -> dict[str, Any]:
    """An agent spec (run by the ``recorder`` harness) with one terminal, ``bash``."""
    return {
        "name": name,
        "executor": {"type": "omnigent", "config": {"harness": "recorder"}},
        "terminals": {"bash": {**BASH, **terminal}},
    }


async def run_ok(rt: omnigent.Runtime, session_id: str, content: Any = "go") -> list[Event]:
    """Run one turn, which must succeed: a harness body that fails ends it ``failed``."""
    events = await run_turn(rt, session_id, content)
    assert statuses(events)[-1] == "idle", events
    return events


def target(session: str = "s1", **more: Any) -> dict[str, Any]:
    return {"terminal": "bash", "session": session, **more}


def ok(output: str) -> Any:
    assert not output.startswith("Error:"), output
    return json.loads(output)


async def read_until(ctx: TurnContext, marker: str, *, session: str = "s1", **more: Any) -> Any:
    """Read the terminal until ``marker`` is on its screen (bounded)."""
    with trio.fail_after(10):
        while True:
            screen = ok(await ctx.call_tool("sys_terminal_read", target(session, **more)))
            if marker in screen["screen"]:
                return screen
            await trio.sleep(0.05)


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/status") as status:
            return not any(line.startswith("State:\tZ") for line in status)
    except FileNotFoundError:
        return False


async def wait_gone(*pids: int, timeout: float = 10) -> None:
    with trio.fail_after(timeout):
        while any(pid_alive(p) for p in pids):
            await trio.sleep(0.05)


async def wait_for_files(*paths: Path) -> None:
    with trio.fail_after(10):
        while not all(p.exists() and p.read_text().strip() for p in paths):
            await trio.sleep(0.02)


# Run in the terminal: the shell's pid, a background job, a job that ignores the
# hang-up and SIGTERM (only SIGKILL ends it), and $TMUX (socket, server pid, session).
SPAWN = (
    "echo $$ > shell.pid; sleep 1000 & echo $! > job.pid; "
    "(trap '' HUP TERM; exec sleep 1001) & echo $! > stubborn.pid; echo $TMUX > tmux.env"
)


async def spawned(workdir: Path) -> tuple[list[int], int, Path]:
    """The pids SPAWN wrote, the tmux server's pid and its socket."""
    files = [workdir / f for f in ("shell.pid", "job.pid", "stubborn.pid", "tmux.env")]
    await wait_for_files(*files)
    pids = [int(f.read_text()) for f in files[:3]]
    socket, server, _ = files[3].read_text().strip().split(",")
    return pids, int(server), Path(socket)
