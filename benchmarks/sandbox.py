"""The sandbox's cost: ``sys_os_shell`` running ``true``, sandboxed and not, in one run.

Run: ``python benchmarks/sandbox.py [--calls 200] [--files 0]``

Each round runs the tool once in each configuration, in turn, so all of them see the
same machine; the per-call times are the tool's own (``sys_os_shell(cwd, {"command":
"true"})``: argument checks, the sandbox opened, the hidden-entry scan, the process
group started, waited for and killed):

* ``none`` — no sandbox (the baseline);
* ``linux_bwrap`` — the default sandbox: no network, the home and hidden entries
  masked;
* ``linux_bwrap + egress`` — with ``allow_network`` and ``egress_rules``: the egress
  proxy is opened for the call, and the command starts under the in-sandbox bridge.

``--files N`` fills the workspace with N files (a tenth of them hidden, in 20
directories) to show what the hidden-entry scan and its masks add.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import trio
from _procs import median, percentile

from omnigent.processes.sandbox import Backend, SandboxPolicy, find_bwrap
from omnigent.tools import sys_os_shell


def fill(workspace: Path, files: int) -> None:
    for index in range(files):
        folder = workspace / f"dir{index % 20}"
        folder.mkdir(exist_ok=True)
        name = f".hidden{index}" if index % 10 == 0 else f"file{index}.txt"
        (folder / name).write_text("x\n")


async def one(workspace: Path, policy: SandboxPolicy | None) -> float:
    started = time.perf_counter()
    output = await sys_os_shell(workspace, {"command": "true"}, sandbox=policy)
    elapsed = time.perf_counter() - started
    result = json.loads(output)
    assert result["exit_code"] == 0, output
    return elapsed


async def main(calls: int, files: int) -> None:
    if find_bwrap() is None:
        raise SystemExit("bubblewrap is not installed (apt-get install bubblewrap)")
    with tempfile.TemporaryDirectory() as tmp:
        workspace = Path(await trio.Path(tmp).resolve())
        await trio.to_thread.run_sync(fill, workspace, files)
        configurations: dict[str, SandboxPolicy | None] = {
            "none": None,
            "linux_bwrap": SandboxPolicy.resolve(Backend.LINUX_BWRAP, workspace),
            "linux_bwrap + egress": SandboxPolicy.resolve(
                Backend.LINUX_BWRAP,
                workspace,
                allow_network=True,
                egress_rules=["GET pypi.org/**"],
            ),
        }
        times: dict[str, list[float]] = {name: [] for name in configurations}
        for policy in configurations.values():  # warm up: the probe, caches, imports
            await one(workspace, policy)
        for _ in range(calls):
            for name, policy in configurations.items():
                times[name].append(await one(workspace, policy))
    base = median(times["none"])
    print(f"sys_os_shell `true`, {calls} calls each, workspace of {files} files")
    print(f"{'configuration':<22} {'median':>9} {'p90':>9} {'extra (median)':>15}")
    for name, values in times.items():
        print(
            f"{name:<22} {median(values) * 1000:7.2f}ms {percentile(values, 0.9) * 1000:7.2f}ms "
            f"{(median(values) - base) * 1000:+13.2f}ms"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--files", type=int, default=0)
    options = parser.parse_args()
    trio.run(main, options.calls, options.files)
