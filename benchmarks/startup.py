"""Start-up: ``omnigent --version`` and ``omnigent serve`` ready, against bare Python.

Run: ``python benchmarks/startup.py [--rounds 15] [--serve-rounds 7]``

(a) ``omnigent --version`` (the installed console script) against ``python -c "import
    argparse"``: each a fresh process, timed from spawn to exit, alternately.
(b) ``omnigent serve --port 0`` on a new SQLite file against a bare Quart-Trio app on
    Hypercorn (``benchmarks/bare.py health``: one ``GET /health`` route): each timed from
    spawn to its first ``GET /health`` answered 200 (the URL read from the line it prints
    once it listens, then ``/health`` asked every millisecond until it answers),
    alternately, each stopped before the next starts. The CPU time each process used
    by then is reported too: on a shared machine it swings far less than the time.

Medians, the ranges and the ratios are printed.

``--against TREE`` also runs both commands from another source tree (``PYTHONPATH=TREE``:
a checkout of ``main``, say), in the same rounds, the order rotating: the two builds
are then compared under the same load, each also as a ratio to its bare baseline.

Bytecode: every process runs with ``PYTHONPYCACHEPREFIX`` set to a fresh directory and
``PYTHONDONTWRITEBYTECODE`` unset, so the warm-up round compiles each module once (into
that directory, not the source tree) and the timed rounds load bytecode — as an
installed package does. (A machine that sets ``PYTHONDONTWRITEBYTECODE`` would
otherwise compile omnigent's two hundred modules from source on every start, a cost no
installed copy pays; ``--from-source`` measures that instead.)
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TypeVar

import httpx
import trio
from _procs import HERE, OMNIGENT, cpu_seconds, median, served

T = TypeVar("T")


def timed_run(argv: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, env=env, cwd=tempfile.gettempdir())
    return time.perf_counter() - started


async def ready(
    argv: list[str], marker: str, client: httpx.AsyncClient, env: dict[str, str]
) -> tuple[float, float]:
    """Seconds from spawning ``argv`` to its first ``GET /health`` answered 200, and
    the CPU seconds the process used by then (what a busy machine inflates less)."""
    started = time.perf_counter()
    # Run from elsewhere: ``python -m omnigent`` imports from the current directory
    # first, and the build is the one ``PYTHONPATH`` names (see --against).
    async with served(argv, marker, env=env, cwd=tempfile.gettempdir()) as (url, pid):
        base = url.removesuffix("/v1")
        while True:
            try:
                if (await client.get(f"{base}/health")).status_code == 200:
                    return time.perf_counter() - started, cpu_seconds(pid)
            except httpx.TransportError:
                pass
            await trio.sleep(0.001)
    raise AssertionError("unreachable")


def show(name: str, values: list[float]) -> None:
    print(
        f"  {name:<36} median {median(values) * 1000:7.1f} ms"
        f"  (range {min(values) * 1000:.1f}–{max(values) * 1000:.1f})"
    )


async def main(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as cache, tempfile.TemporaryDirectory() as home:
        os.environ["OMNIGENT_HOME"] = home  # private (0700), as omnigent wants its home
        if not args.from_source:  # for every child process
            os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
            os.environ["PYTHONPYCACHEPREFIX"] = cache
        await measure(args, dict(os.environ))


async def measure(args: argparse.Namespace, env: dict[str, str]) -> None:
    how = "bytecode compiled once" if "PYTHONPYCACHEPREFIX" in env else "from source"
    print(f"modules: {how}")
    print("load average before: " + " / ".join(f"{x:.2f}" for x in os.getloadavg()))
    builds = {"": env}  # this tree, and with --against the other one
    if args.against is not None:
        builds[f" [{args.against.name}]"] = {**env, "PYTHONPATH": str(args.against.resolve())}
    script = shutil.which("omnigent")
    version = [script, "--version"] if script else [*OMNIGENT, "--version"]
    bare_python = "python -c 'import argparse'"
    version_sides = [(bare_python, [sys.executable, "-c", "import argparse"], env)]
    version_sides += [(f"omnigent --version{tag}", version, e) for tag, e in builds.items()]
    times: dict[str, list[float]] = {name: [] for name, _, _ in version_sides}
    for number in range(args.rounds + 1):  # round 0 warms the file cache
        for name, argv, side_env in _rotated(version_sides, number):
            seconds = timed_run(argv, side_env)
            if number:
                times[name].append(seconds)
    print(f"(a) a fresh process, spawn to exit, {args.rounds} rounds:")
    for name, values in times.items():
        show(name, values)
    for tag in builds:
        ratio = median(times[f"omnigent --version{tag}"]) / median(times[bare_python])
        print(f"  omnigent --version{tag} / python -c 'import argparse': {ratio:.2f}x")

    bare_app = "bare Quart-Trio app"
    serve: dict[str, list[float]] = {bare_app: []}
    serve.update({f"omnigent serve (SQLite){tag}": [] for tag in builds})
    cpu: dict[str, list[float]] = {name: [] for name in serve}
    async with httpx.AsyncClient(timeout=5) as client:
        with tempfile.TemporaryDirectory() as tmp:
            for number in range(args.serve_rounds + 1):
                sides = [
                    (
                        bare_app,
                        [sys.executable, str(HERE / "bare.py"), "health"],
                        "serving on ",
                        env,
                    )
                ]
                for index, (tag, build_env) in enumerate(builds.items()):
                    db = f"sqlite:///{Path(tmp) / f'startup{number}-{index}.db'}"
                    argv = [*OMNIGENT, "serve", "--port", "0", "--db", db]
                    sides.append(
                        (f"omnigent serve (SQLite){tag}", argv, "omnigent serving on ", build_env)
                    )
                for name, argv, marker, side_env in _rotated(sides, number):
                    seconds, used = await ready(argv, marker, client, side_env)
                    if number:
                        serve[name].append(seconds)
                        cpu[name].append(used)
    print(f"(b) spawn to the first GET /health 200, {args.serve_rounds} rounds:")
    for name, values in serve.items():
        show(name, values)
    for tag in builds:
        ratio = median(serve[f"omnigent serve (SQLite){tag}"]) / median(serve[bare_app])
        print(f"  omnigent serve{tag} / bare Quart-Trio app: {ratio:.2f}x")
    if args.against is not None:
        tag = next(t for t in builds if t)
        ours, theirs = serve["omnigent serve (SQLite)"], serve[f"omnigent serve (SQLite){tag}"]
        print(f"  omnigent serve / omnigent serve{tag}: {median(ours) / median(theirs):.2f}x")
    print("    CPU seconds (user + system) each process used by its first answer:")
    for name, values in cpu.items():
        show(name, values)
    for tag in builds:
        ratio = median(cpu[f"omnigent serve (SQLite){tag}"]) / median(cpu[bare_app])
        print(f"  CPU: omnigent serve{tag} / bare Quart-Trio app: {ratio:.2f}x")
    print("load average after:  " + " / ".join(f"{x:.2f}" for x in os.getloadavg()))


def _rotated(sides: list[T], number: int) -> list[T]:
    """``sides`` rotated by the round's number, so each goes first as often."""
    shift = number % len(sides)
    return sides[shift:] + sides[:shift]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--serve-rounds", type=int, default=7)
    parser.add_argument(
        "--against",
        type=Path,
        metavar="TREE",
        help="also run both commands from this source tree, in the same rounds",
    )
    parser.add_argument(
        "--from-source",
        action="store_true",
        help="keep the environment's bytecode setting (here: compile every start)",
    )
    trio.run(main, parser.parse_args())
