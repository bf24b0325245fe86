"""Killing many process groups at once, and writing many rows at once, stays cheap.

Regressions of the cancellation benchmark (``benchmarks/cancellation.py``: a stop
of 100 background shells took 4 s): a killed group kept answering ``killpg(pgid, 0)``
because of an unreaped zombie, so every group was scanned for in ``/proc`` again and
again, one thread each; the ``finally`` of every shell killed its group a second time;
and every task's inbox item and group record was a transaction of its own. These
tests count what those paths do rather than time them.
"""

from __future__ import annotations

import functools
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import outcome
import pytest
import trio

import omnigent
from omnigent.processes import _groups
from omnigent.processes import _procfs as procfs
from omnigent.stores import _sqlite_commit
from omnigent.stores._sqlite_commit import WriteJob, run_batch
from omnigent.testing import probe

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux /proc")


def _state(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


def _groups_with_a_zombie(count: int) -> tuple[list[subprocess.Popen[bytes]], list[Any]]:
    """``count`` groups, each a ``sleep`` leader and a member that exited unreaped."""
    leaders = [
        subprocess.Popen(["sleep", "300"], process_group=0, stdin=subprocess.DEVNULL)
        for _ in range(count)
    ]
    zombies = [subprocess.Popen(["true"], process_group=p.pid) for p in leaders]
    for zombie in zombies:
        while _state(zombie.pid) != "Z":  # exited; this process does not reap it yet
            time.sleep(0.005)
    return leaders, zombies


async def test_groups_holding_only_zombies_are_done_and_share_their_scans(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each group keeps an unreaped zombie (its parent, this test, does not wait for
    it), so ``killpg(pgid, 0)`` answers after the kill: only /proc can say the group
    is gone, and one scan must answer for all of them."""
    scans = 0
    original = procfs.scan_groups

    def counting() -> frozenset[int] | None:
        nonlocal scans
        scans += 1
        return original()

    monkeypatch.setattr(procfs, "scan_groups", counting)
    leaders, zombies = await trio.to_thread.run_sync(_groups_with_a_zombie, 20)
    try:
        with trio.fail_after(10):
            async with trio.open_nursery() as nursery:
                for leader in leaders:
                    nursery.start_soon(functools.partial(_groups.kill_group, leader.pid, grace=5))
                    nursery.start_soon(trio.to_thread.run_sync, leader.wait)  # reap the leader
        assert all(leader.returncode == -signal.SIGTERM for leader in leaders)
        assert all(_groups._exists(leader.pid) for leader in leaders)  # the zombies
        assert scans <= 5, scans  # shared, not one (or more) per group
    finally:
        for process in [*leaders, *zombies]:
            process.kill()
            process.wait()


async def test_a_cancelled_shell_is_killed_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    signals: list[tuple[int, int]] = []
    original = _groups._signal_group

    def recording(pgid: int, sig: signal.Signals) -> None:
        signals.append((pgid, sig))
        original(pgid, sig)

    monkeypatch.setattr(_groups, "_signal_group", recording)
    started = tmp_path / "started"
    command = f"touch {started}; sleep 300"
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            run = functools.partial(
                _groups.run_in_group, command, tmp_path, timeout=60, output_cap=100
            )
            nursery.start_soon(run)
            while not started.exists():
                await trio.sleep(0.01)
            nursery.cancel_scope.cancel()
    assert [sig for _, sig in signals] == [signal.SIGTERM]


def test_a_failing_write_is_rolled_back_alone() -> None:
    conn = sqlite3.connect(":memory:", isolation_level=None)
    conn.execute("CREATE TABLE t (k TEXT PRIMARY KEY)")

    def insert(key: str, then_fail: bool = False) -> Any:
        def write(c: sqlite3.Connection) -> str:
            c.execute("INSERT INTO t VALUES (?)", (key,))
            if then_fail:
                raise ValueError(f"no {key}")
            return key

        return write

    jobs = [WriteJob(insert("a")), WriteJob(insert("b", then_fail=True)), WriteJob(insert("a"))]
    jobs.append(WriteJob(insert("c")))
    results = run_batch(conn, jobs)
    assert results[0] == outcome.Value("a")
    assert isinstance(results[1], outcome.Error) and str(results[1].error) == "no b"
    assert isinstance(results[2], outcome.Error)
    assert isinstance(results[2].error, sqlite3.IntegrityError)  # "a" was there already
    assert results[3] == outcome.Value("c")
    assert [r[0] for r in conn.execute("SELECT k FROM t ORDER BY k")] == ["a", "c"]
    assert not conn.in_transaction


async def test_writes_waiting_together_are_one_transaction(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    batches: list[int] = []
    original = _sqlite_commit.run_batch

    def counting(conn: sqlite3.Connection, jobs: Any) -> Any:
        batches.append(len(jobs))
        return original(conn, jobs)

    from omnigent.stores import sqlite as sqlite_module

    monkeypatch.setattr(sqlite_module, "run_batch", counting)
    async with omnigent.open_runtime(f"sqlite:///{tmp_path / 'db.sqlite'}") as rt:
        session = await rt.create_session((await rt.create_agent({"name": "plain"})).id)
        batches.clear()
        counts: list[int] = []

        async def add(n: int) -> None:
            counts.append(await probe(rt).store.add_inbox_item(session.id, f"inbox_{n}", "{}"))

        with trio.fail_after(10):
            async with trio.open_nursery() as nursery:
                for n in range(50):
                    nursery.start_soon(add, n)
        assert sorted(counts) == list(range(1, 51))  # each saw its own write committed
        assert await probe(rt).store.inbox_count(session.id) == 50
    assert sum(batches[:3]) >= 49 and len(batches) < 10, batches


async def test_a_stop_terminates_every_recorded_group_at_once(tmp_path: Path) -> None:
    """``RecordedGroups.terminate`` (what a stop calls before cancelling the session's
    tasks) signals each live recorded group, and never a leader whose start time is
    not the one recorded (its pid may have been reused)."""
    from omnigent.core.work._groups import RecordedGroups

    async with omnigent.open_runtime(f"sqlite:///{tmp_path / 'db.sqlite'}") as rt:
        session = await rt.create_session((await rt.create_agent({"name": "plain"})).id)
        groups = RecordedGroups(probe(rt).store, session.id)
        procs = [
            await trio.lowlevel.open_process(["sleep", "300"], start_new_session=True)
            for _ in range(3)
        ]
        try:
            for proc in procs:
                await groups.started(proc.pid)
            groups._started[procs[2].pid] += 1  # as if the pid now named another process
            assert groups.terminate() == 2
            with trio.fail_after(5):
                assert await procs[0].wait() == -signal.SIGTERM
                assert await procs[1].wait() == -signal.SIGTERM
            assert procs[2].returncode is None
        finally:
            for proc in procs:
                if proc.returncode is None:
                    proc.kill()
                await proc.wait()
