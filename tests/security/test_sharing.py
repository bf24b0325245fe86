"""The sharing fence covers mirrored data (issue 9).

Grants used to inherit only from the root: a user granted read on a middle session got
``404`` for its child, yet saw the child's title, labels and last answer on the middle
session's stream, and its mirrored elicitation text, and could open that elicitation's
page. Now read on a session reads its whole subtree, and whatever a stream, snapshot,
list or page shows about another session is shown only to a viewer who may read it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import trio

import omnigent
from omnigent.testing import run_turn
from omnigent.testing import scripted_agent as core_scripted

from ..http_helpers import HTTPX_GENERATORS, SSEReader
from .serve_helpers import ALICE, BOB, CAROL, open_serve, scripted

pytestmark = HTTPX_GENERATORS

ASK = {"type": "mcp_elicitation", "data": {"message": "May I read ~/.ssh?"}}
HELLO = {"type": "message", "data": {"content": [{"type": "input_text", "text": "go"}]}}


def _mentions(event: dict[str, Any]) -> set[str]:
    """Every session id an event shows."""
    found = {event["session_id"]}
    if event.get("type") == "session.child_session.updated":
        found.add(event["child"]["id"])
    target = (event.get("params") or {}).get("target_session_id") or event.get("target_session_id")
    if target:
        found.add(target)
    return found


async def _frames(client: httpx.AsyncClient, session_id: str, until: Any) -> list[dict[str, Any]]:
    """The stream's events from the start until ``until(events)`` holds (bounded)."""
    seen: list[dict[str, Any]] = []
    async with client.stream("GET", f"/v1/sessions/{session_id}/stream?after=0") as answer:
        assert answer.status_code == 200
        reader = SSEReader(answer)
        try:
            while not until(seen):
                frame = await reader.next()
                assert frame is not None, seen
                seen.append(frame.data)
        finally:
            await reader.aclose()
    return seen


async def _readable(client: httpx.AsyncClient, session_id: str) -> bool:
    answer = await client.get(f"/v1/sessions/{session_id}")
    assert answer.status_code in (200, 404), answer.text
    return answer.status_code == 200


async def test_every_session_a_viewer_is_shown_is_one_they_may_read(tmp_path: Path) -> None:
    with trio.fail_after(60):
        async with (
            open_serve(tmp_path, "--auth", "header", user=ALICE) as served,
            served.as_user(BOB) as bob,
            served.as_user(CAROL) as carol,
        ):
            alice = served.client
            agent_id = await served.agent(scripted("bot", [{"say": "the secret plan"}]))
            root = await served.session(agent_id=agent_id, title="root")
            middle = await served.session(agent_id=agent_id, parent_session_id=root)
            leaf = await served.session(
                agent_id=agent_id, parent_session_id=middle, title="leaf", labels={"k": "v"}
            )
            sibling = await served.session(agent_id=agent_id, parent_session_id=root)
            async with alice.stream(
                "POST", f"/v1/sessions/{leaf}/events?stream=true", json=HELLO
            ) as turn:
                await turn.aread()
            asked = await alice.post(f"/v1/sessions/{leaf}/events", json=ASK)
            eid = asked.json()["elicitation_id"]
            granted = await alice.put(
                f"/v1/sessions/{middle}/permissions", json={"user_id": BOB, "level": 1}
            )
            assert granted.status_code == 200, granted.text

            # The grant on the middle session reaches everything below it, and only that.
            assert await _readable(bob, middle) and await _readable(bob, leaf)
            assert not await _readable(bob, root) and not await _readable(bob, sibling)
            listed = (await bob.get("/v1/sessions")).json()["data"]
            assert {s["id"] for s in listed} == {middle, leaf}

            # Everything bob's stream and snapshot of the middle session mention is
            # something he may read directly.
            def complete(events: list[dict[str, Any]]) -> bool:
                types = [e["type"] for e in events]
                return (
                    "response.elicitation_request" in types
                    and types.count("session.child_session.updated") >= 3
                )

            events = await _frames(bob, middle, complete)
            snapshot = (await bob.get(f"/v1/sessions/{middle}")).json()
            mentioned = set().union(*(_mentions(e) for e in events))
            mentioned |= set().union(*(_mentions(e) for e in snapshot["pending_elicitations"]))
            mentioned |= {
                c["id"]
                for c in (await bob.get(f"/v1/sessions/{middle}/child_sessions")).json()["data"]
            }
            assert leaf in mentioned
            for session_id in mentioned:
                assert await _readable(bob, session_id), session_id
            assert [p["params"]["target_session_id"] for p in snapshot["pending_elicitations"]] == [
                leaf
            ]

            # The mirrored elicitation's page and lookup: shown to bob (who reads the
            # leaf), but answering it needs edit on the leaf, which he does not have.
            page = await bob.get(f"/approve/{middle}/{eid}")
            assert page.status_code == 200 and "May I read ~/.ssh?" in page.text
            looked_up = (await bob.get(f"/v1/sessions/{middle}/elicitations/{eid}")).json()
            assert looked_up["status"] == "pending" and looked_up["target_session_id"] == leaf
            # Carol sees nothing of it.
            for url in (
                f"/v1/sessions/{middle}",
                f"/approve/{middle}/{eid}",
                f"/v1/sessions/{middle}/elicitations/{eid}",
                f"/v1/sessions/{leaf}/stream",
            ):
                answer = await carol.get(url)
                assert answer.status_code == 404, (url, answer.text)
            # Edit on the middle session is edit on the leaf: carol, given it, answers.
            await alice.put(
                f"/v1/sessions/{middle}/permissions", json={"user_id": CAROL, "level": 2}
            )
            token_page = (await carol.get(f"/approve/{middle}/{eid}")).text
            token = token_page.split('name="token" value="', 1)[1].split('"', 1)[0]
            done = await carol.post(
                f"/approve/{middle}/{eid}", data={"action": "accept", "token": token}
            )
            assert done.status_code == 200 and "Accepted" in done.text


async def test_a_cursor_one_cannot_see_is_a_cursor_that_does_not_exist(tmp_path: Path) -> None:
    with trio.fail_after(30):
        async with (
            open_serve(tmp_path, "--auth", "header", user=ALICE) as served,
            served.as_user(BOB) as bob,
        ):
            agent_id = await served.agent(scripted("bot"))
            hidden = await served.session(agent_id=agent_id)
            mine = await served.session(bob, agent_id=agent_id)
            answers = {}
            for cursor in (hidden, "conv_" + "0" * 24):
                answer = await bob.get(f"/v1/sessions?after={cursor}")
                body = json.loads(answer.text.replace(cursor, "<cursor>"))
                answers[cursor] = (answer.status_code, body)
            assert answers[hidden] == answers["conv_" + "0" * 24]
            assert answers[hidden][0] == 422
            assert answers[hidden][1]["error"]["details"][0]["loc"] == "after"
            page = (await bob.get(f"/v1/sessions?after={mine}")).json()
            assert page["data"] == [] and page["has_more"] is False
            # The owner pages through her own as before.
            assert (await served.client.get(f"/v1/sessions?after={hidden}")).status_code == 200


async def test_the_core_hides_what_a_viewer_may_not_read(rt: omnigent.Runtime) -> None:
    # A child deleted after it was announced: its summary stays in the parent's log,
    # but a viewer who cannot read it (nobody can: it is gone) is not shown it.
    with trio.fail_after(20):
        agent = await rt.create_agent(core_scripted("bot", [{"say": "child answer"}]))
        parent = await rt.create_session(agent.id, owner=ALICE)
        child = await rt.create_session(agent.id, parent_session_id=parent.id, owner=ALICE)
        await run_turn(rt, child.id)
        await rt.delete_session(child.id)

        await run_turn(rt, parent.id)  # its events come after every child update

        async def collect(viewer: str | None) -> list[str]:
            shown: list[str] = []
            async with rt.subscribe(parent.id, after=0, viewer=viewer) as events:
                async for event in events:
                    if event.type == "session.child_session.updated":
                        shown.append(event.child.id)  # type: ignore[attr-defined]
                    if event.type == "session.status" and event.status == "idle":  # type: ignore[attr-defined]
                        return shown
            raise AssertionError("the parent's stream ended")

        assert child.id in await collect(None)
        assert await collect(ALICE) == []
        # The owner of an ancestor manages what is below; others get nothing.
        grandchild_owner = await rt.create_session(agent.id, parent_session_id=parent.id, owner=BOB)
        assert await rt.access_level(grandchild_owner.id, ALICE) == 3
        assert await rt.access_level(grandchild_owner.id, BOB) == 3
        assert await rt.access_level(parent.id, BOB) == 0
        await rt.grant(parent.id, CAROL, 1)
        assert await rt.access_level(grandchild_owner.id, CAROL) == 1
        summary = await rt.child_summary(grandchild_owner.id, viewer=CAROL)
        assert summary.id == grandchild_owner.id
        try:
            await rt.child_summary(grandchild_owner.id, viewer="dave@example.com")
        except omnigent.SessionNotFound:
            pass
        else:
            raise AssertionError("child_summary showed a session to a viewer who cannot read it")
