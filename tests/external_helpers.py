"""Helpers for tests that run external harness processes."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import trio

from omnigent.processes._manager import process_start_time

HARNESSES = Path(__file__).parent / "harnesses"
STDLIB = [sys.executable, str(HARNESSES / "stdlib_harness.py")]
SCAFFOLD = [sys.executable, str(HARNESSES / "scaffold_harness.py")]


def external(name: str = "ext", command: list[str] | None = None, **config: Any) -> dict[str, Any]:
    """An agent spec whose harness is an external process."""
    cfg: dict[str, Any] = {"harness": "external", "command": command or STDLIB, **config}
    return {"name": name, "executor": {"type": "omnigent", "config": cfg}}


def alive(pid: int) -> bool:
    """Whether ``pid`` is a live process (not a zombie)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read()
    except OSError:
        return False
    return stat[stat.rfind(b")") + 2 : stat.rfind(b")") + 3] != b"Z"


async def wait_gone(pid: int, timeout: float = 10) -> None:
    """Wait (on a pidfd, not by polling) until ``pid`` has exited."""
    with trio.fail_after(timeout):
        try:
            fd = os.pidfd_open(pid)
        except ProcessLookupError:
            return
        try:
            if alive(pid):
                await trio.lowlevel.wait_readable(fd)
        finally:
            os.close(fd)


__all__ = ["SCAFFOLD", "STDLIB", "alive", "external", "process_start_time", "wait_gone"]
