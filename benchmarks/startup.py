"""Start-up: ``omnigent --version`` and ``omnigent serve`` ready, against bare Python.

Run: ``python benchmarks/startup.py [--rounds 15] [--serve-rounds 7]``

(a) ``omnigent --version`` (the installed console script) against ``python -c "import
    argparse"``: each a fresh process, timed from spawn to exit, alternately.
(b) ``omnigent serve --port 0`` on a new SQLite file against a bare Quart-Trio app on
    Hypercorn (``benchmarks/bare.py health``: one ``GET /health`` route): each timed from
    spawn to its first ``GET /health`` answered 200 (the URL read from the line it prints
    once it listens, then ``/health`` asked every millisecond until it answers),
    alternately, each stopped before the next starts.

Medians, the ranges and the ratios are printed.

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

import httpx
import trio
from _procs import HERE, OMNIGENT, median, served


def timed_run(argv: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, env=env)
    return time.perf_counter() - started


async def ready(
    argv: list[str], marker: str, client: httpx.AsyncClient, env: dict[str, str]
) -> float:
    """Seconds from spawning ``argv`` to its first ``GET /health`` answered 200."""
    started = time.perf_counter()
    async with served(argv, marker, env=env) as (url, _pid):
        base = url.removesuffix("/v1")
        while True:
            try:
                if (await client.get(f"{base}/health")).status_code == 200:
                    return time.perf_counter() - started
            except httpx.TransportError:
                pass
            await trio.sleep(0.001)
    raise AssertionError("unreachable")


def show(name: str, values: list[float]) -> None:
    print(
        f"  {name:<30} median {median(values) * 1000:7.1f} ms"
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
    script = shutil.which("omnigent")
    version = [script, "--version"] if script else [*OMNIGENT, "--version"]
    bare_python = [sys.executable, "-c", "import argparse"]
    times: dict[str, list[float]] = {"python -c 'import argparse'": [], "omnigent --version": []}
    for number in range(args.rounds + 1):  # round 0 warms the file cache
        pair = [("python -c 'import argparse'", bare_python), ("omnigent --version", version)]
        if number % 2:
            pair.reverse()
        for name, argv in pair:
            seconds = timed_run(argv, env)
            if number:
                times[name].append(seconds)
    print(f"(a) a fresh process, spawn to exit, {args.rounds} rounds:")
    for name, values in times.items():
        show(name, values)
    ratio = median(times["omnigent --version"]) / median(times["python -c 'import argparse'"])
    print(f"  omnigent --version / python -c 'import argparse': {ratio:.2f}x")

    serve: dict[str, list[float]] = {"bare Quart-Trio app": [], "omnigent serve (SQLite)": []}
    async with httpx.AsyncClient(timeout=5) as client:
        with tempfile.TemporaryDirectory() as tmp:
            for number in range(args.serve_rounds + 1):
                db = f"sqlite:///{Path(tmp) / f'startup{number}.db'}"
                sides = [
                    (
                        "bare Quart-Trio app",
                        [sys.executable, str(HERE / "bare.py"), "health"],
                        "serving on ",
                    ),
                    (
                        "omnigent serve (SQLite)",
                        [*OMNIGENT, "serve", "--port", "0", "--db", db],
                        "omnigent serving on ",
                    ),
                ]
                if number % 2:
                    sides.reverse()
                for name, argv, marker in sides:
                    seconds = await ready(argv, marker, client, env)
                    if number:
                        serve[name].append(seconds)
    print(f"(b) spawn to the first GET /health 200, {args.serve_rounds} rounds:")
    for name, values in serve.items():
        show(name, values)
    ratio = median(serve["omnigent serve (SQLite)"]) / median(serve["bare Quart-Trio app"])
    print(f"  omnigent serve / bare Quart-Trio app: {ratio:.2f}x")
    print("load average after:  " + " / ".join(f"{x:.2f}" for x in os.getloadavg()))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--serve-rounds", type=int, default=7)
    parser.add_argument(
        "--from-source",
        action="store_true",
        help="keep the environment's bytecode setting (here: compile every start)",
    )
    trio.run(main, parser.parse_args())
