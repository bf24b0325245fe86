"""A spec's mcp_servers: a real stdio MCP server's tools, called by the loop and scripted
harnesses through the policies; elicitations; start failures; lifetime."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio

import omnigent
from omnigent.errors import SpecError
from omnigent.model import ElicitationRequest, FunctionCallOutputItem, ResponseFailed
from omnigent.testing import MockLLM, collect_turn, run_turn, scripted_agent

from .conftest import statuses
from .external_helpers import HARNESSES, wait_gone

SERVER = [sys.executable, str(HARNESSES / "mcp_server.py")]


def calc(**extra: Any) -> dict[str, Any]:
    return {"name": "calc", "command": SERVER, **extra}


def outputs(events: list[Any]) -> list[str]:
    return [
        e.item.output
        for e in events
        if e.type == "response.output_item.done" and isinstance(e.item, FunctionCallOutputItem)
    ]


async def scripted_session(rt: omnigent.Runtime, script: list[Any], **spec: Any) -> str:
    agent = await rt.create_agent(
        {**scripted_agent("mcp-user", script), "mcp_servers": [calc()], **spec}
    )
    return (await rt.create_session(agent.id)).id


async def test_the_scripted_harness_calls_an_mcp_tool(rt: omnigent.Runtime) -> None:
    with trio.fail_after(60):
        sid = await scripted_session(rt, [{"call": "mcp__calc__add", "args": {"a": 2, "b": 3}}])
        events = await run_turn(rt, sid)
        assert statuses(events)[-1] == "idle"
        assert outputs(events) == ["5"]
        failing = await scripted_session(rt, [{"call": "mcp__calc__boom", "args": {}}], name="b")
        assert outputs(await run_turn(rt, failing))[0].startswith("Error: ")


@pytest.fixture
async def loop_rt() -> AsyncIterator[tuple[omnigent.Runtime, MockLLM]]:
    mock = MockLLM()
    async with (
        httpx.AsyncClient(transport=mock.transport()) as http,
        omnigent.open_runtime(http_client=http) as runtime,
    ):
        yield runtime, mock


async def test_the_loop_harness_is_offered_and_calls_mcp_tools(
    loop_rt: tuple[omnigent.Runtime, MockLLM],
) -> None:
    rt, mock = loop_rt
    mock.reply_tool_call("mcp__calc__add", {"a": 20, "b": 22})
    mock.reply_text("It is 42.")
    spec = {
        "name": "looper",
        "executor": {
            "type": "omnigent",
            "config": {"harness": "loop", "model": "m", "base_url": "http://mock/v1"},
        },
        "mcp_servers": [calc()],
    }
    with trio.fail_after(60):
        agent = await rt.create_agent(spec)
        sid = (await rt.create_session(agent.id)).id
        events = await run_turn(rt, sid, "add them")
    assert statuses(events)[-1] == "idle"
    assert outputs(events) == ["42"]
    offered = {t["function"]["name"]: t["function"] for t in mock.requests[0]["tools"]}
    assert offered["mcp__calc__add"]["description"] == "Add two integers."
    assert offered["mcp__calc__add"]["parameters"]["required"] == ["a", "b"]
    assert mock.requests[1]["messages"][-1]["content"] == "42"


async def test_mcp_tools_go_through_the_policies(rt: omnigent.Runtime) -> None:
    policies = [{"name": "no_calc", "type": "deny_tools", "tools": ["mcp__calc__*"]}]
    with trio.fail_after(60):
        sid = await scripted_session(
            rt, [{"call": "mcp__calc__add", "args": {"a": 1, "b": 1}}], policies=policies
        )
        [output] = outputs(await run_turn(rt, sid))
    assert output == "Error: denied by policy no_calc: tool mcp__calc__add is denied"


async def test_an_mcp_server_asks_for_input_and_gets_the_answer(rt: omnigent.Runtime) -> None:
    with trio.fail_after(60):
        parent_agent = await rt.create_agent(scripted_agent("parent", []))
        parent = await rt.create_session(parent_agent.id)
        agent = await rt.create_agent(
            {
                **scripted_agent(
                    "asker", [{"call": "mcp__calc__confirm", "args": {"what": "delete"}}]
                ),
                "mcp_servers": [calc()],
            }
        )
        child = (await rt.create_session(agent.id, parent_session_id=parent.id)).id
        async with rt.subscribe(parent.id) as mirrored, rt.subscribe(child) as events:
            await rt.send_message(child, "go")
            async for event in events:
                if isinstance(event, ElicitationRequest):
                    break
            assert event.params.message == "really delete?"
            assert event.params.phase == "mcp_elicitation"
            assert event.params.requestedSchema is not None
            assert "ok" in event.params.requestedSchema["properties"]
            async for seen in mirrored:
                if isinstance(seen, ElicitationRequest):
                    break
            assert seen.elicitation_id == event.elicitation_id
            assert seen.params.target_session_id == child
            assert await rt.resolve_elicitation(child, event.elicitation_id, "accept", {"ok": True})
            rest = await collect_turn(events)
        assert outputs(rest) == ["accept: delete (True)"]
        assert statuses(rest)[-1] == "idle"


LEGACY = [sys.executable, str(HARNESSES / "mcp_legacy_server.py")]


@pytest.mark.parametrize(
    ("command", "era"), [(SERVER, "2026-07-28"), (LEGACY, "2025-11-25")], ids=["2026", "2025"]
)
async def test_both_eras_of_server_are_spoken_with_their_elicitations(
    rt: omnigent.Runtime, command: list[str], era: str
) -> None:
    """The client negotiates: the 2026 revision (server/discover, elicitations inside
    input_required results) with a server that has it, the 2025-11-25 handshake (and
    elicitation/create requests) with one that does not."""
    script = [
        {"call": "mcp__calc__era", "args": {}},
        {"call": "mcp__calc__confirm", "args": {"what": "it"}},
    ]
    with trio.fail_after(60):
        agent = await rt.create_agent(
            {
                **scripted_agent("eras", script),
                "mcp_servers": [{"name": "calc", "command": command}],
            }
        )
        sid = (await rt.create_session(agent.id)).id
        async with rt.subscribe(sid) as events:
            await rt.send_message(sid, "go")
            seen: list[Any] = []
            async for event in events:
                seen.append(event)
                if isinstance(event, ElicitationRequest):
                    break
            assert await rt.resolve_elicitation(sid, event.elicitation_id, "accept", {"ok": True})
            seen += await collect_turn(events)
        assert outputs(seen) == [era, "accept: it (True)"]


async def test_a_declined_mcp_elicitation_goes_back_to_the_server(rt: omnigent.Runtime) -> None:
    with trio.fail_after(60):
        sid = await scripted_session(rt, [{"call": "mcp__calc__confirm", "args": {"what": "x"}}])
        async with rt.subscribe(sid) as events:
            await rt.send_message(sid, "go")
            async for event in events:
                if isinstance(event, ElicitationRequest):
                    break
            assert await rt.resolve_elicitation(sid, event.elicitation_id, "decline")
            rest = await collect_turn(events)
        assert outputs(rest) == ["decline: x (None)"]


async def test_a_server_that_fails_to_start_fails_the_turn(rt: omnigent.Runtime) -> None:
    with trio.fail_after(60):
        agent = await rt.create_agent(
            {
                **scripted_agent("broken", [{"say": "never"}]),
                "mcp_servers": [calc(command=[*SERVER, "--fail"])],
            }
        )
        sid = (await rt.create_session(agent.id)).id
        events = await run_turn(rt, sid)
    failure = next(e for e in events if isinstance(e, ResponseFailed))
    assert failure.error.code == "mcp_server_failed"
    assert failure.error.message.startswith("MCP server 'calc' failed to start: ")
    assert "calc: cannot open the abacus" in failure.error.message


async def test_the_servers_live_with_the_session_and_start_again(
    rt: omnigent.Runtime, tmp_path: Path
) -> None:
    pid_file = tmp_path / "pid"
    with trio.fail_after(60):
        agent = await rt.create_agent(
            {
                **scripted_agent(
                    "lifetime", [{"call": "mcp__calc__add", "args": {"a": 1, "b": 2}}]
                ),
                "mcp_servers": [calc(env={"MCP_PID_FILE": str(pid_file)})],
            }
        )
        sid = (await rt.create_session(agent.id)).id
        assert outputs(await run_turn(rt, sid)) == ["3"]
        first = int(pid_file.read_text())
        await wait_gone(first)  # the session went idle: its servers were closed
        assert outputs(await run_turn(rt, sid)) == ["3"]
        second = int(pid_file.read_text())
        assert second != first
    await wait_gone(second)


async def test_without_the_mcp_extra_a_spec_with_servers_is_refused(
    rt: omnigent.Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    import omnigent.mcp

    monkeypatch.setattr(omnigent.mcp, "mcp_installed", lambda: False)
    spec = {
        **scripted_agent("needs-mcp", []),
        "sub_agents": [{"name": "sub", "mcp_servers": [calc()]}],
    }
    with pytest.raises(SpecError) as raised:
        await rt.create_agent(spec)
    assert [d.loc for d in raised.value.details] == ["sub_agents[0].mcp_servers"]
    assert "pip install 'omnigent[mcp]'" in raised.value.details[0].msg
    assert json.dumps(scripted_agent("fine", []))  # a spec without servers is unaffected
    await rt.create_agent(scripted_agent("fine", []))
