"""The process manager: ownership, termination, the orphan sweep and the idle reaper."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest
import trio
import trio.testing

import omnigent
from omnigent.processes._manager import (
    ProcessManager,
    ProcessSpec,
    open_process_manager,
    process_start_time,
)

from .external_helpers import STDLIB, alive, wait_gone

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux /proc")

SLEEP = ProcessSpec(argv=("sleep", "300"), env={"PATH": os.environ["PATH"]})


async def test_spawned_processes_have_their_own_group_and_a_pid_file(tmp_path: Path) -> None:
    with trio.fail_after(10):
        async with open_process_manager(tmp_path) as manager:
            process = await manager.spawn(ProcessSpec(SLEEP.argv, SLEEP.env, key="k"))
            assert os.getpgid(process.pid) == process.pid != os.getpgid(0)
            assert manager.get("k") is process
            record = json.loads((manager.pid_dir / f"{process.pid}.json").read_text())
            assert record["start_time"] == process_start_time(process.pid)
            assert record["owner_pid"] == os.getpid()
            await process.terminate()
            assert process.returncode == -signal.SIGTERM
            assert manager.get("k") is None
            assert not (manager.pid_dir / f"{process.pid}.json").exists()


async def test_terminate_escalates_to_sigkill(tmp_path: Path) -> None:
    stubborn = (
        "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
        "print(1, flush=True); time.sleep(300)"
    )
    spec = ProcessSpec((sys.executable, "-c", stubborn), {"PATH": os.environ["PATH"]}, pipes=True)
    with trio.fail_after(10):
        async with open_process_manager(tmp_path, grace=0.2) as manager:
            process = await manager.spawn(spec)
            assert process.stdout is not None
            await process.stdout.receive_some()  # the handler is installed
            await process.terminate(0.2)
            assert process.returncode == -signal.SIGKILL
            await process.stdout.aclose()


async def test_leaving_the_manager_ends_every_process(tmp_path: Path) -> None:
    with trio.fail_after(10):
        async with open_process_manager(tmp_path) as manager:
            pids = [(await manager.spawn(SLEEP)).pid for _ in range(3)]
            assert all(alive(pid) for pid in pids)
            socket_dir = (await manager.socket_path("x.sock")).parent
            assert oct(socket_dir.stat().st_mode & 0o777) == "0o700"
        assert not any(alive(pid) for pid in pids)
        assert not socket_dir.exists()


async def test_a_cancelled_manager_still_ends_its_processes(tmp_path: Path) -> None:
    with trio.fail_after(10):
        with trio.CancelScope() as scope:
            async with open_process_manager(tmp_path) as manager:
                pid = (await manager.spawn(SLEEP)).pid
                scope.cancel()
                await trio.sleep_forever()
        assert not alive(pid)


async def _tick() -> None:
    """Keep virtual time moving in small steps.

    With the autojump clock, a task waiting for a real process to exit is "blocked":
    the clock would jump straight to the test's deadline. A ticker's next wake-up is
    always nearer, so time only creeps on while the process exits.
    """
    while True:
        await trio.sleep(1)


async def test_the_idle_reaper_spares_a_process_in_use(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    with trio.fail_after(10**6):
        async with trio.open_nursery() as ticker:
            ticker.start_soon(_tick)
            manager_cm = open_process_manager(tmp_path, idle_timeout=60, reap_interval=10**5)
            async with manager_cm as manager:
                await _reaping(manager)
            ticker.cancel_scope.cancel()  # only once the manager has closed


async def _reaping(manager: ProcessManager) -> None:
    # reap_idle is called by hand: spawning does real I/O, during which the autojump
    # clock moves on, so idle times are set explicitly once the processes run.
    idle, busy = await manager.spawn(SLEEP), await manager.spawn(SLEEP)
    idle.last_used = busy.last_used = trio.current_time()
    with busy.in_use():
        await trio.sleep(30)
        assert await manager.reap_idle() == 0  # not idle long enough yet
        await trio.sleep(31)
        assert await manager.reap_idle() == 1
        assert not idle.alive and busy.alive
        await trio.sleep(600)
        assert await manager.reap_idle() == 0  # a turn in flight: never reaped
    await trio.sleep(50)
    assert await manager.reap_idle() == 0  # idle time counts from the end of its use
    await trio.sleep(11)
    assert await manager.reap_idle() == 1
    assert not busy.alive


async def test_the_reaper_runs_on_its_own(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    with trio.fail_after(10**6):
        async with trio.open_nursery() as ticker:
            ticker.start_soon(_tick)
            async with open_process_manager(tmp_path, idle_timeout=60, reap_interval=5) as manager:
                idle, busy = await manager.spawn(SLEEP), await manager.spawn(SLEEP)
                with busy.in_use():
                    await idle.exited.wait()
                    await trio.sleep(3600)
                    assert busy.alive
                await busy.exited.wait()
            ticker.cancel_scope.cancel()


async def test_an_idle_timeout_of_zero_never_reaps(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    with trio.fail_after(10**6):
        async with trio.open_nursery() as ticker:
            ticker.start_soon(_tick)
            async with open_process_manager(tmp_path, idle_timeout=0) as manager:
                process = await manager.spawn(SLEEP)
                await trio.sleep(50_000)
                assert process.alive
            ticker.cancel_scope.cancel()


async def test_the_sweep_spares_live_owners_and_recycled_pids(tmp_path: Path) -> None:
    with trio.fail_after(10):
        async with open_process_manager(tmp_path) as manager:
            ours = await manager.spawn(SLEEP)
            # A pid file naming a live process of ours, but with another start time:
            # the pid was "recycled", so the sweep must not touch it.
            recycled = await manager.spawn(SLEEP)
            (manager.pid_dir / "99999999.json").write_text(
                json.dumps(
                    {
                        "pid": recycled.pid,
                        "start_time": 1,
                        "owner_pid": 1 << 22,
                        "owner_start_time": 1,
                    }
                )
            )
            (manager.pid_dir / "garbage.json").write_text("{not json")
            assert await manager.sweep_orphans() == 0
            assert ours.alive and recycled.alive  # ours: its owner (this process) lives
            assert not (manager.pid_dir / "99999999.json").exists()
            assert not (manager.pid_dir / "garbage.json").exists()


_RUNTIME = """
import sys, trio, omnigent
from omnigent.model import OutputItemDone, MessageItem, SessionStatusChanged

async def main():
    async with omnigent.open_runtime() as rt:
        spec = {"name": "orphans", "executor": {"type": "omnigent", "config": {
            "harness": "external", "command": %r}}}
        agent = await rt.create_agent(spec)
        session = await rt.create_session(agent.id)
        for text in ("pid", "child"):
            async with rt.subscribe(session.id) as events:
                await rt.send_message(session.id, text)
                async for event in events:
                    if isinstance(event, OutputItemDone) and isinstance(event.item, MessageItem):
                        print(event.item.content[0].text, flush=True)
                    if isinstance(event, SessionStatusChanged) and event.status == "idle":
                        break
        await trio.sleep_forever()

trio.run(main)
"""


async def test_the_orphan_sweep_after_the_runtime_was_killed(
    tmp_path: Path, omnigent_home: Path
) -> None:
    script = tmp_path / "runtime.py"
    script.write_text(textwrap.dedent(_RUNTIME % (STDLIB,)))
    env = {**os.environ, "OMNIGENT_HOME": str(omnigent_home)}
    with trio.fail_after(60):
        runtime = await trio.lowlevel.open_process(
            [sys.executable, str(script)], env=env, stdout=subprocess.PIPE
        )
        assert runtime.stdout is not None
        lines = b""
        while lines.count(b"\n") < 2:
            lines += await runtime.stdout.receive_some()
        harness, grandchild = (int(line) for line in lines.split())
        runtime.kill()  # kill -9: the runtime gets no chance to clean up
        await runtime.wait()
        await runtime.stdout.aclose()
        assert alive(harness) and alive(grandchild)  # left behind, in their own group
        async with omnigent.open_runtime():
            await wait_gone(harness)
            await wait_gone(grandchild)
        assert list((omnigent_home / "run" / "processes").iterdir()) == []


async def test_the_socket_directory_of_a_runtime_that_died_is_removed(tmp_path: Path) -> None:
    """Regression (issue 17): a runtime killed with kill -9 left its private socket
    directory in the temp dir for ever (737 of them on one machine). Its record names
    the owner; the next runtime on the same home removes the directories whose owner
    is gone — and nothing that is not such a directory, nor a live runtime's."""
    records = tmp_path / "run" / "sockets"
    records.mkdir(parents=True)
    me = os.getpid()

    def record(name: str, path: Path, start: int | None) -> Path:
        target = records / f"{name}.json"
        data = {"socket_dir": str(path), "owner_pid": me, "owner_start_time": start}
        target.write_text(json.dumps(data))
        return target

    def exist(*paths: Path) -> list[bool]:
        return [path.exists() for path in paths]

    dead_dir = Path(tempfile.mkdtemp(prefix="omnigent-"))
    live_dir = Path(tempfile.mkdtemp(prefix="omnigent-"))
    foreign = tmp_path / "omnigent-not-in-the-temp-dir"
    foreign.mkdir()
    try:
        # This pid with another start time: a runtime that died, its pid reused.
        dead = record("dead", dead_dir, -1)
        live = record("live", live_dir, process_start_time(me))
        odd = record("odd", foreign, -1)
        with trio.fail_after(10):
            async with open_process_manager(tmp_path) as manager:
                socket_dir = (await manager.socket_path("x.sock")).parent
                own = records / f"{socket_dir.name}.json"
                assert exist(dead_dir, dead, live_dir, live, foreign, odd, own) == [
                    *(False, False),  # removed, with its record
                    *(True, True),  # a live owner's: left alone
                    *(True, False),  # not a socket directory: the record is dropped
                    True,
                ]
                assert json.loads(own.read_text())["socket_dir"] == str(socket_dir)
        assert exist(socket_dir, own, live) == [False, False, True]
    finally:
        shutil.rmtree(live_dir, ignore_errors=True)
        shutil.rmtree(dead_dir, ignore_errors=True)
