"""How long ``omnigent --version`` and ``omnigent --help`` take, against bare Python.

``python benchmarks/cli_startup.py [--runs N]``

Each command runs ``N`` times (default 30) as a fresh process, alternating with the
baseline — ``python -c "import argparse"``, the least a Python command line can cost —
so both see the same machine. Printed: the median and the 90th percentile of each, and
the ratio of the medians (the target is within 3x: the parser declares only the command
that runs, so neither option imports the runtime; see ``omnigent/cli/_parser.py``).
``omnigent sessions list --help`` is measured too: one command declared in full, which
imports what that command uses.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

COMMANDS = {
    "baseline: python -c 'import argparse'": [sys.executable, "-c", "import argparse"],
    "omnigent --version": [sys.executable, "-m", "omnigent", "--version"],
    "omnigent --help": [sys.executable, "-m", "omnigent", "--help"],
    "omnigent sessions list --help": [sys.executable, "-m", "omnigent", "sessions", "list", "-h"],
}


def once(command: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    runs = parser.parse_args().runs
    times: dict[str, list[float]] = {name: [] for name in COMMANDS}
    for name, command in COMMANDS.items():
        once(command)  # warm the page cache and the bytecode cache first
        times[name].clear()
    for _ in range(runs):
        for name, command in COMMANDS.items():
            times[name].append(once(command))
    baseline = statistics.median(times[next(iter(COMMANDS))])
    print(f"{'command':<40} {'median':>9} {'p90':>9} {'x baseline':>11}")
    for name, values in times.items():
        median = statistics.median(values)
        p90 = statistics.quantiles(values, n=10)[-1]
        print(f"{name:<40} {median * 1000:7.1f}ms {p90 * 1000:7.1f}ms {median / baseline:10.2f}x")


if __name__ == "__main__":
    main()
