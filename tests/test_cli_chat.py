"""``omnigent chat``: a loop of turns in one session; Ctrl-C interrupts the turn (the
loop goes on) or drops the line at the prompt; Ctrl-D ends it."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

TIMEOUT = 60


def spec_file(folder: Path, turns: list[Any]) -> str:
    path = folder / "chatty.yaml"
    spec = {"name": "chatty", "executor": {"config": {"harness": "scripted", "turns": turns}}}
    path.write_text(yaml.safe_dump(spec))
    return str(path)


def cli(home: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "omnigent", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        env={**os.environ, "OMNIGENT_HOME": str(home)},
        check=False,
    )


def test_a_chat_is_one_session_turn_after_turn(tmp_path: Path) -> None:
    path = spec_file(tmp_path, [[{"say": "first answer"}], [{"say": "second answer"}]])
    done = cli(tmp_path / "home", "chat", path, stdin="one\n\ntwo\n")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "first answer\nsecond answer\n"
    sid = done.stderr.split()[2]
    assert done.stderr == (
        f"chatty, session {sid} (Ctrl-D ends)\n"
        "you> one\n"
        "you> you> two\n"  # an empty line asks again
        f"you> session {sid} (continue it with --session {sid})\n"
    )
    shown = cli(tmp_path / "home", "sessions", "show", sid, "--json")
    items = json.loads(shown.stdout)["items"]
    texts = [item["content"][0]["text"] for item in items]
    assert texts == ["one", "first answer", "two", "second answer"]
    again = cli(tmp_path / "home", "chat", path, "--session", sid, stdin="three\n")
    assert again.returncode == 0, again.stderr
    assert f"session {sid} " in again.stderr.splitlines()[0].replace(",", "")


def read_until(fd: int, marker: bytes, seen: bytearray) -> bytes:
    """Read ``fd`` until ``marker`` has appeared in ``seen`` (consumed up to it)."""
    deadline = time.monotonic() + TIMEOUT
    while marker not in seen:
        left = deadline - time.monotonic()
        assert left > 0, f"no {marker!r} in {bytes(seen)!r}"
        ready, _, _ = select.select([fd], [], [], left)
        if ready:
            chunk = os.read(fd, 4096)
            assert chunk, f"ended before {marker!r}: {bytes(seen)!r}"
            seen.extend(chunk)
    cut = seen.index(marker) + len(marker)
    out = bytes(seen[:cut])
    del seen[:cut]
    return out


def test_ctrl_c_interrupts_the_turn_and_ctrl_d_ends_the_chat(tmp_path: Path) -> None:
    turns = [[{"say": "working"}, {"sleep": 30}, {"say": "never said"}], [{"say": "back again"}]]
    path = spec_file(tmp_path, turns)
    controller, terminal = os.openpty()
    process = subprocess.Popen(
        [sys.executable, "-m", "omnigent", "chat", path],
        stdin=terminal,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "OMNIGENT_HOME": str(tmp_path / "home")},
    )
    os.close(terminal)
    assert process.stdout is not None and process.stderr is not None
    out, err = bytearray(), bytearray()
    try:
        read_until(process.stderr.fileno(), b"you> ", err)
        os.write(controller, b"slow one\n")
        read_until(process.stdout.fileno(), b"working", out)
        process.send_signal(signal.SIGINT)  # what Ctrl-C sends
        assert b"Interrupted." in read_until(process.stderr.fileno(), b"you> ", err)
        # At the prompt, Ctrl-C drops the line and asks again.
        os.write(controller, b"half a li")
        process.send_signal(signal.SIGINT)
        read_until(process.stderr.fileno(), b"you> ", err)
        os.write(controller, b"\x15next\n")  # Ctrl-U: the terminal drops the half line
        read_until(process.stdout.fileno(), b"back again\n", out)
        read_until(process.stderr.fileno(), b"you> ", err)
        os.write(controller, b"\x04")  # Ctrl-D
        note = read_until(process.stderr.fileno(), b")\n", err).decode()
        assert process.wait(timeout=TIMEOUT) == 0
    finally:
        if process.returncode is None:
            process.kill()
            process.wait()
        process.stdout.close()
        process.stderr.close()
        os.close(controller)
    assert b"never said" not in out
    sid = note.split("continue it with --session ")[1].split(")")[0]
    shown = cli(tmp_path / "home", "sessions", "show", sid, "--json")
    statuses = json.loads(shown.stdout)
    texts = [item["content"][0]["text"] for item in statuses["items"] if item["type"] == "message"]
    assert texts == ["slow one", "working", "next", "back again"]


@pytest.mark.parametrize("signum", [signal.SIGTERM])
def test_sigterm_at_the_prompt_ends_the_chat(tmp_path: Path, signum: int) -> None:
    path = spec_file(tmp_path, [[{"say": "hi"}]])
    controller, terminal = os.openpty()
    process = subprocess.Popen(
        [sys.executable, "-m", "omnigent", "chat", path],
        stdin=terminal,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env={**os.environ, "OMNIGENT_HOME": str(tmp_path / "home")},
    )
    os.close(terminal)
    assert process.stderr is not None
    try:
        read_until(process.stderr.fileno(), b"you> ", bytearray())
        process.send_signal(signum)
        assert process.wait(timeout=TIMEOUT) == 0
    finally:
        if process.returncode is None:
            process.kill()
            process.wait()
        process.stderr.close()
        os.close(controller)
