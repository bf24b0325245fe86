"""Claude Code and Codex as full orchestrators: omnigent's tools through the bridge.

Each CLI gets the MCP server ``omnigent`` (the bridge's shim) and calls
``sys_session_send`` as the fake model says (Claude Code: ``mcp__omnigent__…``;
Codex: found with its ``tool_search``, then called in the ``mcp__omnigent``
namespace). What is promised (docs/harnesses.md): every call through the session's
policies and elicitations, recorded once in the session's items under the model's
call id, cancelled with the turn; no process left after stop — the shim included.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import trio

import omnigent
from omnigent.harnesses.bridge import SHIM
from omnigent.model import (
    TERMINAL_STATUSES,
    ElicitationRequest,
    ElicitationResolved,
    Event,
    SessionStatusChanged,
)
from omnigent.testing import FakeAnthropic, FakeResponses, FakeToolUse, FakeTurn

from .native_helpers import claude_binary, codex_binary, require
from .native_session_helpers import (
    Answer,
    accept_all,
    asked,
    calls,
    decline_all,
    native_processes,
    native_spec,
    outputs,
    private_home,
    process_of,
    said,
    statuses,
    wait_dead,
)

TIMEOUT = 60
HARNESSES = ["claude-sdk", "codex-native"]
ASK_SEND = [
    {"name": "ask_send", "type": "ask_tools", "tools": ["sys_session_send"], "reason": "Send?"}
]
SEND = {"agent": "counter", "args": "Count them."}

__all__ = ["private_home"]


def fake_for(harness: str) -> FakeAnthropic | FakeResponses:
    claude = harness.startswith("claude")
    binary = claude_binary() if claude else codex_binary()
    require(binary, harness, "claude" if claude else "codex")
    if binary is None:
        pytest.skip(f"{harness} is not installed")
    return FakeAnthropic() if claude else FakeResponses()


def orchestrator(harness: str, url: str, workdir: Path, **extra: Any) -> dict[str, Any]:
    script = {"harness": "scripted", "script": [{"say": "There are 3."}]}
    counter = {"name": "counter", "executor": {"type": "omnigent", "config": script}}
    return native_spec(
        harness,
        url,
        cwd=workdir,
        sub_agents=[counter],
        tools={"agents": ["counter"]},
        policies=ASK_SEND,
        **extra,
    )


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    path = tmp_path / "work"
    path.mkdir()
    return path


async def turns(
    rt: omnigent.Runtime, sid: str, text: str, answer: Answer, count: int
) -> list[list[Event]]:
    """Send ``text``; the events of ``count`` turns (a wake-up turn follows a
    sub-agent's result), answering elicitations with ``answer``."""
    out: list[list[Event]] = [[]]
    async with rt.subscribe(sid) as events:
        await rt.send_message(sid, text)
        async for event in events:
            out[-1].append(event)
            if isinstance(event, ElicitationRequest):
                reply = await answer(event)
                if reply is not None:
                    await rt.resolve_elicitation(sid, event.elicitation_id, *reply)
            if isinstance(event, SessionStatusChanged) and event.status in TERMINAL_STATUSES:
                if len(out) == count:
                    return out
                out.append([])
    raise AssertionError("the stream ended")


def shim_pids(socket_dir: Path) -> list[int]:
    """Live shims (``python -I -S _shim.py SOCKET …``) for a socket in ``socket_dir``."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                argv = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            ours = argv[1:4] == [b"-I", b"-S", str(SHIM).encode()]
            if ours and argv[4].startswith(str(socket_dir).encode()):
                found.append(int(entry.name))
    return found


@pytest.mark.parametrize("harness", HARNESSES)
async def test_a_sub_agent_dispatched_from_the_cli(harness: str, workdir: Path) -> None:
    fake = fake_for(harness)
    fake.reply(FakeTurn("Dispatching.", [FakeToolUse("sys_session_send", SEND)]))
    fake.reply_text("Dispatched.")
    fake.reply_text("The counter says 3.")
    with trio.fail_after(TIMEOUT):
        async with fake.serve() as url, omnigent.open_runtime() as rt:
            agent = await rt.create_agent(orchestrator(harness, url, workdir))
            sid = (await rt.create_session(agent.id)).id
            first, woken = await turns(rt, sid, "count them", accept_all, 2)
            [request] = asked(first)
            assert request.params.tool_name == "sys_session_send"
            assert request.params.message == "ask_send: Send?"
            assert request.params.tool_input == SEND
            [call] = calls(first)
            assert call.name == "sys_session_send" and json.loads(call.arguments) == SEND
            [output] = outputs(first)
            assert json.loads(output)["agent"] == "counter"
            [result] = fake.tool_results()
            assert result.call_id == call.call_id  # the model's own id
            assert "launching as task" in result.output
            [child] = (await rt.list_sessions(parent_session_id=sid)).data
            assert child.title == "counter:counter-1"
            assert said(woken) == "The counter says 3."
            items = (await rt.list_items(sid, limit=100)).data
            kinds = [(i.type, getattr(i, "name", None)) for i in items]
            assert kinds.count(("function_call", "sys_session_send")) == 1
            # The model's words come before its call in the history.
            said_at = next(
                n for n, i in enumerate(items) if i.type == "message" and i.role == "assistant"
            )
            assert said_at < kinds.index(("function_call", "sys_session_send"))


@pytest.mark.parametrize("harness", HARNESSES)
async def test_a_declined_call_creates_no_child(harness: str, workdir: Path) -> None:
    fake = fake_for(harness)
    fake.reply(FakeTurn(None, [FakeToolUse("sys_session_send", SEND)]))
    fake.reply_text("It was declined.")
    with trio.fail_after(TIMEOUT):
        async with fake.serve() as url, omnigent.open_runtime() as rt:
            agent = await rt.create_agent(orchestrator(harness, url, workdir))
            sid = (await rt.create_session(agent.id)).id
            [events] = await turns(rt, sid, "count them", decline_all, 1)
            assert statuses(events)[-1] == "idle" and len(asked(events)) == 1
            [output] = outputs(events)
            assert output.startswith("Error: denied by policy ask_send")
            assert output in fake.tool_results()[0].output
            assert (await rt.list_sessions(parent_session_id=sid)).data == ()


@pytest.mark.parametrize("harness", HARNESSES)
async def test_a_call_waiting_on_a_person_is_cancelled_with_the_turn(
    harness: str, workdir: Path
) -> None:
    """Interrupted while omnigent's tool waits for an approval: the question is
    withdrawn, no child is made, and the next turn (same process) works."""
    fake = fake_for(harness)
    fake.reply(FakeTurn(None, [FakeToolUse("sys_session_send", SEND)]))
    fake.reply_text("After the interrupt.")
    with trio.fail_after(TIMEOUT):
        async with fake.serve() as url, omnigent.open_runtime() as rt:
            agent = await rt.create_agent(orchestrator(harness, url, workdir))
            sid = (await rt.create_session(agent.id)).id
            seen: list[Event] = []
            async with rt.subscribe(sid) as events:
                await rt.send_message(sid, "count them")
                async for event in events:
                    seen.append(event)
                    if isinstance(event, ElicitationRequest):
                        assert await rt.interrupt(sid)
                    ended = isinstance(event, SessionStatusChanged)
                    if ended and event.status in TERMINAL_STATUSES:
                        break
                # The withdrawal comes with the turn's end.
                assert any(isinstance(e, ElicitationResolved) for e in seen)
            assert statuses(seen)[-1] == "cancelled"
            assert (await rt.list_sessions(parent_session_id=sid)).data == ()
            assert (await rt.get_session(sid)).pending_elicitations == ()
            pid = process_of(rt, harness, sid).pid
            [after] = await turns(rt, sid, "go on", accept_all, 1)
            assert said(after) == "After the interrupt."
            assert process_of(rt, harness, sid).pid == pid


@pytest.mark.parametrize("harness", HARNESSES)
async def test_stop_leaves_no_cli_and_no_shim(harness: str, workdir: Path) -> None:
    fake = fake_for(harness)
    fake.reply(FakeTurn(None, [FakeToolUse("sys_read_inbox", {})]))
    fake.reply_text("Nothing there.")
    with trio.fail_after(TIMEOUT):
        async with fake.serve() as url, omnigent.open_runtime() as rt:
            agent = await rt.create_agent(orchestrator(harness, url, workdir))
            sid = (await rt.create_session(agent.id)).id
            [events] = await turns(rt, sid, "read the inbox", accept_all, 1)
            assert outputs(events) == ["The inbox is empty."]
            assert rt.processes is not None and rt.processes.socket_dir is not None
            shims = shim_pids(rt.processes.socket_dir)
            assert len(shims) == 1  # the CLI started the bridge's shim
            pid = process_of(rt, harness, sid).pid
            await rt.stop_session(sid)
            await wait_dead([pid, *shims])
            assert native_processes(rt) == []
            assert shim_pids(rt.processes.socket_dir) == []
