"""An operator's spec file runs from any directory: a program it names beside it
(``command: [python, echo_harness.py]``) is found there, as are its modules (see
``tests/test_python_tools.py``). Before, ``examples/external-echo.yaml`` ran only from
the repository root."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import yaml

from omnigent.spec import AgentSpec

REPO = Path(__file__).resolve().parent.parent


def test_the_external_echo_example_runs_from_any_directory(tmp_path: Path) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "omnigent",
            "run",
            str(REPO / "examples" / "external-echo.yaml"),
            "hello",
        ],
        cwd=tmp_path,
        env={**os.environ, "OMNIGENT_HOME": str(tmp_path / "home")},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "echo: hello\n"


def test_a_command_naming_a_file_beside_the_spec_is_made_absolute(tmp_path: Path) -> None:
    (tmp_path / "harness.py").write_text("")
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "server").write_text("")
    spec = {
        "name": "files",
        "executor": {"config": {"harness": "external", "command": ["python", "harness.py", "-v"]}},
        "mcp_servers": [
            {"name": "local", "command": ["bin/server", "--root", "data"]},
            {"name": "installed", "command": ["python", "-m", "some_server"]},
        ],
        "sub_agents": [
            {
                "name": "sub",
                "executor": {"config": {"harness": "external", "command": ["./harness.py"]}},
            }
        ],
    }
    path = tmp_path / "files.yaml"
    path.write_text(yaml.safe_dump(spec))
    loaded = AgentSpec.load(path)
    assert loaded.executor.config.command == ("python", str(tmp_path / "harness.py"), "-v")
    assert loaded.mcp_servers[0].command == (str(tmp_path / "bin" / "server"), "--root", "data")
    assert loaded.mcp_servers[1].command == ("python", "-m", "some_server")
    assert loaded.sub_agents[0].executor.config.command == (str(tmp_path / "harness.py"),)
    # Text a client sends has no folder: nothing is resolved.
    assert AgentSpec.from_yaml(path.read_text()).executor.config.command == (
        "python",
        "harness.py",
        "-v",
    )
