"""Elicitations over HTTP: resolve, look up, the approval page, events, cross-session."""

from __future__ import annotations

from typing import Any

import pytest
import trio

import omnigent

from .http_elicitation_helpers import (
    CALLS,
    REQUEST,
    RESOLVED,
    approve,
    asking_agent,
    asking_session,
    child_of,
    next_event,
    page_token,
    resolved,
    watch,
)
from .http_helpers import HTTPX_GENERATORS, Server, is_terminal_status, open_server, scripted
from .test_http_api import assert_error

pytestmark = HTTPX_GENERATORS


@pytest.fixture(autouse=True)
def _clear_calls() -> None:
    CALLS.clear()


async def get_elicitation(server: Server, session_id: str, eid: str) -> dict[str, Any]:
    answer = await server.client.get(f"/v1/sessions/{session_id}/elicitations/{eid}")
    assert answer.status_code == 200, answer.text
    body: dict[str, Any] = answer.json()
    return body


@pytest.mark.parametrize(
    ("action", "runs"), [("accept", True), ("decline", False), ("cancel", False)]
)
async def test_a_turn_prompt_round_trip(action: str, runs: bool) -> None:
    with trio.fail_after(10):
        async with open_server() as server:
            sid = await asking_session(server)
            async with watch(server, sid) as stream:
                await server.message(sid, "go")
                request = (await next_event(stream, REQUEST)).data
                eid, params = request["elicitation_id"], request["params"]
                assert params["url"] == f"/approve/{sid}/{eid}" and params["mode"] == "url"
                assert (params["phase"], params["policy_name"]) == ("tool_call", "ask_x")
                assert params["tool_name"] == "x" and params["tool_input"] == {"path": "a.txt"}
                assert await get_elicitation(server, sid, eid) == {
                    "status": "pending",
                    "elicitation_id": eid,
                    "message": params["message"],
                    "phase": "tool_call",
                    "policy_name": "ask_x",
                    "content_preview": '{"path": "a.txt"}',
                }
                snapshot = (await server.client.get(f"/v1/sessions/{sid}")).json()
                assert [p["elicitation_id"] for p in snapshot["pending_elicitations"]] == [eid]
                assert await resolved(server, sid, eid, action)
                assert not await resolved(server, sid, eid, action)
                done = await next_event(stream, RESOLVED, elicitation_id=eid)
                assert done.data["action"] == action
                await stream.read_until(is_terminal_status)
            assert await get_elicitation(server, sid, eid) == {
                "status": "resolved",
                "elicitation_id": eid,
            }
            assert bool(CALLS) is runs


async def test_resolve_and_get_refuse_bad_input() -> None:
    with trio.fail_after(10):
        async with open_server() as server:
            sid = await server.session()
            url = f"/v1/sessions/{sid}/elicitations/elicit_nope"
            IR, SNF = "invalid_request", "session_not_found"
            cases: list[tuple[dict[str, Any], str]] = [
                ({"json": {"action": "maybe"}}, "action"),
                ({"json": {"action": "ACCEPT"}}, "action"),
                ({"json": {"action": 1}}, "action"),
                ({"json": {}}, "action"),
                ({"json": {"action": "accept", "extra": 1}}, "extra"),
                ({"json": [1]}, "body"),
                ({"content": b"nope", "headers": {"Content-Type": "application/json"}}, "body"),
            ]
            for options, loc in cases:
                assert_error(await server.client.post(f"{url}/resolve", **options), 422, IR, loc)
            nope = "/v1/sessions/conv_nope/elicitations/elicit_x"
            ok = {"action": "accept"}
            assert_error(await server.client.post(f"{nope}/resolve", json=ok), 404, SNF)
            assert_error(await server.client.get(nope), 404, SNF)
            # An unknown elicitation is indistinguishable from a resolved one.
            unknown = await server.client.post(f"{url}/resolve", json=ok)
            assert (unknown.status_code, unknown.json()) == (202, {"resolved": False})
            assert await get_elicitation(server, sid, "elicit_nope") == {
                "status": "resolved",
                "elicitation_id": "elicit_nope",
            }


async def test_another_session_can_neither_see_nor_resolve() -> None:
    with trio.fail_after(10):
        async with open_server() as server:
            owner = await asking_session(server)
            stranger = await server.session(scripted("stranger"))
            async with watch(server, owner) as stream:
                await server.message(owner, "go")
                eid = (await next_event(stream, REQUEST)).data["elicitation_id"]
                assert not await resolved(server, stranger, eid, "accept")
                view = await get_elicitation(server, stranger, eid)
                assert view == {"status": "resolved", "elicitation_id": eid}
                assert (await get_elicitation(server, owner, eid))["status"] == "pending"
                assert CALLS == []
                assert await resolved(server, owner, eid, "accept")
                await stream.read_until(is_terminal_status)
            assert CALLS == [{"path": "a.txt"}]


async def test_two_children_pending_on_one_parent_resolve_independently() -> None:
    with trio.fail_after(10):
        async with open_server() as server:
            parent = await server.session(scripted("parent"))
            first = await child_of(server, parent, asking_agent("kid1", "one.txt"))
            second = await child_of(server, parent, asking_agent("kid2", "two.txt"))
            async with watch(server, parent) as stream:
                await server.message(first, "go")
                await server.message(second, "go")
                seen = {}
                for _ in range(2):
                    frame = await next_event(stream, REQUEST)
                    seen[frame.data["params"]["target_session_id"]] = frame.data["elicitation_id"]
                assert set(seen) == {first, second}
                snapshot = (await server.client.get(f"/v1/sessions/{parent}")).json()
                targets = {
                    p["params"]["target_session_id"] for p in snapshot["pending_elicitations"]
                }
                assert targets == {first, second}
                for child, eid in seen.items():
                    view = await get_elicitation(server, parent, eid)
                    assert view["status"] == "pending" and view["target_session_id"] == child
                    assert "target_session_id" not in await get_elicitation(server, child, eid)
                # The parent's id, or the other child's, answers nothing.
                assert not await resolved(server, parent, seen[first], "accept")
                assert not await resolved(server, second, seen[first], "accept")
                assert await resolved(server, first, seen[first], "accept")
                done = await next_event(stream, RESOLVED, elicitation_id=seen[first])
                assert done.data["target_session_id"] == first
                assert (await get_elicitation(server, parent, seen[second]))["status"] == "pending"
                snapshot = (await server.client.get(f"/v1/sessions/{parent}")).json()
                still = [p["elicitation_id"] for p in snapshot["pending_elicitations"]]
                assert still == [seen[second]]
                assert await resolved(server, second, seen[second], "decline")
                done = await next_event(stream, RESOLVED, elicitation_id=seen[second])
                assert (done.data["action"], done.data["target_session_id"]) == ("decline", second)
            await _wait_idle(server, first, second)
            assert CALLS == [{"path": "one.txt"}]


async def _wait_idle(server: Server, *session_ids: str) -> None:
    for sid in session_ids:
        while (await server.client.get(f"/v1/sessions/{sid}")).json()["busy"]:
            await trio.sleep(0.01)


async def test_mcp_elicitation_then_approval_event() -> None:
    with trio.fail_after(10):
        async with open_server() as server:
            sid = await server.session()
            events = f"/v1/sessions/{sid}/events"
            schema = {"type": "object", "properties": {"name": {"type": "string"}}}
            async with watch(server, sid) as stream:
                asked = await server.client.post(
                    events,
                    json={
                        "type": "mcp_elicitation",
                        "data": {"message": "Your name?", "requestedSchema": schema},
                    },
                )
                assert asked.status_code == 202, asked.text
                eid = asked.json()["elicitation_id"]
                request = (await next_event(stream, REQUEST, elicitation_id=eid)).data
                assert request["params"]["phase"] == "mcp_elicitation"
                assert request["params"]["requestedSchema"] == schema
                view = await get_elicitation(server, sid, eid)
                assert view["requested_schema"] == schema and view["message"] == "Your name?"
                bad = await server.client.post(
                    events,
                    json={"type": "approval", "data": {"elicitation_id": eid, "action": "ok"}},
                )
                assert_error(bad, 422, "invalid_request", "data.action")
                approval = {"elicitation_id": eid, "action": "accept", "content": {"name": "A"}}
                answer = await server.client.post(
                    events, json={"type": "approval", "data": approval}
                )
                assert answer.status_code == 202 and answer.json()["resolved"] is True
                done = await next_event(stream, RESOLVED, elicitation_id=eid)
                assert done.data["action"] == "accept"
                again = await server.client.post(
                    events, json={"type": "approval", "data": approval}
                )
                assert again.json()["resolved"] is False


async def test_form_mode_has_no_url(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OMNIGENT_ELICITATION_MODE", "form")
    with trio.fail_after(10):
        async with open_server() as server:
            sid = await server.session()
            async with watch(server, sid) as stream:
                asked = await server.client.post(
                    f"/v1/sessions/{sid}/events",
                    json={"type": "mcp_elicitation", "data": {"message": "ok?"}},
                )
                eid = asked.json()["elicitation_id"]
                params = (await next_event(stream, REQUEST, elicitation_id=eid)).data["params"]
                assert params["mode"] == "form" and "url" not in params
                assert await resolved(server, sid, eid, "cancel")


# -- the approval page -----------------------------------------------------------------


async def _hold(server: Server, session_id: str, message: str, **fields: Any) -> str:
    runtime = server.runtime
    params = omnigent.core.elicitation_params(message, "mcp_elicitation", **fields)
    return await runtime.hold_elicitation(session_id, params)


async def test_the_approval_page_escapes_and_resolves() -> None:
    with trio.fail_after(10):
        async with open_server() as server:
            sid = await server.session()
            evil = {"command": "<script>alert('x')</script> && rm -rf /"}
            eid = await _hold(server, sid, "Run <b>this</b>?", tool_name="sh", tool_input=evil)
            page = await server.client.get(f"/approve/{sid}/{eid}")
            assert page.status_code == 200
            assert page.headers["content-type"].startswith("text/html")
            assert "script-src" not in page.headers["content-security-policy"]
            assert "default-src 'none'" in page.headers["content-security-policy"]
            html = page.text
            assert "<script" not in html and "&lt;script&gt;" in html
            assert "Run &lt;b&gt;this&lt;/b&gt;?" in html
            assert '<form method="post">' in html
            assert 'name="action" value="accept"' in html and 'value="decline"' in html
            token = await page_token(server.client, f"/approve/{sid}/{eid}")
            async with watch(server, sid) as stream:
                foreign = await approve(
                    server.client,
                    f"/approve/{sid}/{eid}",
                    {"action": "accept"},
                    headers={"Sec-Fetch-Site": "cross-site"},
                )
                assert_error(foreign, 403, "cross_site_request")
                untokened = await server.client.post(
                    f"/approve/{sid}/{eid}", data={"action": "accept"}
                )
                assert_error(untokened, 403, "forbidden")
                bad = await approve(server.client, f"/approve/{sid}/{eid}", {"action": "yes"})
                assert_error(bad, 422, "invalid_request", "action")
                done = await approve(
                    server.client,
                    f"/approve/{sid}/{eid}",
                    {"action": "decline"},
                    headers={"Sec-Fetch-Site": "same-origin"},
                )
                assert done.status_code == 200 and "Declined" in done.text
                frame = await next_event(stream, RESOLVED, elicitation_id=eid)
                assert frame.data["action"] == "decline"
            gone = await server.client.get(f"/approve/{sid}/{eid}")
            assert gone.status_code == 200 and "no longer pending" in gone.text
            again = await server.client.post(
                f"/approve/{sid}/{eid}", data={"action": "accept", "token": token}
            )
            assert again.status_code == 200 and "no longer pending" in again.text
            assert_error(
                await server.client.get(f"/approve/conv_nope/{eid}"), 404, "session_not_found"
            )


async def test_the_approval_page_answers_as_the_owner_from_an_ancestor() -> None:
    with trio.fail_after(10):
        async with open_server() as server:
            parent = await server.session(scripted("parent"))
            child = await child_of(server, parent, asking_agent("kid"))
            async with watch(server, child) as stream:
                await server.message(child, "go")
                eid = (await next_event(stream, REQUEST)).data["elicitation_id"]
                page = await server.client.get(f"/approve/{parent}/{eid}")
                assert "Asked by session" in page.text and child in page.text
                done = await approve(
                    server.client, f"/approve/{parent}/{eid}", {"action": "accept"}
                )
                assert "Accepted" in done.text
                await stream.read_until(is_terminal_status)
            assert CALLS == [{"path": "a.txt"}]


async def test_the_approval_page_fills_a_requested_schema(monkeypatch: pytest.MonkeyPatch) -> None:
    with trio.fail_after(10):
        async with open_server() as server:
            sid = await server.session()
            schema = {
                "type": "object",
                "properties": {
                    "name": {"type": "string", "title": "Name"},
                    "age": {"type": "integer"},
                    "ok": {"type": "boolean"},
                    "color": {"type": "string", "enum": ["red", "<blue>"]},
                },
                "required": ["name"],
            }
            eid = await _hold(server, sid, "About you", requestedSchema=schema)
            html = (await server.client.get(f"/approve/{sid}/{eid}")).text
            assert 'name="f_name" required' in html and 'type="number" step="1"' in html
            assert '<option value="&lt;blue&gt;">' in html
            answers: list[Any] = []
            original = server.runtime.resolve_elicitation

            async def spy(session_id: str, elicitation_id: str, action: str, content: Any) -> bool:
                answers.append(content)
                return await original(session_id, elicitation_id, action, content)

            monkeypatch.setattr(server.runtime, "resolve_elicitation", spy)
            url = f"/approve/{sid}/{eid}"
            missing = await approve(server.client, url, {"action": "accept", "f_age": "3"})
            assert_error(missing, 422, "invalid_request", "f_name")
            not_int = {"action": "accept", "f_name": "A", "f_age": "x"}
            assert_error(
                await approve(server.client, url, not_int), 422, "invalid_request", "f_age"
            )
            form = {"action": "accept", "f_name": "Ada", "f_age": "36", "f_color": "<blue>"}
            assert "Accepted" in (await approve(server.client, url, form)).text
            assert answers == [{"name": "Ada", "age": 36, "ok": False, "color": "<blue>"}]
