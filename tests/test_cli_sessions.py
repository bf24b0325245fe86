"""``omnigent run`` where it is run: the current directory, the session it used and
``--session`` to continue it, ``sessions show``, and the spec's own function policies."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio
import trio.testing
import yaml

import omnigent
from omnigent.cli import main
from omnigent.testing import MockLLM, run_turn

REPO = Path(__file__).resolve().parent.parent
SESSION_NOTE = re.compile(r"session (conv_\w+) \(continue it with --session \1\)")


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv("OMNIGENT_DB", raising=False)
    monkeypatch.setenv("OMNIGENT_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def spec_file(folder: Path, name: str = "bot", **config: Any) -> str:
    extra = config.pop("extra", {})
    spec = {"name": name, "executor": {"config": {"harness": "scripted", **config}}, **extra}
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(spec), encoding="utf-8")
    return str(path)


def session_of(err: str) -> str:
    match = SESSION_NOTE.fullmatch(err.splitlines()[-1])
    assert match is not None, err
    return match.group(1)


WRITE_HERE = [{"call": "sys_os_write", "args": {"path": "note.txt", "content": "hi\n"}}]


def test_run_writes_into_the_current_directory(tmp_path: Path) -> None:
    """A spec with no os_env: the OS tools act where ``omnigent run`` was run."""
    here = tmp_path / "project"
    here.mkdir()
    path = spec_file(tmp_path, script=[*WRITE_HERE, {"say": "done"}])
    done = subprocess.run(
        [sys.executable, "-m", "omnigent", "run", path, "write it", "--yes"],
        cwd=here,
        env={**os.environ, "OMNIGENT_HOME": str(tmp_path / "home")},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert (here / "note.txt").read_text() == "hi\n"
    assert not (tmp_path / "home" / "workspaces").exists()


def test_cwd_dot_is_the_current_directory_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    path = spec_file(tmp_path, script=WRITE_HERE, extra={"os_env": {"cwd": "."}})
    assert main(["run", path, "go"]) == 0
    assert (tmp_path / "note.txt").read_text() == "hi\n"


def test_the_library_and_serve_keep_per_session_workspaces(tmp_path: Path) -> None:
    async def go() -> Path:
        async with omnigent.open_runtime(home=tmp_path / "home") as rt:
            agent = await rt.create_agent(
                {"name": "w", "executor": {"config": {"harness": "scripted", "script": WRITE_HERE}}}
            )
            session = await rt.create_session(agent.id)
            await run_turn(rt, session.id)
            return tmp_path / "home" / "workspaces" / session.id / "workspace"

    workspace = trio.run(go)
    assert (workspace / "note.txt").read_text() == "hi\n"


def test_run_prints_its_session_and_continues_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = spec_file(tmp_path, turns=[[{"say": "first"}], [{"say": "second"}]])
    assert main(["run", path, "one"]) == 0
    first = capsys.readouterr()
    assert first.out == "first\n"
    session_id = session_of(first.err)
    assert main(["run", path, "two", "--session", session_id]) == 0
    second = capsys.readouterr()
    assert second.out == "second\n"  # turn 2 of the same session
    assert session_of(second.err) == session_id
    assert main(["sessions", "show", session_id]) == 0
    shown = capsys.readouterr().out.splitlines()
    assert shown[0].startswith(f"{session_id}  bot  idle  one  ")
    assert shown[1:] == ["user: one", "assistant: first", "user: two", "assistant: second"]


def test_sessions_show_prints_tool_calls(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    path = spec_file(tmp_path, script=WRITE_HERE)
    assert main(["run", path, "go"]) == 0
    session_id = session_of(capsys.readouterr().err)
    assert main(["sessions", "show", session_id]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1] == "user: go"
    assert lines[2] == '→ sys_os_write({"content": "hi\\n", "path": "note.txt"})'
    assert lines[3].startswith('← {"path": "note.txt"')


def test_sessions_show_of_an_unknown_session(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sessions", "show", "conv_nope"]) == 2
    assert capsys.readouterr().err == "Error: session 'conv_nope' not found\n"


def test_session_of_another_agent_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", spec_file(tmp_path, "one", script=[{"say": "x"}]), "hi"]) == 0
    session_id = session_of(capsys.readouterr().err)
    other = spec_file(tmp_path, "two", script=[{"say": "y"}])
    assert main(["run", other, "hi", "--session", session_id]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"Error: session {session_id} is a session of agent 'one'"), err


def test_an_unknown_session_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = spec_file(tmp_path, script=[{"say": "x"}])
    assert main(["run", path, "hi", "--session", "conv_nope"]) == 2
    assert capsys.readouterr().err == "Error: session 'conv_nope' not found\n"


# A function policy in the spec file is the operator's own: run and agents add allow it.

POLICY_MODULE = "cli_own_policy"


def _policy_spec(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    (tmp_path / f"{POLICY_MODULE}.py").write_text(
        "def deny_writes(event):\n"
        "    if event['data']['name'] == 'sys_os_write':\n"
        "        return {'result': 'DENY', 'reason': 'read-only'}\n"
        "    return {'result': 'UNSPECIFIED'}\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    policy = {"name": "ro", "type": "function", "function": f"{POLICY_MODULE}:deny_writes"}
    return spec_file(tmp_path, script=WRITE_HERE, extra={"policies": [policy]})


def test_run_allows_the_function_policies_of_its_spec(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _policy_spec(tmp_path, monkeypatch)
    assert main(["run", path, "go"]) == 0
    assert "← Error: denied by policy ro: read-only" in capsys.readouterr().err
    assert not (tmp_path / "note.txt").exists()
    assert main(["agents", "add", path]) == 0


def test_run_reports_a_function_policy_that_cannot_load(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    policy = {"name": "p", "type": "function", "function": "no_such_module_here:check"}
    path = spec_file(tmp_path, script=[{"say": "x"}], extra={"policies": [policy]})
    assert main(["run", path, "hi"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("Error: cannot load 'no_such_module_here:check'"), err


def test_the_agents_of_its_spec_file_are_the_operators(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An ``openai-agents`` agent named in the spec file is trusted like its function
    policies (nothing is imported by registering it)."""
    config = {
        "harness": "openai-agents",
        "agent": "tests.harnesses.sdk_agents:assistant",
        "model": "mock-model",
    }
    path = tmp_path / "sdk.yaml"
    path.write_text(json.dumps({"name": "sdk", "executor": {"config": config}}))
    assert main(["agents", "add", str(path)]) == 0
    assert "sdk" in capsys.readouterr().out


async def test_stdio_trusts_the_agents_of_its_spec() -> None:
    """``omnigent stdio`` serves the operator's spec: its ``openai-agents`` agent is
    allowed (registering it imports nothing)."""
    from omnigent.spec import AgentSpec
    from omnigent.transports.acp._stdio import serve_stdio

    config = {"harness": "openai-agents", "agent": "tests.harnesses.sdk_agents:assistant"}
    spec = AgentSpec.from_dict({"name": "sdk", "executor": {"config": config}})
    to_agent, _ = trio.testing.memory_stream_pair()
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            acp_agent = await nursery.start(serve_stdio, spec, None, to_agent, to_agent)
            [agent] = await acp_agent.runtime.list_agents()
            assert agent.harness == "openai-agents"
            nursery.cancel_scope.cancel()


def test_sessions_show_prints_the_usage_and_json_carries_it(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.yaml").write_text(
        "prices:\n  mock-model: {input_per_mtok: 1.5, output_per_mtok: 4}\n"
    )
    mock = MockLLM()
    mock.reply_text("parent answer")
    mock.reply_text("child answer")
    config = {"harness": "loop", "model": "mock-model", "base_url": "http://mock/v1"}
    spec = {"name": "priced", "executor": {"config": {**config, "api_key": "sk-test"}}}
    db = f"sqlite:///{home / 'usage.db'}"

    async def go() -> tuple[str, str]:
        async with (
            httpx.AsyncClient(transport=mock.transport()) as http,
            omnigent.open_runtime(db, home=home, http_client=http) as rt,
        ):
            agent = await rt.create_agent(spec)
            parent = (await rt.create_session(agent.id)).id
            await run_turn(rt, parent, "hello")
            child = (await rt.create_session(agent.id, parent_session_id=parent)).id
            await run_turn(rt, child, "hi")
            return parent, child

    parent, _ = trio.run(go)
    (p1, c1), (p2, c2) = mock.usages
    assert main(["sessions", "show", parent, "--db", db]) == 0
    lines = capsys.readouterr().out.splitlines()
    own = f"usage: {p1:,} tokens in (0 cached), {c1:,} out, 1 model call, "
    assert lines[1] == own + f"${(p1 * 1.5 + c1 * 4) / 1e6:.6f}"
    tree_cost = ((p1 + p2) * 1.5 + (c1 + c2) * 4) / 1e6
    assert lines[2] == (
        f"usage with sub-sessions: {p1 + p2:,} tokens in (0 cached), {c1 + c2:,} out, "
        f"2 model calls, ${tree_cost:.6f}"
    )
    assert lines[3:] == ["user: hello", "assistant: parent answer"]
    assert main(["sessions", "show", parent, "--json", "--db", db]) == 0
    shown = json.loads(capsys.readouterr().out)["session"]
    assert (shown["usage"]["input_tokens"], shown["usage"]["output_tokens"]) == (p1, c1)
    assert shown["tree_usage"]["total_tokens"] == p1 + p2 + c1 + c2
    assert shown["tree_usage"]["cost_usd"] == pytest.approx(tree_cost)
