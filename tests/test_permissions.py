"""Owners, grants and the public; approval and mcp_elicitation events in the core."""

from __future__ import annotations

import json

import pytest
import trio

import omnigent
from omnigent.core import EDIT, MANAGE, NONE, PUBLIC, READ
from omnigent.errors import InvalidInput
from omnigent.model import ElicitationHeld, ElicitationRequest, ElicitationResolved, ResolveResult
from omnigent.testing import run_turn, scripted_agent

from .conftest import wait_quiet


async def test_levels_follow_owner_grants_root_and_public(rt: omnigent.Runtime) -> None:
    agent = await rt.create_agent(scripted_agent(), owner="alice")
    root = await rt.create_session(agent.id, owner="alice")
    child = await rt.create_session(agent.id, parent_session_id=root.id, owner="alice")
    assert await rt.access_level(root.id, "alice") == MANAGE
    assert await rt.access_level(root.id, "bob") == NONE
    await rt.grant(root.id, "bob", EDIT)
    assert await rt.access_level(root.id, "bob") == EDIT
    assert await rt.access_level(child.id, "bob") == EDIT  # shared with the root
    await rt.grant(child.id, PUBLIC, READ)
    assert await rt.access_level(child.id, "carol") == READ
    assert await rt.access_level(root.id, "carol") == NONE
    assert [g.to_dict() for g in await rt.list_grants(root.id)] == [
        {"user_id": "alice", "level": 3, "owner": True},
        {"user_id": "bob", "level": 2, "owner": False},
    ]
    assert await rt.revoke(root.id, "bob") is True
    assert await rt.revoke(root.id, "bob") is False
    assert await rt.access_level(child.id, "bob") == READ  # the child is public


async def test_bad_grants_are_refused(rt: omnigent.Runtime) -> None:
    agent = await rt.create_agent(scripted_agent())
    session = await rt.create_session(agent.id)
    for user, level, loc in [
        (PUBLIC, EDIT, "level"),
        ("bob", 4, "level"),
        ("bob", True, "level"),
        ("", 1, "user_id"),
    ]:
        with pytest.raises(InvalidInput) as caught:
            await rt.grant(session.id, user, level)
        assert [d.loc for d in caught.value.details] == [loc]
    with pytest.raises(omnigent.SessionNotFound):
        await rt.grant("conv_missing", "bob", READ)


async def test_session_lists_show_only_what_the_viewer_may_read(rt: omnigent.Runtime) -> None:
    agent = await rt.create_agent(scripted_agent())
    mine = await rt.create_session(agent.id, owner="alice")
    theirs = await rt.create_session(agent.id, owner="bob")
    public = await rt.create_session(agent.id, owner="bob")
    await rt.grant(public.id, PUBLIC, READ)
    seen = await rt.list_sessions(viewer="alice")
    assert {s.id for s in seen.data} == {mine.id, public.id}
    assert theirs.id in {s.id for s in (await rt.list_sessions()).data}


async def test_an_agent_name_belongs_to_its_creator(rt: omnigent.Runtime) -> None:
    await rt.create_agent(scripted_agent("shared-name"), owner="alice")
    with pytest.raises(omnigent.Forbidden):
        await rt.create_agent(scripted_agent("shared-name"), owner="bob")
    again = await rt.create_agent(scripted_agent("shared-name", [{"say": "new"}]), owner="alice")
    assert again.version == 2


async def test_mcp_elicitation_is_held_by_the_session_until_answered(
    rt: omnigent.Runtime,
) -> None:
    agent = await rt.create_agent(scripted_agent())
    session = await rt.create_session(agent.id)
    async with rt.subscribe(session.id) as events:
        answer = await rt.post_event(
            session.id,
            "mcp_elicitation",
            {"message": "Pick a colour", "requestedSchema": {"type": "object"}},
        )
        assert isinstance(answer, ElicitationHeld)
        eid = answer.elicitation_id
        request = await events.__anext__()
        assert isinstance(request, ElicitationRequest)
        assert request.elicitation_id == eid
        assert request.params.phase == "mcp_elicitation"
        assert request.params.requestedSchema == {"type": "object"}
        snapshot = await rt.get_session(session.id)
        assert [p.elicitation_id for p in snapshot.pending_elicitations] == [eid]
        resolved = await rt.post_event(
            session.id, "approval", {"elicitation_id": eid, "action": "accept", "content": {}}
        )
        assert resolved == ResolveResult(True)
        done = await events.__anext__()
        assert isinstance(done, ElicitationResolved)
        assert done.action == "accept"
        assert done.content == {}
    await wait_quiet(rt)


async def test_stopping_a_session_withdraws_its_held_elicitations(rt: omnigent.Runtime) -> None:
    agent = await rt.create_agent(scripted_agent())
    session = await rt.create_session(agent.id)
    answer = await rt.post_event(session.id, "mcp_elicitation", {"message": "Still there?"})
    with trio.fail_after(5):
        await rt.stop_session(session.id)
    assert isinstance(answer, ElicitationHeld)
    stored = await rt.get_elicitation(session.id, answer.elicitation_id)
    assert stored.status == "expired"
    assert rt.statistics()["tasks"] == 0


async def test_approval_event_validation(rt: omnigent.Runtime) -> None:
    agent = await rt.create_agent(scripted_agent())
    session = await rt.create_session(agent.id)
    for data, loc in [
        ({"elicitation_id": "e", "action": "maybe"}, "data.action"),
        ({"action": "accept"}, "data.elicitation_id"),
    ]:
        with pytest.raises(InvalidInput) as caught:
            await rt.post_event(session.id, "approval", data)
        assert loc in [d.loc for d in caught.value.details]
    answer = await rt.post_event(
        session.id, "approval", {"elicitation_id": "elicit_unknown", "action": "decline"}
    )
    assert answer == ResolveResult(False)
    with pytest.raises(InvalidInput):
        await rt.post_event(session.id, "mcp_elicitation", {"requestedSchema": {}})


NOT_ENABLED = (
    "sys_session_share: session sharing is not enabled for this agent (set "
    "agent_session_sharing: non-public or agent_session_sharing: public in the spec)"
)
PUBLIC_NOT_ENABLED = (
    "sys_session_share: public ('__public__') sharing is not enabled for this agent "
    "(requires agent_session_sharing: public); grant a specific user instead"
)
BAD_LEVEL = "sys_session_share: level must be one of ['edit', 'manage', 'read']"
SELF = "<the session>"


@pytest.mark.parametrize(
    ("sharing", "args", "expect"),
    [
        # Not offered, yet refused by name as "not enabled" (not as an unknown tool).
        ("none", {"user_id": "bob"}, {"error": NOT_ENABLED, "session_id": SELF}),
        ("none", {"user_id": "bob", "session_id": "x"}, {"error": NOT_ENABLED, "session_id": "x"}),
        (
            "non-public",
            {"user_id": "__public__"},
            {"error": PUBLIC_NOT_ENABLED, "session_id": SELF},
        ),
        ("non-public", {"user_id": "bob", "level": 7}, {"error": BAD_LEVEL}),
        ("non-public", {"user_id": "bob", "level": "owner"}, {"error": BAD_LEVEL}),
        (
            "public",
            {"user_id": "__public__", "level": 2},
            {
                "error": "Public access is limited to read-only (level 1)",
                "status_code": 400,
                "session_id": SELF,
            },
        ),
        (
            "public",
            {"user_id": "bob", "session_id": "conv_other"},
            {"error": "session_not_found", "session_id": "conv_other"},
        ),
        (
            "public",
            {"user_id": "bob", "extra": 1},
            {
                "error": "invalid arguments for sys_session_share: unknown argument 'extra' "
                "(expected: user_id, level, session_id)"
            },
        ),
    ],
)
async def test_session_share_refusals_write_nothing(
    rt: omnigent.Runtime, sharing: str, args: dict[str, object], expect: dict[str, object]
) -> None:
    spec = scripted_agent(script=[{"call": "sys_session_share", "args": args}])
    spec["agent_session_sharing"] = sharing
    agent = await rt.create_agent(spec)
    session = await rt.create_session(agent.id)
    await run_turn(rt, session.id)
    output = (await rt.list_items(session.id)).data[-1].output  # type: ignore[union-attr]
    wanted = {k: session.id if v == SELF else v for k, v in expect.items()}
    assert json.loads(output) == wanted
    assert [g.user_id for g in await rt.list_grants(session.id)] == ["local"]


async def test_session_share_outside_the_tree_is_as_the_server_would_answer(
    rt: omnigent.Runtime,
) -> None:
    """Another session is shared as ``PUT …/permissions`` would: managed ones (the
    owner's other sessions), and not one the user may only read, nor another's."""
    mine = await rt.create_session((await rt.create_agent(scripted_agent("mine"))).id)
    theirs_agent = await rt.create_agent(scripted_agent("theirs"), owner="alice")
    readable = await rt.create_session(theirs_agent.id, owner="alice")
    hidden = await rt.create_session(theirs_agent.id, owner="alice")
    await rt.grant(readable.id, "local", READ)
    calls = [
        {"call": "sys_session_share", "args": {"user_id": "bob", "session_id": sid}}
        for sid in (mine.id, readable.id, hidden.id)
    ]
    spec = {**scripted_agent("sharer", script=calls), "agent_session_sharing": "non-public"}
    session = await rt.create_session((await rt.create_agent(spec)).id)
    await run_turn(rt, session.id)
    outputs = [
        json.loads(i.output)  # type: ignore[union-attr]
        for i in (await rt.list_items(session.id)).data
        if i.type == "function_call_output"
    ]
    assert outputs == [
        {"shared": True, "session_id": mine.id, "user_id": "bob", "level": "read"},
        {"error": "access_denied", "session_id": readable.id},
        {"error": "session_not_found", "session_id": hidden.id},
    ]
    assert await rt.access_level(mine.id, "bob") == READ
    assert await rt.access_level(readable.id, "bob") == NONE


@pytest.mark.parametrize(
    ("sharing", "user", "level", "named", "number"),
    [
        ("non-public", "bob", 2, "edit", 2),
        ("non-public", "bob", "edit", "edit", 2),
        ("non-public", "bob", "manage", "manage", 3),
        ("public", "__public__", "read", "read", 1),
        ("public", "__public__", 1, "read", 1),
    ],
)
async def test_session_share_grants(
    rt: omnigent.Runtime, sharing: str, user: str, level: object, named: str, number: int
) -> None:
    spec = scripted_agent(
        script=[{"call": "sys_session_share", "args": {"user_id": user, "level": level}}]
    )
    spec["agent_session_sharing"] = sharing
    agent = await rt.create_agent(spec)
    session = await rt.create_session(agent.id)
    await run_turn(rt, session.id)
    output = (await rt.list_items(session.id)).data[-1].output  # type: ignore[union-attr]
    assert json.loads(output) == {
        "shared": True,
        "session_id": session.id,
        "user_id": user,
        "level": named,
    }
    assert await rt.access_level(session.id, "bob") == (number if user == "bob" else READ)


async def test_the_owner_cannot_be_granted_and_unknown_sessions_cannot_be_revoked(
    rt: omnigent.Runtime,
) -> None:
    agent = await rt.create_agent(scripted_agent())
    session = await rt.create_session(agent.id, owner="alice")
    with pytest.raises(omnigent.Conflict):
        await rt.grant(session.id, "alice", READ)
    with pytest.raises(omnigent.Conflict):
        await rt.revoke(session.id, "alice")
    with pytest.raises(omnigent.SessionNotFound):
        await rt.revoke("conv_missing", "bob")


async def test_initial_items_may_not_name_unknown_files(rt: omnigent.Runtime) -> None:
    agent = await rt.create_agent(scripted_agent())
    with pytest.raises(InvalidInput) as caught:
        await rt.create_session(
            agent.id,
            initial_items=[
                {
                    "type": "message",
                    "data": {
                        "role": "user",
                        "content": [{"type": "input_image", "file_id": "file_nope"}],
                    },
                }
            ],
        )
    assert [d.loc for d in caught.value.details] == ["initial_items[0].data.content[0].file_id"]
    assert (await rt.list_sessions()).data == ()
