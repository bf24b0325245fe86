"""The openai-agents harness end to end: a runtime, the real OpenAI Agents SDK in its
own process (``tests/harnesses/sdk_agents.py``), MockLLM (Chat Completions).

What the harness promises (docs/harnesses.md, "openai-agents"): streamed text; the
agent's function tools and handoffs as tool calls; each of its tool calls through
the session's policies (DENY refuses, ``needs_approval`` asks the person: accepted
it runs, declined the model is told); omnigent's tools offered to it (a sub-agent
dispatched from it); later turns continuing the conversation, also in a new
process; interrupt; no process left after stop; only an agent the operator allowed.
"""

from __future__ import annotations

import importlib.metadata
import json
from pathlib import Path
from typing import Any

import pytest
import trio

import omnigent
from omnigent.model import OutputTextDelta, ResponseFailed
from omnigent.testing import MockLLM, collect_turn

from .native_helpers import group_alive
from .native_session_helpers import (
    accept_all,
    asked,
    calls,
    decline_all,
    native_processes,
    outputs,
    process_of,
    said,
    statuses,
    turn,
    wait_dead,
)


def _installed() -> bool:
    try:
        importlib.metadata.version("openai-agents")
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


pytestmark = pytest.mark.skipif(not _installed(), reason="pip install 'omnigent[openai-agents]'")
TIMEOUT = 60
MODULE = "tests.harnesses.sdk_agents"
HARNESS = "openai-agents"


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    path = tmp_path / "work"
    path.mkdir()
    return path


def agents_spec(
    url: str, workdir: Path, *, agent: str = "assistant", **extra: Any
) -> dict[str, Any]:
    config = {
        "harness": "openai-agents-sdk",
        "agent": f"{MODULE}:{agent}",
        "model": "mock-model",
        "base_url": url,
        "api_key": "sk-fake",
    }
    return {
        "name": "sdk-agent",
        "prompt": "Be brief.",
        "executor": {"type": "omnigent", "config": config},
        "os_env": {"type": "caller_process", "cwd": str(workdir)},
        **extra,
    }


def allowed() -> Any:
    return omnigent.open_runtime(policy_modules=[MODULE])


async def session(rt: omnigent.Runtime, url: str, workdir: Path, **extra: Any) -> str:
    agent = await rt.create_agent(agents_spec(url, workdir, **extra))
    return (await rt.create_session(agent.id)).id


def chat_texts(request: dict[str, Any], role: str) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] == role]


async def test_a_conversation_with_tools_handoffs_and_approvals(workdir: Path) -> None:
    """One process: text streamed; a second turn sees the first; a function tool and a
    handoff as tool calls; ``needs_approval`` accepted, then declined; a policy DENY."""
    mock = MockLLM()
    mock.reply_text("Hello from the SDK, in pieces.", chunk_size=5)
    mock.reply_tool_call("get_weather", {"city": "Paris"}, text="Checking.")
    mock.reply_text("It is sunny.")
    mock.reply_tool_call("write_note", {"name": "note.txt", "text": "hi"})
    mock.reply_text("Noted.")
    mock.reply_tool_call("write_note", {"name": "declined.txt", "text": "no"})
    mock.reply_text("Not written.")
    mock.reply_tool_call("transfer_to_spanish", {})
    mock.reply_tool_call("count_words", {"text": "uno dos tres"})
    mock.reply_text("Tres palabras.")
    policies = [{"name": "no_weather", "type": "deny_tools", "tools": ["get_weather"]}]
    with trio.fail_after(TIMEOUT):
        async with mock.serve() as url, allowed() as rt:
            sid = await session(rt, url, workdir)
            events = await turn(rt, sid, "hi")
            assert statuses(events) == ["running", "launching", "running", "idle"]
            assert said(events) == "Hello from the SDK, in pieces."
            assert any(isinstance(e, OutputTextDelta) for e in events)
            first = mock.requests[0]
            assert first["model"] == "mock-model"
            assert chat_texts(first, "system") == ["You are a helpful assistant.", "Be brief."]
            # The model's usage: the child asks for it (stream_options) and reports it.
            assert first["stream_options"] == {"include_usage": True}
            usage = (await rt.get_session(sid)).usage
            [(prompt, completion)] = mock.usages
            assert (usage.model_calls, usage.input_tokens, usage.output_tokens) == (
                1,
                prompt,
                completion,
            )
            pid = process_of(rt, HARNESS, sid).pid

            events = await turn(rt, sid, "weather?")
            [call] = calls(events)
            assert (call.name, json.loads(call.arguments)) == ("get_weather", {"city": "Paris"})
            assert outputs(events) == ["sunny in Paris"]
            assert chat_texts(mock.requests[1], "user") == ["hi", "weather?"]
            assert "Hello from the SDK, in pieces." in chat_texts(mock.requests[1], "assistant")

            events = await turn(rt, sid, "note it", accept_all)
            [request] = asked(events)
            assert request.params.tool_name == "write_note"
            assert request.params.tool_input == {"name": "note.txt", "text": "hi"}
            assert request.params.message == "assistant wants to use write_note"
            assert (workdir / "note.txt").read_text() == "hi"
            assert outputs(events) == ["wrote note.txt"]

            events = await turn(rt, sid, "note another", decline_all)
            assert len(asked(events)) == 1 and not (workdir / "declined.txt").exists()
            assert outputs(events) == ["Error: The user declined this call."]

            events = await turn(rt, sid, "in spanish")
            assert [c.name for c in calls(events)] == ["transfer_to_spanish", "count_words"]
            assert outputs(events) == ['{"assistant": "spanish"}', "3"]
            assert said(events) == "Tres palabras."
            assert process_of(rt, HARNESS, sid).pid == pid  # one process all along

    mock = MockLLM()
    mock.reply_tool_call("get_weather", {"city": "Oslo"})
    mock.reply_text("Denied.")
    with trio.fail_after(TIMEOUT):
        async with mock.serve() as url, allowed() as rt:
            sid = await session(rt, url, workdir, policies=policies)
            events = await turn(rt, sid, "weather?")  # no elicitation: one would fail
            assert outputs(events) == ["Error: tool get_weather is denied"]
            assert said(events) == "Denied."


async def test_a_sub_agent_dispatched_from_the_agent(workdir: Path) -> None:
    mock = MockLLM()
    mock.reply_tool_call("sys_session_send", {"agent": "counter", "args": "Count them."})
    mock.reply_text("Dispatched.")
    mock.reply_text("The counter says 3.")
    counter = {
        "name": "counter",
        "executor": {
            "type": "omnigent",
            "config": {"harness": "scripted", "script": [{"say": "There are 3."}]},
        },
    }
    extra = {"sub_agents": [counter], "tools": {"agents": ["counter"]}}
    with trio.fail_after(TIMEOUT):
        async with mock.serve() as url, allowed() as rt:
            sid = await session(rt, url, workdir, **extra)
            async with rt.subscribe(sid) as events:
                await rt.send_message(sid, "dispatch")
                first = await collect_turn(events)
                woken = await collect_turn(events)
            [call] = calls(first)
            assert call.name == "sys_session_send"
            [child] = (await rt.list_sessions(parent_session_id=sid)).data
            assert child.title == "counter:counter-1"
            tools = {t["function"]["name"] for t in mock.requests[0]["tools"]}
            assert {"sys_session_send", "sys_read_inbox", "get_weather"} <= tools
            assert said(woken) == "The counter says 3."
            items = (await rt.list_items(sid, limit=100)).data
            assert [i.name for i in items if i.type == "function_call"] == ["sys_session_send"]


async def test_interrupt_a_new_process_continues_and_stop_ends_the_group(
    workdir: Path,
) -> None:
    mock = MockLLM()
    mock.reply_hang()
    mock.reply_text("Still here.")
    mock.reply_text("From a new process.")
    with trio.fail_after(TIMEOUT):
        async with mock.serve() as url, allowed() as rt:
            sid = await session(rt, url, workdir)
            async with rt.subscribe(sid) as events:
                await rt.send_message(sid, "think hard")
                await mock.wait_requests(1)
                assert await rt.interrupt(sid)
                rest = await collect_turn(events)
            assert statuses(rest)[-1] == "cancelled"
            pid = process_of(rt, HARNESS, sid).pid
            events = await turn(rt, sid, "and now?")
            assert said(events) == "Still here."
            assert process_of(rt, HARNESS, sid).pid == pid
            await rt.stop_session(sid)
            await wait_dead([pid])
            assert not group_alive(pid) and native_processes(rt) == []
            events = await turn(rt, sid, "again?")
            assert said(events) == "From a new process."
            assert chat_texts(mock.requests[2], "user") == ["think hard", "and now?", "again?"]


async def test_only_an_agent_the_operator_allowed_runs(workdir: Path) -> None:
    async with omnigent.open_runtime() as rt:
        with pytest.raises(omnigent.SpecError) as caught:
            await rt.create_agent(agents_spec("http://127.0.0.1:9", workdir))
        [detail] = caught.value.details
        assert detail.loc == "executor.config.agent"
        assert "--policy-module tests.harnesses.sdk_agents" in detail.msg
        spec = agents_spec("http://127.0.0.1:9", workdir)
        del spec["executor"]["config"]["agent"]
        with pytest.raises(omnigent.SpecError, match="required by harness 'openai-agents'"):
            await rt.create_agent(spec)
        spec["executor"]["config"]["agent"] = "os.system"
        with pytest.raises(omnigent.SpecError, match=r"must be 'package\.module:attr'"):
            await rt.create_agent(spec)
        loop = {"name": "looper", "executor": {"config": {"harness": "loop", "agent": "a:b"}}}
        with pytest.raises(omnigent.SpecError, match="not read by harness 'loop'"):
            await rt.create_agent(loop)


async def test_an_object_that_is_not_an_agent_fails_the_turn(workdir: Path) -> None:
    with trio.fail_after(TIMEOUT):
        async with allowed() as rt:
            sid = await session(rt, "http://127.0.0.1:9", workdir, agent="not_an_agent")
            events = await turn(rt, sid, "hi")
            assert statuses(events)[-1] == "failed"
            [failure] = [e for e in events if isinstance(e, ResponseFailed)]
            assert failure.error.message == (
                "'tests.harnesses.sdk_agents:not_an_agent' is a str, not an agents.Agent"
            )
            assert native_processes(rt) == []
