"""The README, run as a newcomer would: every shell block, top to bottom, in one shell.

The first block's first line (a fresh venv, ``pip install -e .``, a scripted run) runs
as written, in a copy of the repository; its second line is this test suite, and is
not run again from inside it. Every later ``sh`` block runs as written, and the
``python`` block runs where it stands (the shell's environment, the mock model from an
earlier block). The only change made to the text is the port numbers (6767, 8000),
swapped for free ones so that the test cannot collide with anything else on the
machine. The model the README talks to is ``omnigent mock-llm``, which it starts itself.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
README = (REPO / "README.md").read_text(encoding="utf-8")
BLOCK = re.compile(r"^```(\w+)\n(.*?)^```", re.M | re.S)
INSTALL_AND_RUN = (
    "python3 -m venv .venv && . .venv/bin/activate && pip install -e . && "
    'omnigent run examples/hello-scripted.yaml "Hello"'
)
TESTS = "pip install -e '.[test]' && python -m pytest"


def blocks() -> list[tuple[str, str]]:
    return [(m.group(1), m.group(2)) for m in BLOCK.finditer(README)]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def python_block() -> str:
    (code,) = [code for lang, code in blocks() if lang == "python"]
    return code


def test_the_readme_starts_with_its_two_commands() -> None:
    assert README.startswith("# omnigent\n\n```sh\n")
    lang, code = blocks()[0]
    assert lang == "sh"
    assert code.splitlines() == [INSTALL_AND_RUN, TESTS]


def test_every_block_is_a_shell_or_python_block() -> None:
    assert {lang for lang, _ in blocks()} == {"sh", "python"}


def readme_script(ports: dict[str, int]) -> str:
    """The README's blocks as one bash script, with ``ports`` swapped in."""
    parts = [
        "set -euo pipefail",
        # Whatever the script left running in the background is stopped with it.
        "trap 'kill $(jobs -p) 2>/dev/null || true' EXIT",
    ]
    for index, (lang, code) in enumerate(blocks()):
        if index == 0:
            code = code.replace(TESTS, ": the test suite, which is running this")
        if lang == "python":
            code = f"python - <<'README_PYTHON'\n{code}README_PYTHON\n"
        parts.append(f"echo '== README block {index}'\n{code}")
    script = "\n".join(parts)
    for old, new in ports.items():
        script = re.sub(rf"\b{old}\b", str(new), script)
    return script


@pytest.mark.timeout(300)
def test_the_readme_runs_top_to_bottom(tmp_path: Path) -> None:
    copy = tmp_path / "omnigent"
    copy.mkdir()
    for name in ("pyproject.toml", "README.md", "omnigent", "examples"):
        source = REPO / name
        if source.is_dir():
            shutil.copytree(source, copy / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy(source, copy / name)
    ports = {"6767": free_port(), "8000": free_port()}
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("OMNIGENT_", "OPENAI_", "VIRTUAL_ENV", "PYTHON"))
    }
    env["HOME"] = str(tmp_path / "home")  # ~/.omnigent, as the README says
    # The machine's python3 first, not this test's venv: the README makes its own.
    env["PATH"] = os.pathsep.join(
        p for p in env.get("PATH", "").split(os.pathsep) if Path(p) != Path(sys.executable).parent
    )
    done = subprocess.run(
        ["bash", "-c", readme_script(ports)],
        cwd=copy,
        env=env,
        capture_output=True,
        text=True,
        timeout=280,
        check=False,
    )
    out, err = done.stdout, done.stderr
    assert done.returncode == 0, f"stdout:\n{out}\nstderr:\n{err}"
    assert "Traceback" not in err, err
    # The first line: a scripted agent, in a fresh venv.
    assert "Hello! I am a scripted omnigent agent. Nice to meet you." in out
    assert (copy / ".venv" / "bin" / "omnigent").exists()
    # The mock model answered the loop agent and the library example.
    assert "You said: What is structured concurrency?" in out
    assert "You said: hello" in out
    # The terminal: a session continued and shown, a file written where it ran.
    assert re.search(r"^user: hi again$", out, re.M), out
    assert "Written by omnigent." in out
    assert not (copy / "omnigent-note.txt").exists()  # the README removes it again
    # HTTP: the session by name, its turn streamed, its history, its replay.
    assert '{"status":"ok","server_id":' in out
    assert '"agent_name":"hello-scripted"' not in err
    assert "event: response.completed" in out
    assert out.count("event: session.status") >= 2  # streamed, then replayed
    assert '"object":"list"' in out


def test_the_library_example_shows_a_failure(tmp_path: Path) -> None:
    """With no model to reach, the README's library example says so and exits 1."""
    env = {**os.environ, "OPENAI_BASE_URL": f"http://127.0.0.1:{free_port()}/v1"}
    env["OPENAI_API_KEY"] = "unused"
    done = subprocess.run(
        [sys.executable, "-c", python_block()],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1, done
    assert done.stderr.startswith("the turn failed: model endpoint http://127.0.0.1:"), done
    assert "refused the connection" in done.stderr
    assert list(tmp_path.iterdir()) == []  # in memory: nothing left behind
