"""`python -m omnigent.testing`: the JSON script format and a real standalone server."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio

from omnigent.testing import ErrorReply, FakeShell, FakeToolUse, FakeTurn, HangReply, load_script
from omnigent.testing._standalone import main


def test_load_script_builds_every_kind_of_turn() -> None:
    script = load_script(
        [
            {"text": "hi", "chunk_size": 2, "delay": 0.5},
            {"shell": "ls", "text": "Looking."},
            {"tool": {"name": "Read", "input": {"file_path": "a"}, "id": "toolu_1"}},
            {"tools": [{"name": "apply_patch", "input": "*** Begin Patch"}, {"shell": "pwd"}]},
            {"text": "thinking", "stall": True},
            {"error": {"status": 429, "message": "slow", "retry_after": 1}},
            {"hang": True},
        ]
    )
    assert script == [
        FakeTurn("hi", chunk_size=2, delay=0.5),
        FakeTurn("Looking.", (FakeShell("ls"),)),
        FakeTurn(None, (FakeToolUse("Read", {"file_path": "a"}, "toolu_1"),)),
        FakeTurn(None, (FakeToolUse("apply_patch", "*** Begin Patch"), FakeShell("pwd"))),
        FakeTurn("thinking", stall=True),
        ErrorReply(429, "slow", 1),
        HangReply(),
    ]


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"text": "x"}, "a script is a JSON list of turns"),
        (["hi"], "turn 1: a turn is a JSON object"),
        ([{"text": "ok"}, {}], 'turn 2: a turn needs "text", "shell", "tool" or "tools"'),
        ([{"txt": "typo"}], "turn 1: unknown keys ['txt']"),
        ([{"text": 3}], 'turn 1: "text" must be a string'),
        ([{"tool": {"input": {}}}], 'turn 1: a tool is {"name"'),
        ([{"tool": {"name": "x", "input": 3}}], 'turn 1: tool x: "input" must be an object'),
        ([{"error": {"message": "no status"}}], 'turn 1: "error" needs an integer "status"'),
        ([{"text": "x", "chunk_size": 0}], "turn 1: chunk_size must be at least 1"),
    ],
)
def test_load_script_names_the_bad_turn(data: Any, message: str) -> None:
    with pytest.raises((TypeError, ValueError)) as caught:
        load_script(data)
    assert str(caught.value).startswith(message)


def test_bad_arguments_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    script = tmp_path / "script.json"
    script.write_text('[{"shell": "ls"}]')
    assert main(["chat", "--script", str(script)]) == 2
    assert '"shell" needs the anthropic or responses server' in capsys.readouterr().err
    assert main(["chat", "--log", str(tmp_path / "log")]) == 2
    assert "--log needs the anthropic or responses server" in capsys.readouterr().err
    assert main(["anthropic", "--script", str(tmp_path / "missing.json")]) == 2
    assert "Error: " in capsys.readouterr().err
    script.write_text("{not json")
    assert main(["responses", "--script", str(script)]) == 2


@pytest.mark.parametrize(
    ("api", "path", "body"),
    [
        ("anthropic", "/v1/messages", {"model": "m", "messages": [], "stream": False}),
        ("responses", "/responses", {"model": "m", "input": [], "stream": False}),
        ("chat", "/chat/completions", {"model": "m", "messages": [], "stream": False}),
    ],
)
async def test_standalone_server_serves_logs_and_stops_on_sigterm(
    tmp_path: Path, api: str, path: str, body: dict[str, Any]
) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps([{"text": "standalone answer"}]))
    log = tmp_path / "requests.jsonl"
    command = [sys.executable, "-m", "omnigent.testing", api, "--script", str(script)]
    if api != "chat":
        command += ["--log", str(log)]
    with trio.fail_after(20):
        process = await trio.lowlevel.open_process(command, stdout=subprocess.PIPE)
        try:
            assert process.stdout is not None
            line = b""
            while not line.endswith(b"\n"):
                chunk = await process.stdout.receive_some(1)
                assert chunk, "the server exited before printing its URL"
                line += chunk
            base_url = line.decode().strip()
            assert base_url.startswith("http://127.0.0.1:")
            async with httpx.AsyncClient() as http:
                response = await http.post(base_url + path, json=body)
            assert response.status_code == 200
            assert "standalone answer" in response.text
            process.send_signal(signal.SIGTERM)
            assert await process.wait() == 0
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()
    if api != "chat":
        assert [json.loads(line) for line in log.read_text().splitlines()] == [body]
