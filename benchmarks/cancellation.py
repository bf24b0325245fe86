"""Cancellation: ``stop_session`` on a session running 100 background shells and 10 children.

Run: ``python benchmarks/cancellation.py [--tasks 100] [--children 10] [--runs 5]``

A scripted orchestrator on a real SQLite file starts ``--tasks`` background tasks
(``sys_call_async`` of ``sys_os_shell`` running ``sleep``) and dispatches to
``--children`` sub-agents (``sys_session_send``), each of which runs ``sleep`` through
``sys_os_shell`` too, then waits in its turn. Once every ``sleep`` process is running,
``stop_session`` is timed until (a) it returns, (b) no ``sleep`` process is left (the
end of the first ``/proc`` scan that finds none; how many the scan begun as it returned
found is printed too), and (c) every child session is ``cancelled`` and every background
task has written its inbox item.

Baseline, in the same run: the same number of ``sleep`` processes, each in its own
process group, killed directly (``killpg`` SIGTERM to every group at once) and reaped:
what the operating system needs.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import trio
from _procs import median

import omnigent
from omnigent.testing import probe

MARK = "7211.5"  # `sleep 7211.5`: this benchmark's processes, told apart from others


def sleepers() -> list[int]:
    """Pids of the live (not zombie) ``sleep MARK`` processes."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if cmdline == b"sleep\0" + MARK.encode() + b"\0" and state != "Z":
            found.append(int(entry.name))
    return found


def spec(tasks: int, children: int) -> dict[str, Any]:
    shell = {"call": "sys_os_shell", "args": {"command": f"sleep {MARK}"}}
    background = {"call": "sys_call_async", "args": {"tool": "sys_os_shell", "args": shell["args"]}}
    dispatch = [
        {"call": "sys_session_send", "args": {"agent": "worker", "title": f"w{n}", "args": "go"}}
        for n in range(children)
    ]
    worker = {"name": "worker", "executor": {"config": {"harness": "scripted", "script": [shell]}}}
    return {
        "name": "lead",
        "async_enabled": True,
        "executor": {
            "config": {
                "harness": "scripted",
                "script": [*([background] * tasks), *dispatch, {"sleep": 3600}],
            }
        },
        "sub_agents": [worker],
        "tools": {"agents": ["worker"]},
    }


async def stop_run(db: str, tasks: int, children: int) -> dict[str, float]:
    async with omnigent.open_runtime(db) as rt:
        session = await rt.create_session((await rt.create_agent(spec(tasks, children))).id)
        await rt.send_message(session.id, "go")
        with trio.fail_after(60):
            while len(await trio.to_thread.run_sync(sleepers)) < tasks + children:  # noqa: ASYNC110 - /proc has no event
                await trio.sleep(0.05)
        child_ids = await probe(rt).store.descendant_ids(session.id)
        assert len(child_ids) == children, child_ids
        started = time.perf_counter()
        await rt.stop_session(session.id)
        returned = time.perf_counter() - started
        left = await trio.to_thread.run_sync(sleepers)
        at_return = len(left)  # a scan of /proc (~2-10 ms here) begun as stop returned
        while left:
            await trio.sleep(0.001)
            left = await trio.to_thread.run_sync(sleepers)
        gone = time.perf_counter() - started
        statuses = [(await rt.get_session(c)).status for c in child_ids]
        inbox = await probe(rt).store.inbox_count(session.id)
        assert all(s == "cancelled" for s in statuses), statuses
        assert inbox >= tasks, inbox
        return {"returned": returned, "gone": gone, "left": at_return}


def baseline(count: int) -> float:
    """Start ``count`` sleeps in their own groups; seconds to kill and reap them all."""
    procs = [
        subprocess.Popen(["sleep", MARK], start_new_session=True, stdin=subprocess.DEVNULL)
        for _ in range(count)
    ]
    while len(sleepers()) < count:
        time.sleep(0.01)
    started = time.perf_counter()
    for proc in procs:
        os.killpg(proc.pid, signal.SIGTERM)
    for proc in procs:
        proc.wait()
    return time.perf_counter() - started


async def main(tasks: int, children: int, runs: int) -> None:
    results: list[dict[str, float]] = []
    floors: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        for run in range(runs + 1):  # run 0 warms up
            db = f"sqlite:///{Path(tmp) / f'stop-{run}.db'}"
            result = await stop_run(db, tasks, children)
            floor = await trio.to_thread.run_sync(baseline, tasks + children)
            if run:
                results.append(result)
                floors.append(floor)
    ms = 1000
    returned = [r["returned"] * ms for r in results]
    gone = [r["gone"] * ms for r in results]
    print(f"stop_session with {tasks} background shells and {children} children, {runs} runs:")
    print(
        f"  stop_session returned: median {median(returned):.0f} ms "
        f"({' / '.join(f'{x:.0f}' for x in returned)})"
    )
    print(
        f"  every process gone:    median {median(gone):.0f} ms "
        f"({' / '.join(f'{x:.0f}' for x in gone)})"
    )
    left = [int(r["left"]) for r in results]
    print(f"  sleep processes left as it returned: {' / '.join(map(str, left))}")
    print(
        f"  baseline (killpg {tasks + children} groups, reap): median {median(floors) * ms:.1f} ms"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=100)
    parser.add_argument("--children", type=int, default=10)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    trio.run(main, args.tasks, args.children, args.runs)
