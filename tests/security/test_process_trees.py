"""Nothing a session's shell started outlives it, whatever process group it moved to.

Found by the third attack probe (issue 23, defect 4): ``sys_os_shell`` killed only its
process group, so children that change group — ``setsid``, ``nohup … &`` in a
subshell, GNU ``timeout`` (``timeout 600 npm run dev &``) — survived the tool's return,
``stop_session``, shutdown and a ``kill -9`` restart. Now each command runs in a tree
that holds everything it starts (:mod:`omnigent.processes._trees`): a cgroup v2 where
the machine allows it, else a subreaper wrapper. Each test runs in both modes (the
cgroup one only where cgroups are available to the test's process).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

import omnigent
from omnigent.processes import TreeMode, _cgroup, open_process_trees
from omnigent.processes._cgroup import find_cgroup_base
from omnigent.tools import sys_os_shell

from ..conftest import all_tasks
from ..external_helpers import alive, wait_gone
from .serve_helpers import open_serve, scripted

HAS_CGROUP = find_cgroup_base() is not None
MODES = [
    pytest.param(
        TreeMode.CGROUP,
        marks=pytest.mark.skipif(not HAS_CGROUP, reason="no cgroup v2 of our own here"),
    ),
    TreeMode.SUBREAPER,
]


def escaping(folder: Path, tail: str = "") -> str:
    """A command whose three children leave its process group, each writing its pid."""
    p = folder
    return (
        f"(setsid sh -c 'echo $$ > {p}/setsid; exec sleep 300' &); "
        f"(nohup sh -c 'echo $$ > {p}/nohup; exec sleep 300' >/dev/null 2>&1 &); "
        f"timeout 600 sh -c 'echo $$ > {p}/timeout; exec sleep 300' & "
        f"for f in setsid nohup timeout; do while [ ! -s {p}/$f ]; do sleep 0.01; done; done"
        f"{tail}"
    )


def pids(folder: Path) -> list[int]:
    return [int((folder / name).read_text()) for name in ("setsid", "nohup", "timeout")]


async def all_gone(found: list[int], timeout: float = 10) -> None:
    for pid in found:
        await wait_gone(pid, timeout)


@pytest.mark.parametrize("mode", MODES)
async def test_the_tool_returning_ends_what_left_its_group(tmp_path: Path, mode: TreeMode) -> None:
    with trio.fail_after(30):
        async with open_process_trees(mode=mode) as trees:
            session = trees.for_session("conv_a")
            output = await sys_os_shell(
                tmp_path, {"command": escaping(tmp_path, "; echo done")}, trees=session
            )
            result = json.loads(output)
            assert result["stdout"] == "done\n" and result["exit_code"] == 0, result
            found = pids(tmp_path)
            await all_gone(found)  # gone by the time the call returned (or a moment after)
            assert not any(alive(pid) for pid in found)
            if mode is TreeMode.CGROUP:  # and the command's cgroup, and the idle session's
                base = find_cgroup_base()
                assert base is not None
                own = f"omnigent-{os.getpid()}-*"
                assert not list(base.glob(f"{own}/*/conv_a")), "a cgroup was left behind"


@pytest.mark.parametrize("mode", MODES)
async def test_a_cancelled_or_timed_out_command_ends_its_whole_tree(
    tmp_path: Path, mode: TreeMode
) -> None:
    with trio.fail_after(30):
        async with open_process_trees(mode=mode) as trees:
            session = trees.for_session("conv_b")
            out = await sys_os_shell(
                tmp_path,
                {"command": escaping(tmp_path, "; sleep 300"), "timeout": 3},
                trees=session,
                kill_grace=0.5,
            )
            assert json.loads(out)["timed_out"] is True
            await all_gone(pids(tmp_path))
            for name in ("setsid", "nohup", "timeout"):
                (tmp_path / name).unlink()
            with trio.move_on_after(2):
                await sys_os_shell(
                    tmp_path,
                    {"command": escaping(tmp_path, "; sleep 300")},
                    trees=session,
                    kill_grace=0.5,
                )
            await all_gone(pids(tmp_path))


def background_spec(folder: Path) -> dict[str, Any]:
    command = escaping(folder, "; sleep 300")
    call = {"tool": "sys_os_shell", "args": {"command": command, "timeout": 600}}
    return scripted("bg", [{"call": "sys_call_async", "args": call}], async_enabled=True)


async def wait_for_pids(folder: Path) -> list[int]:
    names = ("setsid", "nohup", "timeout")
    while not all((folder / name).exists() and (folder / name).read_text() for name in names):
        await trio.sleep(0.02)  # written by the shell: no event to wait on
    return pids(folder)


@asynccontextmanager
async def forced(mode: TreeMode) -> AsyncIterator[None]:
    old = os.environ.get("OMNIGENT_PROCESS_TREES")
    os.environ["OMNIGENT_PROCESS_TREES"] = mode.value
    try:
        yield
    finally:
        if old is None:
            del os.environ["OMNIGENT_PROCESS_TREES"]
        else:
            os.environ["OMNIGENT_PROCESS_TREES"] = old


@pytest.mark.parametrize("mode", MODES)
async def test_stop_session_and_shutdown_end_a_background_shells_tree(
    tmp_path: Path, mode: TreeMode
) -> None:
    stopped, shut = tmp_path / "stopped", tmp_path / "shut"
    stopped.mkdir()
    shut.mkdir()
    with trio.fail_after(60):
        async with forced(mode), omnigent.open_runtime(home=tmp_path / "home") as rt:
            agent = await rt.create_agent(background_spec(stopped))
            session = await rt.create_session(agent.id)
            await rt.send_message(session.id, "go")
            found = await wait_for_pids(stopped)
            await rt.stop_session(session.id)
            await all_gone(found)
            other = await rt.create_agent({**background_spec(shut), "name": "bg2"})
            session = await rt.create_session(other.id)
            await rt.send_message(session.id, "go")
            found = await wait_for_pids(shut)
        await all_gone(found)  # the runtime closed


@pytest.mark.parametrize("mode", MODES)
async def test_a_kill_9_leaves_nothing_running_after_the_restart(
    tmp_path: Path, mode: TreeMode
) -> None:
    folder = tmp_path / "pids"
    folder.mkdir()
    with trio.fail_after(90):
        async with forced(mode):
            async with open_serve(tmp_path) as served:
                agent = await served.agent(background_spec(folder))
                session = await served.session(agent_id=agent)
                content = [{"type": "input_text", "text": "go"}]
                body = {"type": "message", "data": {"role": "user", "content": content}}
                await served.client.post(f"/v1/sessions/{session}/events", json=body)
                found = await wait_for_pids(folder)
                served.process.send_signal(signal.SIGKILL)
                await served.process.wait()
                if mode is TreeMode.SUBREAPER:
                    await all_gone(found)  # the wrapper saw its parent die
            if mode is TreeMode.CGROUP:
                assert all(alive(pid) for pid in found)  # until the next start sweeps
                async with open_serve(tmp_path):
                    await all_gone(found)
    assert not any(alive(pid) for pid in found)


def test_an_unknown_mode_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OMNIGENT_PROCESS_TREES", "jail")

    async def main() -> None:
        with pytest.raises(ValueError, match="OMNIGENT_PROCESS_TREES"):
            async with open_process_trees():
                pass

    trio.run(main)


def test_the_wrapper_reports_the_commands_own_status(tmp_path: Path) -> None:
    wrapper = Path(omnigent.processes.__file__).with_name("_subreaper.py")
    base = [sys.executable, "-I", "-S", str(wrapper), "0.2", str(os.getpid()), "--"]
    assert subprocess.run([*base, "sh", "-c", "exit 7"], check=False).returncode == 7
    killed = subprocess.run([*base, "sh", "-c", "kill -USR1 $$"], check=False)
    assert killed.returncode == -signal.SIGUSR1
    missing = subprocess.run([*base, "no-such-program-x"], capture_output=True, check=False)
    assert missing.returncode == 127 and b"no-such-program-x" in missing.stderr


async def test_the_cgroup_probe_runs_in_the_callers_nursery(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The probe (a process moved into a cgroup: the kernel's time) does not hold the
    open: the trees are handed out at once, and a command's tree waits for the mode."""
    release = trio.Event()
    real = _cgroup.make_probe

    async def slow_probe() -> None:
        await release.wait()

    def make_probe() -> _cgroup.Probe | None:
        trio.from_thread.run(slow_probe)
        return real()

    monkeypatch.delenv("OMNIGENT_PROCESS_TREES", raising=False)
    monkeypatch.setattr(_cgroup, "make_probe", make_probe)
    with trio.fail_after(30):
        async with trio.open_nursery() as nursery, open_process_trees(nursery=nursery) as trees:
            with trio.move_on_after(0.05) as waited:
                await trees.wait_mode()
            assert waited.cancelled_caught  # handed out before the probe answered
            release.set()
            expected = TreeMode.CGROUP if HAS_CGROUP else TreeMode.SUBREAPER
            assert await trees.wait_mode() is expected
            async with trees.open_command("conv_p", grace=0.5) as tree:
                assert tree.mode is expected


async def test_leaving_the_block_cancels_the_probe_and_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A runtime closed while its probe's process still runs: the process is killed,
    the probe's directory removed, the mode falls back, and no task is left."""
    probe_dir = tmp_path / "probe"
    started = tmp_path / "started"

    def make_probe() -> _cgroup.Probe:
        probe_dir.mkdir()
        argv = ["/bin/sh", "-c", f"echo $$ > {started}; exec sleep 300"]
        return _cgroup.Probe(tmp_path, probe_dir, argv)

    monkeypatch.delenv("OMNIGENT_PROCESS_TREES", raising=False)
    monkeypatch.setattr(_cgroup, "make_probe", make_probe)
    before = all_tasks()
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            async with open_process_trees(nursery=nursery) as trees:
                while not (started.exists() and started.read_text()):
                    await trio.sleep(0.01)  # written by the shell: no event to wait on
                pid = int(started.read_text())
            assert await trees.wait_mode() is TreeMode.SUBREAPER
        await wait_gone(pid, 5)
    assert not probe_dir.exists()
    assert all_tasks() <= before
