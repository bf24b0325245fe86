"""``omnigent mock-llm``: the MockLLM as a standalone server, echoing or scripted."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from omnigent.cli._mock_llm import last_user_text, load_chat_script
from omnigent.testing import ErrorReply, HangReply, MockToolCall, TextReply, ToolCallsReply

REPO = Path(__file__).resolve().parent.parent


def test_script_turns() -> None:
    script = load_chat_script(
        [
            {"text": "hi", "chunk_size": 2, "delay": 0.5},
            {"tool": {"name": "sys_os_shell", "input": {"command": "ls"}, "id": "c1"}},
            {"text": "two", "tools": [{"name": "a"}, {"name": "b", "input": "raw"}]},
            {"error": {"status": 429, "message": "slow down", "retry_after": 1}},
            {"hang": True},
        ]
    )
    assert script == [
        TextReply("hi", 2, 0.5),
        ToolCallsReply((MockToolCall("sys_os_shell", {"command": "ls"}, "c1"),), None),
        ToolCallsReply((MockToolCall("a", {}), MockToolCall("b", "raw")), "two"),
        ErrorReply(429, "slow down", 1),
        HangReply(),
    ]


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"text": "x"}, "a script is a JSON list of turns"),
        (["x"], "turn 1: a turn is a JSON object"),
        ([{"text": "ok"}, {"say": "x"}], "turn 2: unknown keys ['say']"),
        ([{}], "turn 1: a turn needs"),
        ([{"text": 3}], 'turn 1: "text" must be a string'),
        ([{"text": "x", "chunk_size": 0}], "chunk_size"),
        ([{"text": "x", "delay": -1}], "delay"),
        ([{"tool": {"input": {}}}], "turn 1: a tool is"),
        ([{"tool": {"name": "t", "input": 3}}], '"input" must be an object or a string'),
        ([{"error": {"status": "500"}}], 'needs an integer "status"'),
    ],
)
def test_bad_scripts_name_the_turn(data: Any, message: str) -> None:
    with pytest.raises((TypeError, ValueError)) as info:
        load_chat_script(data)
    assert message in str(info.value)


def test_last_user_text() -> None:
    body = {
        "messages": [
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": "first"},
            {"role": "assistant", "content": "ok"},
            {"role": "user", "content": [{"type": "text", "text": "sec"}, {"text": "ond"}]},
        ]
    }
    assert last_user_text(body) == "second"
    assert last_user_text({"messages": "nope"}) == ""


@contextmanager
def mock_llm(*args: str) -> Iterator[str]:
    """``omnigent mock-llm --port 0 ARGS`` running; yields its base URL."""
    process = subprocess.Popen(
        [sys.executable, "-m", "omnigent", "mock-llm", "--port", "0", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None and process.stderr is not None
    try:
        line = process.stdout.readline()
        assert line.startswith("omnigent mock-llm serving on http://127.0.0.1:"), (
            line + process.stderr.read()
        )
        yield line.split(" on ", 1)[1].strip()
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=15) == 0
    finally:
        if process.returncode is None:
            process.kill()
            process.wait()
        process.stdout.close()
        process.stderr.close()


def test_models_and_echo() -> None:
    with mock_llm() as url:
        assert httpx.get(f"{url}/models", timeout=10).json()["data"][0]["id"] == "mock-model"
        body = {"model": "m", "messages": [{"role": "user", "content": "hello"}]}
        whole = httpx.post(f"{url}/chat/completions", json=body, timeout=10).json()
        assert whole["choices"][0]["message"]["content"] == "You said: hello"
        with httpx.stream(
            "POST", f"{url}/chat/completions", json={**body, "stream": True}, timeout=10
        ) as streamed:
            frames = [line for line in streamed.iter_lines() if line.startswith("data: ")]
        assert frames[-1] == "data: [DONE]"
        deltas = [
            json.loads(f[6:])["choices"][0]["delta"].get("content") or "" for f in frames[:-1]
        ]
        assert "".join(deltas) == "You said: hello"


def test_a_loop_agent_runs_against_a_script_then_echoes(tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text(
        json.dumps(
            [
                {"tool": {"name": "sys_os_write", "input": {"path": "a.txt", "content": "A"}}},
                {"text": "wrote it"},
            ]
        )
    )
    env = {
        **os.environ,
        "OMNIGENT_HOME": str(tmp_path / "home"),
        "OPENAI_API_KEY": "unused",
    }
    env.pop("OMNIGENT_DB", None)
    spec = str(REPO / "examples" / "openai-agent.yaml")
    with mock_llm("--script", str(script)) as url:
        env["OPENAI_BASE_URL"] = url

        def run(prompt: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                [sys.executable, "-m", "omnigent", "run", spec, prompt],
                cwd=tmp_path,
                env=env,
                capture_output=True,
                text=True,
                timeout=60,
                check=False,
            )

        first = run("write a.txt")
        assert first.returncode == 0, first.stderr
        assert first.stdout == "wrote it\n"
        assert (tmp_path / "a.txt").read_text() == "A"
        second = run("and now?")
        assert second.returncode == 0, second.stderr
        assert second.stdout == "You said: and now?\n"


def _omnigent(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "omnigent", *args],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


def test_a_busy_port_is_one_error_line() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        done = _omnigent("mock-llm", "--port", str(taken.getsockname()[1]))
    assert done.returncode == 2, done
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("Error: cannot listen on ")


@pytest.mark.parametrize(
    ("content", "message"),
    [(None, "No such file"), ("[{", "Expecting"), ('[{"say": 1}]', "turn 1: unknown keys")],
)
def test_a_bad_script_is_one_error_line(tmp_path: Path, content: str | None, message: str) -> None:
    path = tmp_path / "s.json"
    if content is not None:
        path.write_text(content)
    done = _omnigent("mock-llm", "--port", "0", "--script", str(path))
    assert done.returncode == 2, done
    assert done.stderr.startswith(f"Error: --script {path}: "), done.stderr
    assert message in done.stderr
    assert done.stderr.count("\n") == 1
