"""Forking a session (``Runtime.fork_session``, ``POST /v1/sessions/{id}/fork``): a copy of
the history up to one item, under a new id and event log, sharing nothing live; the
source untouched. And ``session.info.updated``: a change of a session's fields is published
on the session itself."""

from __future__ import annotations

from typing import Any

import pytest
import trio

import omnigent
from omnigent.errors import InvalidInput
from omnigent.harnesses.base import TurnContext, TurnRequest
from omnigent.model import (
    FunctionCallItem,
    FunctionCallOutputItem,
    MessageItem,
    SessionInfoUpdated,
    item_text,
)
from omnigent.testing import RecordingHarness, run_turn, scripted_agent

from .conftest import statuses
from .http_helpers import open_server


def wire(items: Any) -> list[dict[str, Any]]:
    """Items without their ids (a fork's copies get new ones)."""
    return [{k: v for k, v in i.to_dict().items() if k != "id"} for i in items]


async def test_a_fork_copies_the_history_up_to_an_item_and_nothing_live(
    rt: omnigent.Runtime, rec_session: str, recorder: RecordingHarness
) -> None:
    with trio.fail_after(20):
        for text in ("one", "two"):
            assert statuses(await run_turn(rt, rec_session, text)) == ["running", "idle"]
        source = await rt.update_session(rec_session, title="Chat")
        items = (await rt.list_items(rec_session)).data
        assert len(items) == 4  # two questions, two answers
        before_events = source.last_event_id

        fork = await rt.fork_session(rec_session, up_to_item_id=items[1].id)
        assert fork.id != rec_session and fork.parent_session_id is None
        assert fork.title == "Chat (fork)" and fork.agent_id == source.agent_id
        assert fork.last_event_id == 0 and fork.status == "idle"
        copied = (await rt.list_items(fork.id)).data
        assert wire(copied) == wire(items[:2])
        assert {i.id for i in copied}.isdisjoint(i.id for i in items)

        # The fork goes its own way: its turn sees the copy, the source sees nothing.
        await run_turn(rt, fork.id, "three")
        assert wire(recorder.requests[-1].history) == wire(items[:2])
        assert wire((await rt.list_items(rec_session)).data) == wire(items)
        assert (await rt.get_session(rec_session)).last_event_id == before_events
        whole = await rt.fork_session(rec_session, title="Again")
        assert whole.title == "Again"
        assert wire((await rt.list_items(whole.id)).data) == wire(items)


async def test_a_call_without_its_output_in_the_copy_is_answered(
    rt: omnigent.Runtime, rec_session: str, recorder: RecordingHarness
) -> None:
    async def body(request: TurnRequest, ctx: TurnContext) -> None:
        await ctx.call_tool("sys_os_read", {"path": "missing.txt"})

    recorder.body = body
    with trio.fail_after(20):
        await run_turn(rt, rec_session)
        items = (await rt.list_items(rec_session)).data
        call = next(i for i in items if isinstance(i, FunctionCallItem))
        fork = await rt.fork_session(rec_session, up_to_item_id=call.id)
        copied = (await rt.list_items(fork.id)).data
        assert isinstance(copied[-2], FunctionCallItem) and copied[-2].call_id == call.call_id
        answer = copied[-1]
        assert isinstance(answer, FunctionCallOutputItem) and answer.call_id == call.call_id
        assert answer.output.startswith("Error: this call had no result")
        assert rec_session in answer.output


async def test_a_message_waiting_for_a_turn_is_not_copied(rt: omnigent.Runtime) -> None:
    agent = await rt.create_agent(scripted_agent("slow", [{"say": "hm"}, {"sleep": 30}]))
    session = await rt.create_session(agent.id)
    with trio.fail_after(20):
        async with rt.subscribe(session.id) as events:
            await rt.send_message(session.id, "first")
            async for event in events:
                if event.type == "response.output_text.delta":
                    break
            assert (await rt.send_message(session.id, "second")).status == "buffered"
            fork = await rt.fork_session(session.id)
            texts = [
                item_text(i)
                for i in (await rt.list_items(fork.id)).data
                if isinstance(i, MessageItem) and i.role == "user"
            ]
            assert texts == ["first"]
            await rt.stop_session(session.id)


async def test_fork_refuses_an_item_of_another_session(
    rt: omnigent.Runtime, rec_session: str
) -> None:
    with trio.fail_after(20):
        await run_turn(rt, rec_session)
        other = await rt.fork_session(rec_session)
        foreign = (await rt.list_items(other.id)).data[0].id
        with pytest.raises(InvalidInput) as caught:
            await rt.fork_session(rec_session, up_to_item_id=foreign)
        assert caught.value.details[0].loc == "up_to_item_id"
        with pytest.raises(omnigent.SessionNotFound):
            await rt.fork_session("conv_nope")


async def test_a_change_of_fields_is_published_on_the_session(rt: omnigent.Runtime) -> None:
    agent = await rt.create_agent(scripted_agent("bot", [{"say": "hi"}]))
    session = await rt.create_session(agent.id)
    with trio.fail_after(10):
        async with rt.subscribe(session.id) as events:
            await rt.update_session(session.id, title="Named", model_override="m-1")
            event = await events.__anext__()
        assert isinstance(event, SessionInfoUpdated)
        assert (event.title, event.model_override, event.labels) == ("Named", "m-1", {})


async def test_fork_over_http_needs_read_and_answers_the_new_snapshot() -> None:
    ann, bob = {"X-Forwarded-Email": "ann@x"}, {"X-Forwarded-Email": "bob@x"}
    async with open_server(auth="header") as server:
        http = server.client
        agent = await server.runtime.create_agent(scripted_agent("bot", [{"say": "hello"}]))
        sid = (await server.runtime.create_session(agent.id, owner="ann@x")).id
        with trio.fail_after(20):
            await run_turn(server.runtime, sid)
        items = (await http.get(f"/v1/sessions/{sid}/items", headers=ann)).json()["data"]
        url = f"/v1/sessions/{sid}/fork"
        answer = await http.post(url, json={"up_to_item_id": items[0]["id"]}, headers=ann)
        assert answer.status_code == 201, answer.text
        fork = answer.json()
        assert fork["object"] == "session" and fork["id"] != sid
        copied = (await http.get(f"/v1/sessions/{fork['id']}/items", headers=ann)).json()
        assert [i["type"] for i in copied["data"]] == ["message"]
        assert (await http.post(url, json={}, headers=bob)).status_code == 404
        bad = await http.post(url, json={"up_to_item_id": 7}, headers=ann)
        assert bad.status_code == 422, bad.text
        assert bad.json()["error"]["details"][0]["loc"] == "up_to_item_id"
        assert (await http.post(url, json={"nope": 1}, headers=ann)).status_code == 422
        # Read access is enough: bob, given read, forks into a session of his own.
        await server.runtime.grant(sid, "bob@x", 1)
        mine = await http.post(url, json={}, headers=bob)
        assert mine.status_code == 201
        assert (await http.get(f"/v1/sessions/{mine.json()['id']}", headers=bob)).status_code == 200
