"""The process side of terminals: bounded tmux runs, and killing a whole Unix session."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from pathlib import Path

import pytest
import trio

from omnigent.processes._groups import kill_session
from omnigent.processes._tmux_server import TmuxFailed, TmuxUnavailable, _run

from .terminal_helpers import pid_alive, wait_for_files, wait_gone

# _run shows the command after "tmux -f /dev/null -S <socket>": five leading words.
PREFIX = ["-f", "/dev/null", "-S", "sock"]


async def test_a_run_keeps_at_most_cap_bytes_and_reads_the_rest() -> None:
    with trio.fail_after(10):
        out = await _run(["/bin/sh", "-c", "yes | head -c 1000000", "-", "-"], timeout=5, cap=1000)
    assert out == "y\n" * 500


async def test_a_failed_run_says_what_tmux_said() -> None:
    with pytest.raises(TmuxFailed) as failed:
        await _run(
            ["/bin/sh", "-c", 'echo "can\'t find pane: %9" >&2; exit 1', "-", "-"], timeout=5
        )
    assert failed.value.gone and failed.value.message == "can't find pane: %9"


async def test_a_run_that_hangs_is_killed_at_its_deadline() -> None:
    with trio.fail_after(5), pytest.raises(TmuxFailed, match=r"did not answer within 0\.2 s"):
        await _run(["/bin/sh", "-c", "exec sleep 30", "-", "-"], timeout=0.2)


async def test_a_binary_that_cannot_run_is_unavailable(tmp_path: Path) -> None:
    with pytest.raises(TmuxUnavailable, match="cannot run"):
        await _run([str(tmp_path / "no-tmux"), *PREFIX, "list-panes"], timeout=5)


async def test_kill_session_kills_every_process_group_of_the_session(tmp_path: Path) -> None:
    # A session leader with a job-control-like spread: a child in its own process
    # group, and one that ignores SIGTERM.
    setpgid_then_sleep = 'import os; os.setpgid(0, 0); os.execvp("sleep", ["sleep", "1000"])'
    own_group = f"{sys.executable} -c '{setpgid_then_sleep}'"
    script = (
        f"{own_group} & echo $! > a.pid; "
        "(trap '' TERM HUP; exec sleep 1001) & echo $! > b.pid; echo $$ > leader.pid; wait"
    )
    proc = await trio.lowlevel.open_process(
        ["/bin/sh", "-c", script], cwd=tmp_path, start_new_session=True
    )
    pids: list[int] = []
    try:
        files = [tmp_path / f for f in ("a.pid", "b.pid", "leader.pid")]
        await wait_for_files(*files)
        pids = [int(f.read_text()) for f in files]
        with trio.fail_after(5):
            while os.getpgid(pids[0]) == proc.pid:  # until it has made its own group
                await trio.sleep(0.01)
        assert all(os.getsid(p) == proc.pid for p in pids)
        with trio.fail_after(10):
            await kill_session(proc.pid, grace=0.3)
        await wait_gone(*pids)
    finally:
        for pid in pids:  # whatever a failure left running
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        if proc.returncode is None:
            proc.kill()
        with trio.CancelScope(shield=True):
            await proc.wait()


async def test_kill_session_of_nothing_returns_at_once() -> None:
    with trio.fail_after(2):
        await kill_session(2**22 + 12345, grace=5)  # no such session: no grace to wait
    assert not pid_alive(2**22 + 12345)
