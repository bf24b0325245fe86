"""The pi harness end to end: a runtime, the real pi CLI, MockLLM (Chat Completions).

What the harness promises (docs/harnesses.md, "pi"): text relayed; every pi tool call
through omnigent's policies (ALLOW runs, DENY refuses without asking, ASK asks —
accepted it runs, declined pi is told why); omnigent's tools offered to pi and run in
the turn (a sub-agent dispatched from it); later turns continuing the conversation,
also from a new process; interrupt through pi's ``abort``; no process left after stop.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
import trio

import omnigent
from omnigent.model import OutputTextDelta
from omnigent.testing import MockLLM, collect_turn

from .native_helpers import group_alive, pi_binary, require
from .native_session_helpers import (
    accept_all,
    asked,
    calls,
    decline_all,
    native_processes,
    outputs,
    private_home,
    process_of,
    said,
    statuses,
    turn,
    wait_dead,
)

pytestmark = require(
    pi_binary(), "pi", "pi", install="npm install -g @mariozechner/pi-coding-agent"
)
TIMEOUT = 60

__all__ = ["private_home"]


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    path = tmp_path / "work"
    path.mkdir()
    return path


def pi_spec(url: str, workdir: Path, **extra: Any) -> dict[str, Any]:
    config = {"harness": "pi", "model": "mock-model", "base_url": url, "api_key": "sk-fake"}
    return {
        "name": "pi-coder",
        "prompt": "You are a careful coding agent.",
        "executor": {"type": "omnigent", "config": config},
        "os_env": {"type": "caller_process", "cwd": str(workdir)},
        **extra,
    }


async def session(rt: omnigent.Runtime, url: str, workdir: Path, **extra: Any) -> str:
    agent = await rt.create_agent(pi_spec(url, workdir, **extra))
    return (await rt.create_session(agent.id)).id


def user_texts(request: dict[str, Any]) -> list[str]:
    """Every text the chat request carries from the user, oldest first."""
    texts = []
    for message in request["messages"]:
        if message["role"] != "user":
            continue
        content = message["content"]
        parts = [content] if isinstance(content, str) else [p.get("text", "") for p in content]
        texts += parts
    return texts


async def test_a_conversation_with_approvals(workdir: Path) -> None:
    """One process: a streamed text turn, a second turn that continues it, a command
    the person accepts, one they decline, one a policy denies without asking."""
    mock = MockLLM()
    mock.reply_text("Hello from pi, streamed in pieces.", chunk_size=6)
    mock.reply_text("You said hi before.")
    mock.reply_tool_call("bash", {"command": "touch made-by-pi.txt && pwd"}, text="Making it.")
    mock.reply_text("Made it.")
    mock.reply_tool_call("bash", {"command": "touch declined.txt"})
    mock.reply_text("It was declined.")
    mock.reply_tool_call("bash", {"command": "rm -rf nothing"})
    mock.reply_text("It was denied.")
    policies = [
        {"name": "ask_touch", "type": "ask_tools", "tools": ["bash"], "reason": "Run it?"},
    ]
    with trio.fail_after(TIMEOUT):
        async with mock.serve() as url, omnigent.open_runtime() as rt:
            sid = await session(rt, url, workdir, policies=policies)
            events = await turn(rt, sid, "hi")
            assert statuses(events) == ["running", "launching", "running", "idle"]
            assert said(events) == "Hello from pi, streamed in pieces."
            assert any(isinstance(e, OutputTextDelta) for e in events)
            first = mock.requests[0]
            assert first["model"] == "mock-model"
            assert "You are a careful coding agent." in first["messages"][0]["content"]
            assert user_texts(first) == ["hi"]
            # The model's usage, as pi reported it from the stream's last chunk.
            usage = (await rt.get_session(sid)).usage
            [(prompt, completion)] = mock.usages
            assert (usage.model_calls, usage.input_tokens, usage.output_tokens) == (
                1,
                prompt,
                completion,
            )
            pid = process_of(rt, "pi", sid).pid

            events = await turn(rt, sid, "again")
            assert said(events) == "You said hi before."
            assert user_texts(mock.requests[1]) == ["hi", "again"]
            assert process_of(rt, "pi", sid).pid == pid  # the same process

            events = await turn(rt, sid, "make a file", accept_all)
            [request] = asked(events)
            assert request.params.tool_name == "bash"
            assert request.params.tool_input == {"command": "touch made-by-pi.txt && pwd"}
            assert request.params.message == "ask_touch: Run it?"
            assert (workdir / "made-by-pi.txt").exists()
            [call] = calls(events)
            assert call.name == "bash" and json.loads(call.arguments)["command"].startswith("touch")
            assert outputs(events) == [f"{workdir}\n"]

            events = await turn(rt, sid, "make another", decline_all)
            assert len(asked(events)) == 1
            assert not (workdir / "declined.txt").exists()
            [output] = outputs(events)
            assert output.startswith("Error: ") and "declined" in output
            tool_message = mock.requests[5]["messages"][-1]
            assert tool_message["role"] == "tool" and "declined" in str(tool_message["content"])

    policies = [{"name": "no_rm", "type": "deny_tools", "tools": ["bash"], "reason": "never"}]
    mock = MockLLM()
    mock.reply_tool_call("bash", {"command": "rm -rf nothing"})
    mock.reply_text("It was denied.")
    with trio.fail_after(TIMEOUT):
        async with mock.serve() as url, omnigent.open_runtime() as rt:
            sid = await session(rt, url, workdir, policies=policies)
            events = await turn(rt, sid, "remove it")  # no elicitation: one would fail here
            [output] = outputs(events)
            assert output == "Error: never"
            assert said(events) == "It was denied."


async def test_a_sub_agent_dispatched_from_pi(workdir: Path) -> None:
    """pi calls omnigent's ``sys_session_send`` (registered by the extension): the call
    runs in the turn, is recorded once, and the child's answer wakes the session."""
    mock = MockLLM()
    mock.reply_tool_call("sys_session_send", {"agent": "counter", "args": "Count them."})
    mock.reply_text("Dispatched.")
    mock.reply_text("The counter says 3.")
    extra = {
        "sub_agents": [
            {
                "name": "counter",
                "executor": {
                    "type": "omnigent",
                    "config": {"harness": "scripted", "script": [{"say": "There are 3."}]},
                },
            }
        ],
        "tools": {"agents": ["counter"]},
    }
    with trio.fail_after(TIMEOUT):
        async with mock.serve() as url, omnigent.open_runtime() as rt:
            sid = await session(rt, url, workdir, **extra)
            async with rt.subscribe(sid) as events:
                await rt.send_message(sid, "dispatch")
                first = await collect_turn(events)
                woken = await collect_turn(events)
            [call] = calls(first)
            assert call.name == "sys_session_send"
            [output] = outputs(first)
            assert json.loads(output)["agent"] == "counter"
            [child] = (await rt.list_sessions(parent_session_id=sid)).data
            assert child.title == "counter:counter-1"
            tools = {t["function"]["name"] for t in mock.requests[0]["tools"]}
            assert {"sys_session_send", "sys_read_inbox", "bash"} <= tools
            assert not tools & {"sys_os_shell", "sys_os_read"}  # pi has its own
            assert said(woken) == "The counter says 3."
            assert "There are 3." in user_texts(mock.requests[2])[-1]
            items = (await rt.list_items(sid, limit=100)).data
            assert [i.name for i in items if i.type == "function_call"] == ["sys_session_send"]


async def test_interrupt_keeps_the_process_and_stop_ends_its_group(workdir: Path) -> None:
    mock = MockLLM()
    mock.reply_hang()
    mock.reply_text("Still here.")
    with trio.fail_after(TIMEOUT):
        async with mock.serve() as url, omnigent.open_runtime() as rt:
            sid = await session(rt, url, workdir)
            async with rt.subscribe(sid) as events:
                await rt.send_message(sid, "think hard")
                await mock.wait_requests(1)
                assert await rt.interrupt(sid)
                rest = await collect_turn(events)
            assert statuses(rest)[-1] == "cancelled"
            pid = process_of(rt, "pi", sid).pid
            events = await turn(rt, sid, "and now?")
            assert said(events) == "Still here."
            assert process_of(rt, "pi", sid).pid == pid
            assert group_alive(pid)
            await rt.stop_session(sid)
            await wait_dead([pid])
            assert not group_alive(pid)
            assert native_processes(rt) == []


async def test_a_new_process_continues_the_conversation(workdir: Path, tmp_path: Path) -> None:
    """After a restart pi resumes its session file; a file gone starts afresh, told the
    earlier messages."""
    db = f"sqlite:///{tmp_path / 'omnigent.db'}"
    mock = MockLLM()
    mock.reply_text("First answer.")
    mock.reply_text("Second answer.")
    mock.reply_text("Third answer.")
    with trio.fail_after(TIMEOUT):
        async with mock.serve() as url:
            async with omnigent.open_runtime(db) as rt:
                sid = await session(rt, url, workdir)
                await turn(rt, sid, "remember 42")
                pid = process_of(rt, "pi", sid).pid
            await wait_dead([pid])  # shutdown ended it
            async with omnigent.open_runtime(db) as rt:
                events = await turn(rt, sid, "what was it?")
                assert said(events) == "Second answer."
                assert user_texts(mock.requests[1]) == ["remember 42", "what was it?"]
                home = Path(os.environ["OMNIGENT_HOME"])
                for file in (home / "harnesses" / "pi" / "sessions").iterdir():
                    file.unlink()
                assert process_of(rt, "pi", sid) is not None
                await rt.stop_session(sid)
                events = await turn(rt, sid, "and now?")
                assert said(events) == "Third answer."
                [text] = user_texts(mock.requests[2])
                assert text.startswith("Earlier in this conversation")
                assert "remember 42" in text and text.endswith("and now?")
