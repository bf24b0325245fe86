"""A flame graph of ``omnigent serve``'s start: spawn to its first ``GET /health`` 200.

Run: ``python benchmarks/startup_flame.py OUT.svg [--rate 500]``

``py-spy record`` (the ``bench`` extra) runs ``omnigent serve --port 0`` on a new
SQLite file and samples it from its first instruction; once ``/health`` answers 200 the
server is killed (``SIGKILL``: its shutdown is not part of its start), and py-spy writes
the graph. As in ``startup.py``, a first start compiles the bytecode into a private
``PYTHONPYCACHEPREFIX`` and the profiled one loads it, as an installed copy does.
``PYTHONPATH`` chooses the build. Read the graph with ``flame_summary.py``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

_MARKER = b"omnigent serving on "


def start(argv: list[str], env: dict[str, str], workdir: str) -> float:
    """Run ``argv`` (which starts ``omnigent serve``) until ``/health`` answers; kill
    the server; seconds to that answer."""
    started = time.perf_counter()
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, env=env, cwd=workdir)
    assert process.stdout is not None
    try:
        line = b""
        while _MARKER not in line:
            line = process.stdout.readline()
            if not line:
                raise RuntimeError("the server exited before it listened")
        base = line.split(_MARKER, 1)[1].split()[0].decode()
        with httpx.Client() as client:
            while True:
                try:
                    if client.get(f"{base}/health").status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                time.sleep(0.001)
        elapsed = time.perf_counter() - started
        # The server is py-spy's child (of any of its threads), or the process itself.
        found = subprocess.run(["pgrep", "-P", str(process.pid)], capture_output=True, text=True)
        children = found.stdout.split()
        os.kill(int(children[0]) if children else process.pid, signal.SIGKILL)
        process.wait(timeout=60)
        return elapsed
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("output", type=Path)
    parser.add_argument("--rate", type=int, default=500, help="samples per second")
    args = parser.parse_args()
    py_spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "PYTHONPYCACHEPREFIX": f"{tmp}/pycache"}
        env.pop("PYTHONDONTWRITEBYTECODE", None)

        def serve(name: str) -> list[str]:
            return [
                sys.executable,
                "-m",
                "omnigent",
                "serve",
                "--port",
                "0",
                "--db",
                f"sqlite:///{tmp}/{name}.db",
            ]

        warm = start(serve("warm"), env, tmp)
        record = [py_spy, "record", "--rate", str(args.rate), "--format", "flamegraph"]
        profiled = start(
            [*record, "--output", str(args.output.resolve()), "--", *serve("x")], env, tmp
        )
    print(
        f"compiling start {warm * 1000:.0f} ms; profiled start {profiled * 1000:.0f} ms "
        f"(sampling slows it); graph: {args.output}"
    )


if __name__ == "__main__":
    main()
