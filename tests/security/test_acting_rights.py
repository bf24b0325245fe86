"""A tool acts with no more than its senders' rights; absence and secrecy look alike
(issue 23, defects 7 and 10).

Defect 7, *edit becomes manage*: a user with ``edit`` on an agent's session whose spec
allows sharing sent it a message, the agent called ``sys_session_share`` for them at
``manage`` — acting with the owner's rights — and the user then deleted the owner's
session. Now a session's tools act with the lowest level among its owner and everyone
who has sent a message into it (or above it), and a grant never exceeds that level.

Defect 10, *existence oracle*: ``sys_session_get_info`` answered ``access_denied`` for
another user's session and ``session_not_found`` for a missing one (and
``sys_session_get_history`` ``session_out_of_tree`` against ``session_not_found``),
where HTTP answers ``404`` for both. Now every orchestration tool answers a session its
acting users may not read exactly as a missing one.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import trio

import omnigent
from omnigent.testing import run_turn, scripted_agent

from ..http_helpers import HTTPX_GENERATORS
from .serve_helpers import ALICE, BOB, open_serve, scripted

pytestmark = HTTPX_GENERATORS

SHARE_MANAGE = {"call": "sys_session_share", "args": {"user_id": BOB, "level": "manage"}}


async def _turn(client: httpx.AsyncClient, session_id: str) -> str:
    """Send a message as ``client``'s user; the output of the tool call it made."""
    body = {"type": "message", "data": {"content": [{"type": "input_text", "text": "go"}]}}
    async with client.stream(
        "POST", f"/v1/sessions/{session_id}/events?stream=true", json=body
    ) as answer:
        assert answer.status_code == 200
        async for _ in answer.aiter_bytes():
            pass
    items = (await client.get(f"/v1/sessions/{session_id}/items")).json()["data"]
    output: str = [i for i in items if i["type"] == "function_call_output"][-1]["output"]
    return output


async def _bobs_level(alice: httpx.AsyncClient, session_id: str) -> int | None:
    grants = (await alice.get(f"/v1/sessions/{session_id}/permissions")).json()["data"]
    return next((g["level"] for g in grants if g["user_id"] == BOB), None)


async def test_an_editor_cannot_have_the_agent_make_them_a_manager(tmp_path: Path) -> None:
    """Defect 7, over HTTP as the attack went: bob (edit) asks the sharing agent for
    manage, then tries to delete alice's session."""
    spec = scripted("sharer", [SHARE_MANAGE], agent_session_sharing="non-public")
    with trio.fail_after(60):
        async with (
            open_serve(tmp_path, "--auth", "header", user=ALICE) as served,
            served.as_user(BOB) as bob,
        ):
            alice = served.client
            session = await served.session(agent_id=await served.agent(spec))
            shared = await alice.put(
                f"/v1/sessions/{session}/permissions", json={"user_id": BOB, "level": 2}
            )
            assert shared.status_code == 200, shared.text
            # Bob's message: the tool acts with bob's rights (edit), and sharing is manage.
            assert json.loads(await _turn(bob, session)) == {
                "error": "access_denied",
                "session_id": session,
            }
            assert await _bobs_level(alice, session) == 2
            assert (await bob.delete(f"/v1/sessions/{session}")).status_code == 403
            # Bob's words stay in the conversation: a later turn, even alice's, acts with
            # no more than his rights.
            assert json.loads(await _turn(alice, session)) == {
                "error": "access_denied",
                "session_id": session,
            }
            assert await _bobs_level(alice, session) == 2
            # The owner alone in a conversation shares as before.
            clean = await served.session(agent_id=await served.agent(spec))
            assert json.loads(await _turn(alice, clean)) == {
                "shared": True,
                "session_id": clean,
                "user_id": BOB,
                "level": "manage",
            }


async def test_a_dispatched_childs_tools_act_with_the_parents_senders_rights(
    rt: omnigent.Runtime,
) -> None:
    """What a sender says to a parent reaches its children's turns: they act with no
    more than that sender's rights either."""
    child = {
        **scripted_agent("kid", [SHARE_MANAGE]),
        "agent_session_sharing": "non-public",
    }
    parent_spec = {
        **scripted_agent(
            "boss",
            [{"call": "sys_session_send", "args": {"agent": "kid", "title": "t", "args": "x"}}],
        ),
        "sub_agents": [child],
        "tools": {"agents": ["kid"]},
    }
    agent = await rt.create_agent(parent_spec, owner=ALICE)
    parent = (await rt.create_session(agent.id, owner=ALICE)).id
    await rt.grant(parent, BOB, 2)
    with trio.fail_after(10):
        async with rt.subscribe(parent) as events:
            await rt.send_message(parent, "dispatch", viewer=BOB)
            async for event in events:
                if event.type == "session.inbox.updated" and event.count:
                    break
    (kid,) = (await rt.list_sessions(parent_session_id=parent)).data
    outputs = [
        i.output  # type: ignore[union-attr]
        for i in (await rt.list_items(kid.id)).data
        if i.type == "function_call_output"
    ]
    assert [json.loads(o) for o in outputs] == [{"error": "access_denied", "session_id": kid.id}]
    assert await rt.access_level(kid.id, BOB) == 2
    await rt.stop_session(parent)


async def test_anothers_session_is_answered_as_a_missing_one(rt: omnigent.Runtime) -> None:
    """Defect 10: the same answer for another user's session and for none at all."""
    theirs = await rt.create_agent(scripted_agent("theirs"), owner=ALICE)
    hidden = (await rt.create_session(theirs.id, owner=ALICE)).id
    missing = "conv_0123456789abcdef01234567"
    calls: list[dict[str, Any]] = []
    for target in (hidden, missing):
        calls += [
            {"call": "sys_session_get_info", "args": {"session_id": target}},
            {"call": "sys_session_get_history", "args": {"conversation_id": target}},
            {"call": "sys_session_close", "args": {"conversation_id": target}},
            {"call": "sys_agent_get", "args": {"session_id": target}},
            {"call": "sys_agent_download", "args": {"session_id": target}},
        ]
    spec = {**scripted_agent("looker", calls), "tools": {"agents": []}, "spawn": True}
    session = (await rt.create_session((await rt.create_agent(spec)).id)).id
    await run_turn(rt, session)
    outputs = [
        i.output  # type: ignore[union-attr]
        for i in (await rt.list_items(session)).data
        if i.type == "function_call_output"
    ]
    about_hidden, about_missing = outputs[:5], outputs[5:]
    assert [o.replace(hidden, missing) for o in about_hidden] == about_missing
    assert [json.loads(o)["error"] for o in about_missing] == [
        "session_not_found",
        "session_not_found",
        "session_not_found",
        "agent_not_found",
        "agent_not_found",
    ]


async def test_lists_show_only_what_every_sender_may_read(rt: omnigent.Runtime) -> None:
    """The listings too: bob wrote to alice's shared session, so its agent lists only
    what bob may read as well — not alice's other sessions."""
    calls = [
        {"call": "sys_session_list", "args": {}},
        {"call": "sys_agent_list", "args": {}},
    ]
    agent = await rt.create_agent(scripted_agent("lister", calls), owner=ALICE)
    shared = (await rt.create_session(agent.id, owner=ALICE)).id
    private = (await rt.create_session(agent.id, owner=ALICE)).id
    await rt.grant(shared, BOB, 2)
    with trio.fail_after(10):
        async with rt.subscribe(shared) as events:
            await rt.send_message(shared, "what is there?", viewer=BOB)
            async for event in events:
                if event.type == "session.status" and event.status == "idle":
                    break
    listed, agents = (
        json.loads(i.output)  # type: ignore[union-attr]
        for i in (await rt.list_items(shared)).data
        if i.type == "function_call_output"
    )
    assert [s["session_id"] for s in listed["sessions"]] == [shared]
    assert [s["session_id"] for s in agents["session_agents"]] == [shared]
    assert private not in json.dumps([listed, agents])
