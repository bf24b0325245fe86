"""Shared by the benchmarks: servers in their own processes, small statistics, and
a bare session row for the store-level benchmarks.

A benchmark that compares two servers runs each in its own process, so neither
shares a Python interpreter (or its GIL) with the client measuring it.

Profiling: with ``OMNIGENT_BENCH_PROFILE=DIR`` in the environment, every ``omnigent
serve`` a benchmark starts is sampled by ``py-spy`` (the ``bench`` extra) from the
moment it is ready until it ends, and its flame graph is written to
``DIR/serve-PID.svg`` — the server alone, not the client or the model measuring it
(``OMNIGENT_BENCH_PROFILE_RATE``: samples per second, 200 by default).
Timings taken meanwhile are the profiled server's, so read them as such.
"""

from __future__ import annotations

import os
import shutil
import signal
import statistics
import subprocess
import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

import trio

from omnigent.stores import SessionRow

HERE = Path(__file__).parent
OMNIGENT = [sys.executable, "-m", "omnigent"]
PROFILE_DIR = os.environ.get("OMNIGENT_BENCH_PROFILE")
PROFILE_RATE = os.environ.get("OMNIGENT_BENCH_PROFILE_RATE", "200")  # samples per second
_SERVE_MARKER = "omnigent serving on "


@asynccontextmanager
async def served(
    argv: Sequence[str],
    marker: str,
    *,
    env: dict[str, str] | None = None,
    cwd: str | Path | None = None,
) -> AsyncIterator[tuple[str, int]]:
    """Run ``argv`` until it prints a line containing ``marker`` followed by a URL.

    ``cwd``: where it runs (``python -m`` imports from there first).
    Yields ``(url, pid)``; on exit the process gets SIGTERM, then SIGKILL after 5 s.
    """
    profiler: trio.Process | None = None
    process = await trio.lowlevel.open_process(
        list(argv),
        stdout=subprocess.PIPE,
        env={**os.environ, **(env or {})},
        start_new_session=True,
        cwd=cwd,
    )
    try:
        assert process.stdout is not None
        buffer = b""
        with trio.fail_after(30):
            while marker.encode() not in buffer or not buffer.endswith(b"\n"):
                chunk = await process.stdout.receive_some()
                if not chunk:
                    raise RuntimeError(f"{argv[:3]} exited before it was ready")
                buffer += chunk
        line = next(x for x in buffer.decode().splitlines() if marker in x)
        if PROFILE_DIR and marker == _SERVE_MARKER:
            profiler = await _sample(process.pid, trio.Path(PROFILE_DIR))
        yield line.split(marker, 1)[1].split()[0], process.pid
    finally:
        with trio.CancelScope(shield=True):
            if process.returncode is None:
                process.send_signal(signal.SIGTERM)
                with trio.move_on_after(5):
                    await process.wait()
            if process.returncode is None:
                process.kill()
                await process.wait()
            if process.stdout is not None:
                await process.stdout.aclose()
            if profiler is not None:  # it writes its graph once its target has ended
                with trio.move_on_after(30):
                    await profiler.wait()
                if profiler.returncode is None:
                    profiler.kill()
                    await profiler.wait()


async def _sample(pid: int, into: trio.Path) -> trio.Process:
    """``py-spy record`` attached to ``pid`` until it exits: ``into/serve-PID.svg``.

    Only samples holding the GIL (``--gil``): the event loop's work and every thread's
    Python, not a thread waiting (py-spy counts an idle worker thread's lock and the
    loop's ``epoll`` wait as busy otherwise), nor SQLite's own work with the GIL released.
    """
    py_spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    await into.mkdir(parents=True, exist_ok=True)
    svg = into / f"serve-{pid}.svg"
    argv = [py_spy, "record", "--pid", str(pid), "--rate", PROFILE_RATE, "--gil"]
    argv += ["--format", "flamegraph"]
    return await trio.lowlevel.open_process(
        [*argv, "--output", str(svg)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )


def percentile(values: Sequence[float], fraction: float) -> float:
    """The ``fraction`` percentile (0..1) of ``values``, nearest rank."""
    ordered = sorted(values)
    rank = max(0, min(len(ordered) - 1, round(fraction * len(ordered) + 0.5) - 1))
    return ordered[rank]


def median(values: Sequence[float]) -> float:
    return statistics.median(values)


def cpu_seconds(pid: int) -> float:
    """User + system CPU time process ``pid`` has used so far (all its threads)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_kib(pid: int) -> int:
    """The resident set size of process ``pid`` in KiB (Linux ``VmRSS``)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for {pid}")


def session_row(session_id: str) -> SessionRow:
    """A session with nothing in it, for benchmarks that write to a store directly."""
    return SessionRow(
        id=session_id,
        agent_id="agent_x",
        agent_version=1,
        owner="local",
        title=None,
        parent_session_id=None,
        root_session_id=session_id,
        harness_override=None,
        model_override=None,
        labels={},
        status="idle",
        last_event_id=0,
        turn_count=0,
        created_at=0.0,
    )
