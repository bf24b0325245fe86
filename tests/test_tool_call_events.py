"""A tool call on the wire, as ``API.md`` states it: its ``function_call`` item comes in
``response.output_item.done`` twice — ``action_required`` when it is asked for,
``completed`` once it ran — under one item id, then its ``function_call_output`` once.
Exactly that for every kind of harness: none repeats a state (issue 31 asked whether
"each tool call appears twice" was a duplicate; it is the contract, and this pins it).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import httpx
import trio

import omnigent
from omnigent.model import FunctionCallItem, FunctionCallOutputItem
from omnigent.testing import MockLLM

REPO = Path(__file__).resolve().parent.parent


def calls(events: list[Any]) -> list[tuple[str, str | None]]:
    """Each ``output_item.done`` of a tool call: (item kind, status or None)."""
    seen: list[tuple[str, str | None]] = []
    for event in events:
        if event.type != "response.output_item.done":
            continue
        item = event.item
        if isinstance(item, FunctionCallItem):
            seen.append((f"call {item.id}", item.status))
        elif isinstance(item, FunctionCallOutputItem):
            seen.append((f"output {item.call_id}", None))
    return seen


async def one_turn(rt: omnigent.Runtime, spec: dict[str, Any], text: str) -> list[Any]:
    agent = await rt.create_agent(spec)
    session = await rt.create_session(agent.id)
    async with rt.open_turn_stream(session.id, text) as (_, events):
        return [event async for event in events]


def assert_the_contract(events: list[Any]) -> None:
    seen = calls(events)
    [call_kind] = {kind for kind, _ in seen if kind.startswith("call ")}
    statuses = [status for kind, status in seen if kind == call_kind]
    assert statuses == ["action_required", "completed"], seen
    assert len([kind for kind, _ in seen if kind.startswith("output ")]) == 1, seen


async def test_every_harness_sends_each_state_of_a_call_once(tmp_path: Path) -> None:
    mock = MockLLM()
    mock.reply_tool_call("sys_os_read", {"path": "nope"})
    mock.reply_text("done")
    loop = {
        "name": "loop",
        "executor": {
            "config": {"harness": "loop", "model": "m", "base_url": "http://x/v1", "api_key": "k"}
        },
    }
    scripted = {
        "name": "scripted",
        "executor": {
            "config": {
                "harness": "scripted",
                "script": [{"call": "sys_os_read", "args": {"path": "x"}}],
            }
        },
    }
    external = {
        "name": "external",
        "executor": {
            "config": {
                "harness": "external",
                "command": [sys.executable, str(REPO / "examples" / "echo_harness.py")],
            }
        },
    }
    with trio.fail_after(60):
        async with (
            httpx.AsyncClient(transport=mock.transport()) as http,
            omnigent.open_runtime(http_client=http) as rt,
        ):
            assert_the_contract(await one_turn(rt, loop, "read it"))
            assert_the_contract(await one_turn(rt, scripted, "read it"))
            assert_the_contract(await one_turn(rt, external, "run sys_os_read"))
