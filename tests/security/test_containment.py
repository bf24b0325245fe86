"""Containment without races: the file tools under a symlink-swap attack (issue 9).

The tools used to resolve a path, check it, then open the resolved path: swapping a
directory on it for a symlink in between let 6 of 150 reads and 2 of 150 writes
escape the workspace. Here a thread swaps the directory and a symlink to the outside
atomically (``renameat2(RENAME_EXCHANGE)``), as fast as it can, while the tools run a
thousand times each; nothing outside may be read or touched.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import json
import os
import threading
from pathlib import Path
from typing import Any

import pytest
import trio

from omnigent.tools import sys_os_edit, sys_os_read, sys_os_write

ROUNDS = 1000
_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


def _exchanger() -> Any:
    libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
    exchange = getattr(libc, "renameat2", None)
    if exchange is None:
        pytest.skip("renameat2 is not available here")
    return exchange


@pytest.fixture
def arena(tmp_path: Path) -> tuple[Path, Path]:
    """``work/d/f.txt`` inside; ``outside/f.txt`` out; ``work/swap`` → ``outside``."""
    work, outside = tmp_path / "work", tmp_path / "outside"
    (work / "d").mkdir(parents=True)
    outside.mkdir()
    (work / "d" / "f.txt").write_text("inside\n")
    (outside / "f.txt").write_text("inside\nSECRET\n")
    (work / "swap").symlink_to(outside, target_is_directory=True)
    return work, outside


class Swapper:
    """A thread exchanging ``work/d`` and ``work/swap`` until stopped."""

    def __init__(self, work: Path) -> None:
        self._exchange = _exchanger()
        self._a = os.fsencode(work / "d")
        self._b = os.fsencode(work / "swap")
        self._stop = threading.Event()
        self.swaps = 0
        self.error: int | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            if self._exchange(_AT_FDCWD, self._a, _AT_FDCWD, self._b, _RENAME_EXCHANGE) != 0:
                self.error = ctypes.get_errno()
                return
            self.swaps += 1

    def __enter__(self) -> Swapper:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        # Leave the arena as it began: the real directory at d.
        if (Path(os.fsdecode(self._a))).is_symlink():
            self._exchange(_AT_FDCWD, self._a, _AT_FDCWD, self._b, _RENAME_EXCHANGE)


async def test_the_symlink_swap_race_never_escapes(arena: tuple[Path, Path]) -> None:
    work, outside = arena
    secret = outside / "f.txt"
    before = (sorted(p.name for p in outside.iterdir()), secret.stat().st_mtime_ns)
    outcomes = {"ok": 0, "refused": 0, "other": 0}
    escapes: list[str] = []

    def tally(output: str) -> None:
        if output.startswith("Error: path ") and "outside the working directory" in output:
            outcomes["refused"] += 1
        elif output.startswith("Error: "):
            outcomes["other"] += 1
        else:
            outcomes["ok"] += 1

    with trio.fail_after(90), Swapper(work) as swapper:
        for index in range(ROUNDS):
            read = await sys_os_read(work, {"path": "d/f.txt"})
            if "SECRET" in read:
                escapes.append(f"read {index}: {read}")
            tally(read)
            tally(await sys_os_write(work, {"path": f"d/new{index % 7}.txt", "content": "w\n"}))
            tally(await sys_os_write(work, {"path": "d/f.txt", "content": "inside\n"}))
            edit = {"path": "d/f.txt", "oldText": "inside", "newText": "inside"}
            tally(await sys_os_edit(work, edit))
    assert swapper.error is None, os.strerror(swapper.error or 0)
    after = (sorted(p.name for p in outside.iterdir()), secret.stat().st_mtime_ns)
    assert escapes == []
    assert after == before, "something outside the working directory was changed"
    assert secret.read_text() == "inside\nSECRET\n"
    # Both states were met: the race was really run.
    assert swapper.swaps > 100, swapper.swaps
    assert outcomes["ok"] > 0 and outcomes["refused"] > 0, outcomes


async def test_refusals_name_the_path_the_caller_gave(arena: tuple[Path, Path]) -> None:
    work, outside = arena
    (work / "out").symlink_to(outside / "f.txt")
    with trio.fail_after(10):
        for path in ("/proc/self/environ", "out", "swap/f.txt", "../outside/f.txt"):
            for tool, extra in (
                (sys_os_read, {}),
                (sys_os_write, {"content": "x"}),
                (sys_os_edit, {"oldText": "inside", "newText": "x"}),
            ):
                output = await tool(work, {"path": path, **extra})
                assert output.startswith(f"Error: path {path!r} is outside the working directory")
                assert str(outside) not in output and str(os.getpid()) not in output
                assert "SECRET" not in output
    assert (outside / "f.txt").read_text() == "inside\nSECRET\n"


async def test_links_and_dotdot_that_stay_inside_still_work(arena: tuple[Path, Path]) -> None:
    work, _ = arena
    (work / "rel").symlink_to("d/f.txt")
    (work / "abs").symlink_to(work / "d" / "f.txt")
    (work / "dirlink").symlink_to("d", target_is_directory=True)
    (work / "d" / "up").symlink_to("../d/f.txt")
    (work / "dangling").symlink_to("d/later.txt")
    (work / "loop1").symlink_to("loop2")
    (work / "loop2").symlink_to("loop1")
    with trio.fail_after(10):
        for path in ("rel", "abs", "dirlink/f.txt", "d/up", "d/../d/f.txt", str(work / "d/f.txt")):
            read = json.loads(await sys_os_read(work, {"path": path}))
            assert read["content"] == "inside\n", path
        created = json.loads(await sys_os_write(work, {"path": "dangling", "content": "now\n"}))
        assert created["created"] is True and (work / "d" / "later.txt").read_text() == "now\n"
        made = json.loads(await sys_os_write(work, {"path": "dirlink/x/y.txt", "content": "y"}))
        assert made["created"] is True and (work / "d" / "x" / "y.txt").read_text() == "y"
        looped = await sys_os_read(work, {"path": "loop1"})
        assert looped == "Error: path 'loop1' goes through too many symbolic links"
        up = await sys_os_read(work, {"path": "d/.."})
        assert up.startswith("Error: cannot read 'd/..': it is a directory")
        fifo = work / "pipe"
        os.mkfifo(fifo)
        assert "not a regular file" in await sys_os_read(work, {"path": "pipe"})
        assert "not a regular file" in await sys_os_write(work, {"path": "pipe", "content": "x"})
