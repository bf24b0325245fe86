"""``omnigent serve`` on the command line: mistakes are one ``Error:`` line and exit 2,
``--help`` shows the defaults, ``--agents DIR`` loads every spec format."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from omnigent.cli import main

SPEC_YAML = "name: {name}\nexecutor: {{type: omnigent, config: {{harness: scripted}}}}\n"
SPEC_JSON = '{{"name": "{name}", "executor": {{"config": {{"harness": "scripted"}}}}}}'


def omnigent(*args: str, home: Path, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "OMNIGENT_HOME": str(home)}
    env.pop("OMNIGENT_DB", None)
    return subprocess.run(
        [sys.executable, "-m", "omnigent", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        check=False,
    )


def assert_one_error_line(done: subprocess.CompletedProcess[str], *parts: str) -> None:
    assert done.returncode == 2, done
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("Error: "), done.stderr
    for part in parts:
        assert part in lines[0], done.stderr
    assert done.stdout == ""


@contextmanager
def busy_port() -> Iterator[int]:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        yield taken.getsockname()[1]


def test_a_busy_port(tmp_path: Path) -> None:
    with busy_port() as port:
        done = omnigent("serve", "--port", str(port), home=tmp_path)
    assert_one_error_line(done, f"127.0.0.1:{port}", "already in use")


@pytest.mark.parametrize("port", ["99999", "-1"])
def test_a_port_out_of_range(tmp_path: Path, port: str) -> None:
    assert_one_error_line(omnigent("serve", "--port", port, home=tmp_path), "--port", port)


def test_a_host_that_does_not_resolve(tmp_path: Path) -> None:
    done = omnigent("serve", "--host", "no-such-host.invalid", "--port", "0", home=tmp_path)
    assert_one_error_line(done, "no-such-host.invalid", "cannot resolve")


def test_a_missing_agents_folder(tmp_path: Path) -> None:
    done = omnigent("serve", "--port", "0", "--agents", str(tmp_path / "nope"), home=tmp_path)
    assert_one_error_line(done, "--agents", "no such directory")


def test_a_bad_spec_in_the_agents_folder_names_the_file(tmp_path: Path) -> None:
    (tmp_path / "agents").mkdir()
    (tmp_path / "agents" / "broken.yml").write_text("name: Bad Name\n")
    done = omnigent("serve", "--port", "0", "--agents", str(tmp_path / "agents"), home=tmp_path)
    assert done.returncode == 2, done
    assert done.stderr.startswith(f"Error: {tmp_path / 'agents' / 'broken.yml'}: "), done.stderr
    assert "Traceback" not in done.stderr


def test_a_bad_policy_module_name(tmp_path: Path) -> None:
    done = omnigent("serve", "--port", "0", "--policy-module", "not a module", home=tmp_path)
    assert done.returncode == 2, done
    assert done.stderr.startswith("Error: "), done.stderr
    assert "not a module" in done.stderr
    assert "Traceback" not in done.stderr


def test_help_shows_every_default(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    for option, default in [
        ("--host", "127.0.0.1"),
        ("--port", "6767"),
        ("--auth", "none"),
        ("--db", "$OMNIGENT_DB, else sqlite:///$OMNIGENT_HOME/omnigent.db"),
        ("--agents", "none"),
        ("--policies", "none"),
        ("--policy-module", "none"),
    ]:
        assert option in text
        assert f"(default: {default})" in text, option


def _serve(tmp_path: Path, *args: str) -> tuple[subprocess.Popen[str], str]:
    env = {**os.environ, "OMNIGENT_HOME": str(tmp_path / "home")}
    process = subprocess.Popen(
        [sys.executable, "-m", "omnigent", "serve", "--port", "0", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    assert process.stdout is not None
    line = process.stdout.readline()  # the process prints its URL once it listens
    assert line.startswith("omnigent serving on "), line
    return process, line.split(" on ", 1)[1].strip()


def _stop(process: subprocess.Popen[str]) -> None:
    process.send_signal(signal.SIGINT)
    try:
        assert process.wait(timeout=15) == 0
    finally:
        if process.returncode is None:
            process.kill()
            process.wait()
        assert process.stdout is not None
        process.stdout.close()


def test_agents_folder_loads_yaml_yml_and_json_and_keeps_unchanged_versions(
    tmp_path: Path,
) -> None:
    agents = tmp_path / "agents"
    agents.mkdir()
    (agents / "a.yaml").write_text(SPEC_YAML.format(name="from-yaml"))
    (agents / "b.yml").write_text(SPEC_YAML.format(name="from-yml"))
    (agents / "c.json").write_text(SPEC_JSON.format(name="from-json"))
    (agents / "notes.txt").write_text("not a spec")
    db = f"sqlite:///{tmp_path / 'o.db'}"
    for _ in range(2):  # the second start registers the same specs again
        process, url = _serve(tmp_path, "--db", db, "--agents", str(agents))
        try:
            listed = httpx.get(f"{url}/v1/agents", timeout=10).json()["data"]
        finally:
            _stop(process)
        assert sorted((a["name"], a["version"]) for a in listed) == [
            ("from-json", 1),
            ("from-yaml", 1),
            ("from-yml", 1),
        ]
