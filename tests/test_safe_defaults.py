"""Safe defaults: omnigent run asks before a command or a write outside the workspace
unless a policy decided, and a tool a deny policy always refuses is never offered."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
import trio
import yaml

import omnigent
from omnigent.cli import main
from omnigent.core.tools import (
    ASK_COMMANDS,
    ASK_WRITES,
    PHASE_TOOL_CALL,
    PHASE_TOOL_RESULT,
    PolicyEvent,
    safe_default,
)
from omnigent.testing import RecordingHarness, run_turn

from .test_cli import _ExplodingStdin, without_session_note


def call(name: str, args: dict[str, Any], cwd: str | None = "/work") -> PolicyEvent:
    context = {"cwd": cwd} if cwd else None
    return PolicyEvent(PHASE_TOOL_CALL, {"tool_name": name, "tool_input": args}, context=context)


@pytest.mark.parametrize(
    ("name", "args", "asks"),
    [
        ("sys_os_shell", {"command": "rm -rf build"}, ASK_COMMANDS),
        ("sys_terminal_send", {"terminal": "bash", "session": "s", "text": "ls"}, ASK_COMMANDS),
        ("Bash", {"command": "ls"}, ASK_COMMANDS),
        ("exec_command", {"command": "ls", "cwd": "/work"}, ASK_COMMANDS),
        ("sys_os_write", {"path": "notes.txt", "content": ""}, None),
        ("sys_os_write", {"path": "/work/sub/notes.txt", "content": ""}, None),
        ("sys_os_write", {"path": "../elsewhere.txt", "content": ""}, ASK_WRITES),
        ("sys_os_edit", {"path": "/home/me/.bashrc", "oldText": "a", "newText": "b"}, ASK_WRITES),
        ("Write", {"file_path": "/work/a.py", "content": ""}, None),
        ("Write", {"file_path": "/etc/hosts", "content": ""}, ASK_WRITES),
        ("apply_patch", {"changes": [{"path": "/work/a"}, {"path": "/tmp/b"}]}, ASK_WRITES),
        ("sys_os_read", {"path": "/etc/passwd"}, None),
        ("mcp__fs__write", {"path": "/etc/x"}, None),
    ],
)
def test_what_the_safe_defaults_ask_about(
    name: str, args: dict[str, Any], asks: str | None
) -> None:
    verdict = safe_default(call(name, args))
    assert (verdict.policy_name if verdict else None) == asks
    if verdict is not None:
        assert verdict.action == "ASK" and verdict.reason


def test_without_a_working_directory_a_write_is_not_judged() -> None:
    assert safe_default(call("Write", {"file_path": "/etc/hosts"}, cwd=None)) is None
    result = PolicyEvent(PHASE_TOOL_RESULT, {"tool_name": "sys_os_shell", "tool_output": ""})
    assert safe_default(result) is None


SHELL = [{"call": "sys_os_shell", "args": {"command": "echo ran > ran.txt"}}, {"say": "done"}]


def shell_spec(tmp_path: Path, **extra: Any) -> str:
    spec = {
        "name": "runner",
        "executor": {"type": "omnigent", "config": {"harness": "scripted", "script": SHELL}},
        "os_env": {"cwd": str(tmp_path)},
        **extra,
    }
    path = tmp_path / "runner.yaml"
    path.write_text(yaml.safe_dump(spec), encoding="utf-8")
    return str(path)


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv("OMNIGENT_DB", raising=False)
    monkeypatch.setenv("OMNIGENT_HOME", str(tmp_path / "home"))
    # `omnigent run` works in the directory it runs in (it wins over the spec's
    # absolute os_env.cwd, as the original's session-create-time boundary does).
    monkeypatch.chdir(tmp_path)
    return tmp_path / "home"


def test_run_asks_before_a_shell_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sys, "stdin", _ExplodingStdin())
    assert main(["run", shell_spec(tmp_path), "go", "--no-input"]) == 0
    err = without_session_note(capsys.readouterr().err)
    assert "✗ declined (--no-input): sys_os_shell" in err
    assert "denied by policy ask_before_commands" in err
    assert not (tmp_path / "ran.txt").exists()


def test_run_yes_runs_the_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", shell_spec(tmp_path), "go", "--yes"]) == 0
    assert "✓ approved (--yes): sys_os_shell" in capsys.readouterr().err
    assert (tmp_path / "ran.txt").read_text() == "ran\n"


def test_an_allow_policy_of_the_agent_decides_instead(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sys, "stdin", _ExplodingStdin())
    allow = [{"name": "shells_ok", "type": "allow_tools", "tools": ["sys_os_shell"]}]
    assert main(["run", shell_spec(tmp_path, policies=allow), "go", "--no-input"]) == 0
    assert "declined" not in capsys.readouterr().err
    assert (tmp_path / "ran.txt").read_text() == "ran\n"


async def test_the_library_asks_nothing_unless_told(
    tmp_path: Path, recorder: RecordingHarness
) -> None:
    """Without ``safe_defaults`` (the library's and serve's default) nothing is asked."""
    async with omnigent.open_runtime() as rt:
        spec = yaml.safe_load(await trio.Path(shell_spec(tmp_path)).read_text())
        agent = await rt.create_agent(spec)
        session = (await rt.create_session(agent.id)).id
        await run_turn(rt, session)
    assert (tmp_path / "ran.txt").read_text() == "ran\n"


async def test_a_tool_a_deny_policy_refuses_is_not_offered(
    rt: omnigent.Runtime, recorder: RecordingHarness
) -> None:
    rt.register_harness("recorder", recorder.factory)
    deny = [
        {"name": "no_shell", "type": "deny_tools", "tools": ["sys_os_shell"]},
        {"name": "no_writes", "type": "deny_tools", "tools": ["sys_os_w*"]},
        {"name": "ask_edits", "type": "ask_tools", "tools": ["sys_os_edit"]},
    ]
    agent = await rt.create_agent(
        {"name": "a", "executor": {"config": {"harness": "recorder"}}, "policies": deny}
    )
    session = (await rt.create_session(agent.id)).id
    await run_turn(rt, session)
    offered = {tool.name for tool in recorder.requests[0].tools}
    assert {"sys_os_read", "sys_os_edit"} <= offered
    assert not offered & {"sys_os_shell", "sys_os_write"}


def test_init_writes_a_sandboxed_agent_and_keeps_what_exists(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "agent.yaml"
    assert main(["init", str(target), "--name", "helper"]) == 0
    spec = omnigent.AgentSpec.load(target)
    assert spec.name == "helper" and spec.os_env is not None
    assert spec.os_env.sandbox.type == "auto" and not spec.os_env.sandbox.allow_network
    assert main(["init", str(target)]) == 2
    assert "exists" in capsys.readouterr().err
    assert omnigent.AgentSpec.load(target).name == "helper"  # untouched
    assert main(["init", str(target), "--name", "Bad Name", "--force"]) == 2
