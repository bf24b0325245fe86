"""The collector set for a server once it is up (``omnigent._gc``), and who sets it.

``omnigent serve`` and ``omnigent stdio`` call it after startup; the library never
does. Each test puts the process's collector back as it found it.
"""

from __future__ import annotations

import contextlib
import ctypes.util
import gc
import os
import platform
import signal
import weakref
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

import omnigent
from omnigent import _gc, _malloc
from omnigent.cli import _main
from omnigent.transports.acp import _stdio as stdio_module
from omnigent.transports.http import _serve as serve_module
from omnigent.transports.runner import RunnerSettings


class _Cycle:
    """An object that refers to itself: only the cyclic collector frees it."""

    def __init__(self) -> None:
        self.me = self


@pytest.fixture
def collector_restored() -> Iterator[None]:
    threshold = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*threshold)
    _gc._Accepted.counting = False


def test_settle_freezes_what_startup_made_and_spaces_the_full_passes(
    collector_restored: None,
) -> None:
    before = _Cycle()
    garbage = weakref.ref(before)
    del before  # garbage from before the freeze is collected, not frozen
    young, middle, _ = gc.get_threshold()

    _gc.settle_after_startup()

    assert garbage() is None
    assert gc.get_freeze_count() > 0
    assert gc.get_threshold() == (young, middle, _gc.FULL_PASS_EVERY)
    after = _Cycle()
    made_later = weakref.ref(after)
    del after
    gc.collect()
    assert made_later() is None  # what is made after the freeze is collected as ever


def test_a_starting_server_runs_no_full_pass_until_it_settles(collector_restored: None) -> None:
    """``serve``'s start builds the heap a full pass would scan, all of it alive and
    about to be frozen: the pass waits for the settling (the young ones do not)."""
    passes: list[int] = []

    def seen(phase: str, info: dict[str, int]) -> None:
        if phase == "stop":
            passes.append(info["generation"])

    young, middle, _ = gc.get_threshold()
    gc.callbacks.append(seen)
    try:
        with _gc.full_passes_held():
            assert gc.get_threshold()[:2] == (young, middle)
            kept = [[index] for index in range(young * middle * 20)]  # a start's heap
            assert 0 in passes and 1 in passes and 2 not in passes
            _gc.settle_after_startup()
            del kept
        assert gc.get_threshold() == (young, middle, _gc.FULL_PASS_EVERY)  # kept
    finally:
        gc.callbacks.remove(seen)


def test_a_server_that_never_settles_puts_the_full_passes_back(
    collector_restored: None,
) -> None:
    """``serve --help``, a bad option, a failed start: the threshold is as it was."""
    before = gc.get_threshold()
    assert _main.main(["serve", "--port", "70000"]) == 2
    assert gc.get_threshold() == before
    with pytest.raises(RuntimeError), _gc.full_passes_held():
        assert gc.get_threshold()[2] != before[2]
        raise RuntimeError("the start failed")
    assert gc.get_threshold() == before


def test_only_serve_holds_the_full_passes(
    monkeypatch: pytest.MonkeyPatch, collector_restored: None
) -> None:
    held: list[bool] = []

    @contextlib.contextmanager
    def counted() -> Iterator[None]:
        held.append(True)
        yield

    monkeypatch.setattr(_main, "full_passes_held", counted)
    assert _main.main(["--version"]) == 0
    assert _main.main(["serve", "--port", "70000"]) == 2
    assert held == [True]


def test_large_messages_bring_the_full_pass_forward(collector_restored: None) -> None:
    """What a turn leaves in cycles (with the megabytes of its messages) waits for a
    full pass; a server runs one per FULL_PASS_AFTER_BYTES of messages taken in.
    Before, 7 MiB messages kept ~25 MiB of RSS each (issue 23, defect 5)."""
    passes: list[int] = []

    def seen(phase: str, info: dict[str, int]) -> None:
        if phase == "stop" and info["generation"] == 2:
            passes.append(1)

    gc.callbacks.append(seen)
    try:
        _gc.note_large_input(_gc.FULL_PASS_AFTER_BYTES)  # a library's: not counted
        assert not passes
        _gc.settle_after_startup()
        passes.clear()
        _gc.note_large_input(_gc.LARGE_INPUT - 1)  # small messages are not counted
        for _ in range(3):
            _gc.note_large_input(_gc.FULL_PASS_AFTER_BYTES // 4)
        assert not passes
        cycle = _Cycle()
        left = weakref.ref(cycle)
        del cycle
        _gc.note_large_input(_gc.FULL_PASS_AFTER_BYTES // 4)
        assert passes == [1] and left() is None
    finally:
        gc.callbacks.remove(seen)


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's mallopt")
def test_large_blocks_go_back_to_the_system(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_search(name: str) -> str | None:
        raise AssertionError("find_library runs ldconfig in a child: a server's start waited")

    monkeypatch.setattr(ctypes.util, "find_library", no_search)
    assert _malloc.return_large_blocks()  # from the symbols the process has


async def test_the_library_leaves_the_collector_alone(tmp_path: Path) -> None:
    threshold = gc.get_threshold()
    frozen = gc.get_freeze_count()
    with trio.fail_after(30):
        async with omnigent.open_runtime(f"sqlite:///{tmp_path}/lib.db"):
            pass
    assert (gc.get_threshold(), gc.get_freeze_count()) == (threshold, frozen)


async def test_serve_settles_the_collector_once_it_is_listening(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, collector_restored: None
) -> None:
    seen: list[int] = []

    def settled() -> None:
        _gc.settle_after_startup()
        seen.append(gc.get_freeze_count())
        os.kill(os.getpid(), signal.SIGINT)  # then stop, as a user would

    monkeypatch.setattr(serve_module, "settle_after_startup", settled)
    with trio.fail_after(30):
        await serve_module._main(
            f"sqlite:///{tmp_path}/serve.db",
            "127.0.0.1",
            0,
            None,
            "none",
            {"shutdown_grace": 1.0, "runners": RunnerSettings()},
        )
    assert len(seen) == 1 and seen[0] > 0


async def test_stdio_settles_the_collector_once_it_is_serving(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, collector_restored: None
) -> None:
    spec_path = tmp_path / "talker.yaml"
    spec_path.write_text(
        "name: talker\nexecutor:\n  config:\n    harness: scripted\n    script: [{say: hi}]\n"
    )
    spec = stdio_module.load_agent_spec(spec_path)
    to_agent, from_client = os.pipe()
    from_agent, to_client = os.pipe()
    seen: list[int] = []

    def settled() -> None:
        _gc.settle_after_startup()
        seen.append(gc.get_freeze_count())
        os.close(from_client)  # the editor goes away: input ends, the agent stops

    monkeypatch.setattr(stdio_module, "settle_after_startup", settled)
    try:
        with trio.fail_after(30):
            await stdio_module._main(
                spec, f"sqlite:///{tmp_path}/stdio.db", {}, False, to_agent, to_client
            )
    finally:
        for fd in (to_agent, from_agent, to_client):
            os.close(fd)
    assert len(seen) == 1 and seen[0] > 0
