"""``omnigent run --server``: the spec uploaded, the work in this directory, the turn
streamed from the server, the same exit codes; Ctrl-C interrupts it on the server."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import trio

from ..reliability.serve_rig import ROOT, server_env, stop
from .rig import TOKEN, start_server


def spec_file(folder: Path, script: list[dict[str, object]]) -> Path:
    spec = {"name": "here", "executor": {"config": {"harness": "scripted", "script": script}}}
    path = folder / "here.json"
    path.write_text(json.dumps(spec))
    return path


def session_of(stderr: bytes) -> str:
    """The session id ``run`` names on stderr (``session conv_… (continue it …)``)."""
    return stderr.decode().rsplit("--session ", 1)[1].split(")")[0]


def cli_env(root: Path) -> dict[str, str]:
    env = server_env(root)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *sys.path])
    env["OMNIGENT_RUNNER_TOKEN"] = TOKEN
    return env


async def test_run_on_a_server_works_here_and_ends_as_a_local_run(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    script = [
        {"call": "sys_os_shell", "args": {"command": "echo made-here > out.txt"}},
        {"say": "done remotely"},
    ]
    path = spec_file(project, script)
    with trio.fail_after(60):
        served = await start_server(tmp_path / "server")
        try:
            command = [sys.executable, "-m", "omnigent", "run", "--server", served.url]
            done = await trio.run_process(
                [*command, str(path), "do it"],
                cwd=project,
                env=cli_env(tmp_path / "cli"),
                capture_stdout=True,
                capture_stderr=True,
                check=False,
            )
            assert done.returncode == 0, done.stderr.decode()
            assert "done remotely" in done.stdout.decode()
            assert (project / "out.txt").read_text() == "made-here\n"  # here, not there
            assert not list((tmp_path / "server").rglob("out.txt"))
            session_id = session_of(done.stderr)
            async with httpx.AsyncClient(base_url=served.url) as http:
                snapshot = (await http.get(f"/v1/sessions/{session_id}")).json()
                assert snapshot["status"] == "idle"
                assert snapshot["runner_id"].startswith("run-")
                # The runner left with the command.
                runners = (await http.get("/v1/runners")).json()["data"]
                assert [r["online"] for r in runners] == [False]
            # A failing turn exits 1, as a local run does.
            failing = spec_file(project, [{"fail": "no luck"}])
            failed = await trio.run_process(
                [*command, str(failing), "try"],
                cwd=project,
                env=cli_env(tmp_path / "cli"),
                capture_stdout=True,
                capture_stderr=True,
                check=False,
            )
            assert failed.returncode == 1, failed.stderr.decode()
            assert "no luck" in failed.stderr.decode() + failed.stdout.decode()
        finally:
            await stop(served)


async def test_ctrl_c_interrupts_the_turn_on_the_server(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    path = spec_file(project, [{"say": "waiting"}, {"sleep": 600}])
    with trio.fail_after(60):
        served = await start_server(tmp_path / "server")
        try:
            process = await trio.lowlevel.open_process(
                [sys.executable, "-m", "omnigent", "run", "--server", served.url, str(path), "x"],
                cwd=project,
                env=cli_env(tmp_path / "cli"),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
            assert process.stdout is not None and process.stderr is not None
            said = b""
            while b"waiting" not in said:
                chunk = await process.stdout.receive_some()
                assert chunk, said
                said += chunk
            process.send_signal(signal.SIGINT)
            assert await process.wait() == 130
            errors = b""
            async for chunk in process.stderr:
                errors += chunk
            session_id = session_of(errors)
            async with httpx.AsyncClient(base_url=served.url) as http:
                snapshot = (await http.get(f"/v1/sessions/{session_id}")).json()
            assert snapshot["status"] == "cancelled", (snapshot, errors.decode())
        finally:
            await stop(served)
