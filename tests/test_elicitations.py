"""Policies in sessions and the elicitation core: park, mirror, resolve, withdraw."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import trio

import omnigent
from omnigent.errors import InvalidInput
from omnigent.model import ElicitationRequest, ElicitationResolved, Event, SessionStatusChanged
from omnigent.testing import collect_turn, run_turn, scripted_agent

from .conftest import statuses, wait_quiet

CALLS: list[dict[str, Any]] = []


def record(**kwargs: Any) -> str:
    """A tool that records its calls."""
    CALLS.append(kwargs)
    return "recorded"


def shout_result(event: dict[str, Any]) -> dict[str, Any]:
    """A function policy: upper-cases every tool result."""
    if event["type"] == "tool_result":
        return {"result": "ALLOW", "data": event["data"]["result"].upper()}
    return {"result": "UNSPECIFIED"}


@pytest.fixture(autouse=True)
def _clear_calls() -> None:
    CALLS.clear()


@pytest.fixture
async def rt() -> AsyncIterator[omnigent.Runtime]:
    """A runtime whose agents may use this module's function policies."""
    async with omnigent.open_runtime(policy_modules=[__name__]) as runtime:
        yield runtime


async def agent_with(rt: omnigent.Runtime, policies: list[dict[str, Any]], name: str = "p") -> str:
    rt.register_tool(record, replace=True)
    spec = scripted_agent(name, script=[{"call": "record", "args": {"x": 1}}])
    spec["policies"] = policies
    return (await rt.create_agent(spec)).id


async def next_of(events: Any, kind: type) -> Any:
    async for event in events:
        if isinstance(event, kind):
            return event
    raise AssertionError("stream ended")


ASK = [{"name": "ask_record", "type": "ask_tools", "tools": ["record"], "reason": "Approve?"}]


@pytest.mark.parametrize(
    ("action", "runs"), [("accept", True), ("decline", False), ("cancel", False)]
)
async def test_ask_parks_until_resolved(rt: omnigent.Runtime, action: str, runs: bool) -> None:
    agent = await agent_with(rt, ASK)
    session = (await rt.create_session(agent)).id
    async with rt.subscribe(session) as events:
        await rt.send_message(session, "go")
        request = await next_of(events, ElicitationRequest)
        assert request.params.message == "ask_record: Approve?"
        assert request.params.phase == "tool_call"
        assert request.params.tool_name == "record"
        assert request.params.tool_input == {"x": 1}
        assert request.params.url == f"/approve/{session}/{request.elicitation_id}"
        assert (await rt.get_session(session)).status == "waiting"
        snapshot = await rt.get_session(session)
        # Regression: snapshot entries carried blank stamps (event_id 0, no session).
        assert snapshot.pending_elicitations == (request,)
        assert await rt.resolve_elicitation(session, request.elicitation_id, action)
        assert not await rt.resolve_elicitation(session, request.elicitation_id, action)
        rest = await collect_turn(events)
    assert statuses(rest) == ["waiting", "running", "idle"]
    resolved = [e for e in rest if isinstance(e, ElicitationResolved)]
    assert [r.action for r in resolved] == [action]
    assert bool(CALLS) is runs
    items = (await rt.list_items(session)).data
    output = items[-1].output  # type: ignore[union-attr]
    assert output == "recorded" if runs else output.startswith("Error: denied by policy ask_record")
    assert (await rt.get_session(session)).pending_elicitations == ()


async def test_form_mode_has_no_url(rt: omnigent.Runtime, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OMNIGENT_ELICITATION_MODE", "form")
    agent = await agent_with(rt, ASK)
    session = (await rt.create_session(agent)).id
    async with rt.subscribe(session) as events:
        await rt.send_message(session, "go")
        request = await next_of(events, ElicitationRequest)
        assert (request.params.mode, request.params.url) == ("form", None)
        await rt.resolve_elicitation(session, request.elicitation_id, "accept")


async def test_deny_policy_never_runs_the_tool(rt: omnigent.Runtime) -> None:
    agent = await agent_with(rt, [{"name": "no_rec", "type": "deny_tools", "tools": ["rec*"]}])
    session = (await rt.create_session(agent)).id
    await run_turn(rt, session)
    assert CALLS == []
    output = (await rt.list_items(session)).data[-1].output  # type: ignore[union-attr]
    assert output.startswith("Error: denied by policy no_rec:")


async def test_function_policy_replaces_the_result(rt: omnigent.Runtime) -> None:
    policy = {"name": "shout", "type": "function", "function": f"{__name__}:shout_result"}
    agent = await agent_with(rt, [policy])
    session = (await rt.create_session(agent)).id
    await run_turn(rt, session)
    assert (await rt.list_items(session)).data[-1].output == "RECORDED"  # type: ignore[union-attr]


def explode(event: dict[str, Any]) -> None:
    """A function policy that always fails."""
    raise RuntimeError("policy bug")


async def test_a_bad_function_reference_is_refused_at_creation(rt: omnigent.Runtime) -> None:
    for ref in ("no.such.module:check", f"{__name__}:no_such_function"):
        policy = {"name": "broken", "type": "function", "function": ref}
        with pytest.raises(omnigent.SpecError) as caught:
            await agent_with(rt, [policy])
        assert [d.loc for d in caught.value.details] == ["policies[0].function"]


async def test_a_failing_function_policy_fails_closed(rt: omnigent.Runtime) -> None:
    policy = {"name": "broken", "type": "function", "function": f"{__name__}:explode"}
    agent = await agent_with(rt, [policy])
    session = (await rt.create_session(agent)).id
    await run_turn(rt, session)
    assert CALLS == []
    output = (await rt.list_items(session)).data[-1].output  # type: ignore[union-attr]
    assert output.startswith("Error: denied by policy broken:")


async def test_default_policies_apply_to_every_session() -> None:
    deny_all = {"name": "server_deny", "type": "deny_tools", "tools": ["*"]}
    async with omnigent.open_runtime(default_policies=[deny_all]) as rt:
        agent = await agent_with(rt, [])
        session = (await rt.create_session(agent)).id
        await run_turn(rt, session)
        output = (await rt.list_items(session)).data[-1].output  # type: ignore[union-attr]
    assert output.startswith("Error: denied by policy server_deny")


async def test_cross_session_resolve_is_refused(rt: omnigent.Runtime) -> None:
    agent = await agent_with(rt, ASK)
    owner = (await rt.create_session(agent)).id
    stranger = (await rt.create_session(agent)).id
    async with rt.subscribe(owner) as events:
        await rt.send_message(owner, "go")
        request = await next_of(events, ElicitationRequest)
        assert not await rt.resolve_elicitation(stranger, request.elicitation_id, "accept")
        assert (await rt.get_session(owner)).status == "waiting"
        assert (await rt.get_elicitation(owner, request.elicitation_id)).status == "pending"
        assert await rt.resolve_elicitation(owner, request.elicitation_id, "decline")
        await collect_turn(events)


async def test_unknown_action_is_refused(rt: omnigent.Runtime) -> None:
    agent = await agent_with(rt, ASK)
    session = (await rt.create_session(agent)).id
    with pytest.raises(InvalidInput) as caught:
        await rt.resolve_elicitation(session, "elicit_x", "maybe")
    assert [d.loc for d in caught.value.details] == ["action"]


async def test_child_prompt_is_mirrored_to_every_ancestor(rt: omnigent.Runtime) -> None:
    agent = await agent_with(rt, ASK)
    grandparent = (await rt.create_session(agent)).id
    parent = (await rt.create_session(agent, parent_session_id=grandparent)).id
    child = (await rt.create_session(agent, parent_session_id=parent)).id
    async with (
        rt.subscribe(child) as child_events,
        rt.subscribe(parent) as parent_events,
        rt.subscribe(grandparent) as top_events,
    ):
        await rt.send_message(child, "go")
        own = await next_of(child_events, ElicitationRequest)
        mirrored = [await next_of(e, ElicitationRequest) for e in (parent_events, top_events)]
        assert own.params.target_session_id is None
        for mirror in mirrored:
            assert mirror.elicitation_id == own.elicitation_id
            assert mirror.params.target_session_id == child
        top = await rt.get_session(grandparent)
        assert top.pending_elicitations == (mirrored[1],)
        assert (await rt.get_session(parent)).pending_elicitations == (mirrored[0],)
        # Only the owner's id resolves it, even from an ancestor's view.
        assert not await rt.resolve_elicitation(grandparent, own.elicitation_id, "accept")
        assert await rt.resolve_elicitation(child, own.elicitation_id, "accept")
        for events in (parent_events, top_events):
            resolved: Event = await next_of(events, ElicitationResolved)
            assert resolved.to_dict()["target_session_id"] == child
        await collect_turn(child_events)
    assert CALLS == [{"x": 1}]


async def test_interrupt_withdraws_a_pending_elicitation(rt: omnigent.Runtime) -> None:
    agent = await agent_with(rt, ASK)
    session = (await rt.create_session(agent)).id
    async with rt.subscribe(session) as events:
        await rt.send_message(session, "go")
        request = await next_of(events, ElicitationRequest)
        await rt.interrupt(session)
        rest = await collect_turn(events)
    assert statuses(rest)[-1] == "cancelled"
    resolved = [e for e in rest if isinstance(e, ElicitationResolved)]
    assert [r.action for r in resolved] == ["expired"]
    stored = await rt.get_elicitation(session, request.elicitation_id)
    assert stored.status == "expired"
    assert not await rt.resolve_elicitation(session, request.elicitation_id, "accept")
    assert CALLS == []
    await wait_quiet(rt)


async def test_pending_elicitations_expire_across_a_restart(tmp_path: Path) -> None:
    db = tmp_path / "e.db"
    async with omnigent.open_runtime(db=str(db)) as rt:
        agent = await agent_with(rt, ASK)
        session = (await rt.create_session(agent)).id
        async with rt.subscribe(session) as events:
            await rt.send_message(session, "go")
            request = await next_of(events, ElicitationRequest)
    # Simulate a crash that left the row pending.
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE elicitations SET status = 'pending'")
    async with omnigent.open_runtime(db=str(db)) as rt:
        stored = await rt.get_elicitation(session, request.elicitation_id)
        assert stored.status == "expired"


async def test_evaluate_policy_entry_point(rt: omnigent.Runtime) -> None:
    agent = await agent_with(
        rt,
        [
            {"name": "deny_rm", "type": "deny_tools", "tools": ["rm"], "reason": "never"},
            {"name": "ask_sh", "type": "ask_tools", "tools": ["sh"], "reason": "shell?"},
        ],
    )
    session = (await rt.create_session(agent)).id
    denied = await rt.evaluate_policy(
        session, {"type": "PHASE_TOOL_CALL", "data": {"tool_name": "rm", "tool_input": {}}}
    )
    assert denied.wire() == {"result": "POLICY_ACTION_DENY", "reason": "never"}
    nothing = await rt.evaluate_policy(
        session, {"type": "PHASE_TOOL_CALL", "data": {"tool_name": "ls"}}
    )
    assert nothing.wire() == {"result": "POLICY_ACTION_UNSPECIFIED"}

    answers: list[Any] = []
    async with rt.subscribe(session) as events, trio.open_nursery() as nursery:

        async def ask() -> None:
            answers.append(
                await rt.evaluate_policy(
                    session, {"type": "PHASE_TOOL_CALL", "data": {"tool_name": "sh"}}
                )
            )

        nursery.start_soon(ask)
        request = await next_of(events, ElicitationRequest)
        assert request.params.message == "ask_sh: shell?"
        assert request.params.phase == "tool_call"
        assert await rt.resolve_elicitation(session, request.elicitation_id, "accept")
    assert answers[0].wire()["result"] == "POLICY_ACTION_ALLOW"
    with pytest.raises(InvalidInput):
        await rt.evaluate_policy(session, {"type": "PHASE_NOPE", "data": {}})


async def test_waiting_status_returns_to_running(rt: omnigent.Runtime) -> None:
    agent = await agent_with(rt, ASK)
    session = (await rt.create_session(agent)).id
    async with rt.subscribe(session) as events:
        await rt.send_message(session, "go")
        request = await next_of(events, ElicitationRequest)
        await rt.resolve_elicitation(session, request.elicitation_id, "accept")
        rest = await collect_turn(events)
    history = [e.status for e in rest if isinstance(e, SessionStatusChanged)]
    assert history == ["waiting", "running", "idle"]
