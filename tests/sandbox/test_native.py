"""The native coding agents in a sandboxed session: the whole CLI runs inside the
session's sandbox, so every shell it runs is confined like omnigent's own, while its
model endpoint (a loopback fake here) stays reachable through the egress proxy."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio

import omnigent
from omnigent.processes.sandbox import find_bwrap
from omnigent.testing import (
    FakeAnthropic,
    FakeResponses,
    FakeShell,
    FakeToolUse,
    FakeTurn,
    MockLLM,
)

from ..native_helpers import claude_binary, codex_binary, pi_binary, require
from ..native_session_helpers import accept_all, native_spec, outputs, said, statuses, turn
from .helpers import require_bwrap

SECRET = "PRIVATE-KEY-89AB"


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Path]]:
    require_bwrap()
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text(SECRET + "\n")
    workspace = tmp_path / "work"
    workspace.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("OMNIGENT_HOME", str(tmp_path / "omnigent-home"))
    monkeypatch.setenv("OMNIGENT_TEST_SECRET", "env-secret-cdef")
    yield {"home": home, "workspace": workspace, "outside": tmp_path}


def probe(world: dict[str, Path]) -> str:
    return (
        f"cat ~/.ssh/id_ed25519; echo x > {world['outside']}/leak; "
        "echo $OMNIGENT_TEST_SECRET; echo made > made.txt"
    )


async def run_confined(harness: str, fake: Any, world: dict[str, Path]) -> str:
    fake.reply(FakeTurn("Running it.", [FakeShell(probe(world))]))
    fake.reply_text("Done.")
    async with fake.serve() as url, omnigent.open_runtime() as rt:
        spec = native_spec(harness, url, cwd=world["workspace"])
        spec["os_env"]["sandbox"] = {"type": "linux_bwrap"}
        agent = await rt.create_agent(spec)
        session = (await rt.create_session(agent.id)).id
        events = await turn(rt, session, "go", accept_all)
    assert statuses(events)[-1] == "idle", events
    [result] = fake.tool_results()
    output: str = result.output
    return output


def assert_confined(output: str, world: dict[str, Path]) -> None:
    assert SECRET not in output and "env-secret-cdef" not in output
    assert not (world["outside"] / "leak").exists()
    assert (world["workspace"] / "made.txt").read_text() == "made\n"


@require(claude_binary(), "claude", "claude")
async def test_claude_code_and_its_shell_run_confined(world: dict[str, Path]) -> None:
    with trio.fail_after(90):
        output = await run_confined("claude-code", FakeAnthropic(), world)
    assert_confined(output, world)


@require(codex_binary(), "codex", "codex")
async def test_codex_and_its_shell_run_confined(world: dict[str, Path]) -> None:
    with trio.fail_after(90):
        output = await run_confined("codex", FakeResponses(), world)
    assert_confined(output, world)


@pytest.mark.parametrize("harness", ["claude-sdk", "codex-native"])
async def test_the_tool_bridge_reaches_omnigent_from_inside(
    harness: str, world: dict[str, Path]
) -> None:
    """The shim the CLI starts runs inside too, and still reaches omnigent's tools:
    the bridge's socket is in a directory of its own the sandbox shows."""
    from ..test_native_orchestrators import SEND, fake_for, orchestrator, turns

    fake = fake_for(harness)
    fake.reply(FakeTurn("Dispatching.", [FakeToolUse("sys_session_send", SEND)]))
    fake.reply_text("Dispatched.")
    fake.reply_text("The counter says 3.")
    with trio.fail_after(90):
        async with fake.serve() as url, omnigent.open_runtime() as rt:
            spec = orchestrator(harness, url, world["workspace"])
            spec["os_env"]["sandbox"] = {"type": "linux_bwrap"}
            agent = await rt.create_agent(spec)
            sid = (await rt.create_session(agent.id)).id
            first, _ = await turns(rt, sid, "count them", accept_all, 2)
    [result] = fake.tool_results()
    assert "launching as task" in result.output
    assert statuses(first)[-1] == "idle"


@require(pi_binary(), "pi", "pi", install="npm install -g @mariozechner/pi-coding-agent")
async def test_pi_and_its_shell_run_confined(world: dict[str, Path]) -> None:
    mock = MockLLM()
    mock.reply_tool_call("bash", {"command": probe(world)}, text="Running it.")
    mock.reply_text("Done.")
    with trio.fail_after(90):
        async with mock.serve() as url, omnigent.open_runtime() as rt:
            config = {"harness": "pi", "model": "mock-model", "base_url": url, "api_key": "sk"}
            spec = {
                "name": "pi-coder",
                "executor": {"type": "omnigent", "config": config},
                "os_env": {"cwd": str(world["workspace"]), "sandbox": {"type": "linux_bwrap"}},
            }
            agent = await rt.create_agent(spec)
            session = (await rt.create_session(agent.id)).id
            events = await turn(rt, session, "go", accept_all)
    assert statuses(events)[-1] == "idle", events
    [output] = outputs(events)
    assert_confined(output, world)


async def test_an_openai_agents_child_runs_confined(world: dict[str, Path]) -> None:
    pytest.importorskip("agents")
    from ..test_harness_agents_sdk import agents_spec, allowed

    mock = MockLLM()
    mock.reply_text("Hello from inside.")
    with trio.fail_after(90):
        async with mock.serve() as url, allowed() as rt:
            spec = agents_spec(url, world["workspace"])
            spec["os_env"]["sandbox"] = {"type": "linux_bwrap"}
            agent = await rt.create_agent(spec)
            session = (await rt.create_session(agent.id)).id
            events = await turn(rt, session, "hi")
            assert rt.processes is not None
            [process] = rt.processes.processes
            started = await trio.Path(f"/proc/{process.pid}/cmdline").read_bytes()
    assert statuses(events)[-1] == "idle", events
    assert said(events) == "Hello from inside."
    assert started.split(b"\0")[0] == str(find_bwrap()).encode()  # the child is sandboxed
