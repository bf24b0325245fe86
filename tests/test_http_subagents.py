"""Sub-agents over HTTP: children as ordinary sessions, live updates, stop and delete."""

from __future__ import annotations

import json
from typing import Any

import pytest
import trio

from .http_helpers import HTTPX_GENERATORS, open_server, open_stream, wait_for

pytestmark = HTTPX_GENERATORS

LONG = "word " * 100


def orchestrator(child_script: list[Any], titles: tuple[str, ...] = ("a", "b")) -> dict[str, Any]:
    """A scripted lead: it dispatches to ``w`` once per title, then thanks for results."""
    dispatch = [
        {"call": "sys_session_send", "args": {"agent": "w", "title": t, "args": f"do {t}"}}
        for t in titles
    ]
    return {
        "name": "lead",
        "executor": {
            "type": "omnigent",
            "config": {"harness": "scripted", "turns": [dispatch, [{"say": "got it"}]]},
        },
        "sub_agents": [
            {"name": "w", "executor": {"config": {"harness": "scripted", "script": child_script}}}
        ],
        "tools": {"agents": ["w"]},
    }


async def test_children_are_sessions_with_live_summaries_over_http() -> None:
    with trio.fail_after(20):
        async with open_server() as server:
            parent = await server.session(orchestrator([{"say": LONG}]))
            async with open_stream(server.client, "GET", f"/v1/sessions/{parent}/stream") as sse:
                await server.message(parent, "go")
                frames = await sse.read_until(
                    lambda f: (
                        f.event == "session.child_session.updated"
                        and f.data["child"]["current_task_status"] == "completed"
                        and f.data["child"]["session_name"] == "b"
                    ),
                )
            updates = [
                f.data["child"] for f in frames if f.event == "session.child_session.updated"
            ]
            assert {u["current_task_status"] for u in updates} >= {"in_progress", "completed"}
            assert {(u["agent"], u["tool"]) for u in updates} == {("w", "w")}
            rows = (await server.client.get(f"/v1/sessions/{parent}/child_sessions")).json()["data"]
            assert sorted(r["session_name"] for r in rows) == ["a", "b"]
            row = rows[0]
            assert row["title"] == f"w:{row['session_name']}" and row["tool"] == "w"
            assert row["current_task_status"] == "completed" and row["status"] == "idle"
            assert len(row["preview"]) == 200 and row["preview"].endswith("…")
            child = (await server.client.get(f"/v1/sessions/{row['id']}")).json()
            assert child["parent_session_id"] == parent and child["agent_name"] == "w"
            items = (await server.client.get(f"/v1/sessions/{row['id']}/items")).json()["data"]
            assert [i["role"] for i in items] == ["user", "assistant"]
            listed = await server.client.get(f"/v1/sessions?parent_session_id={parent}")
            assert {s["id"] for s in listed.json()["data"]} == {r["id"] for r in rows}

            async def woken() -> bool:
                got = (await server.client.get(f"/v1/sessions/{parent}/items")).json()["data"]
                # Both results, in one wake-up notice or two (as they happen to arrive).
                return sum(str(i).count("[System: sub-agent task") for i in got) == 2

            with trio.fail_after(10):
                while not await woken():
                    await trio.sleep(0.02)


@pytest.mark.parametrize("how", ["stop_session", "delete"])
async def test_stopping_or_deleting_a_parent_over_http_cancels_its_children(how: str) -> None:
    with trio.fail_after(20):
        async with open_server() as server:
            parent = await server.session(orchestrator([{"sleep": 60}]))
            await server.message(parent, "go")

            async def running_children() -> list[dict[str, Any]]:
                answer = await server.client.get(f"/v1/sessions/{parent}/child_sessions")
                return [r for r in answer.json()["data"] if r["status"] == "running"]

            with trio.fail_after(10):
                while len(await running_children()) < 2:
                    await trio.sleep(0.02)
            kids = [r["id"] for r in await running_children()]
            if how == "stop_session":
                answer = await server.client.post(
                    f"/v1/sessions/{parent}/events", json={"type": "stop_session", "data": {}}
                )
                assert answer.status_code == 202, answer.text
                rows = (await server.client.get(f"/v1/sessions/{parent}/child_sessions")).json()
                assert {r["current_task_status"] for r in rows["data"]} == {"cancelled"}
                assert {r["status"] for r in rows["data"]} == {"cancelled"}
            else:
                answer = await server.client.delete(f"/v1/sessions/{parent}")
                assert answer.status_code == 200, answer.text
                for kid in kids:
                    gone = await server.client.get(f"/v1/sessions/{kid}")
                    assert gone.status_code == 404
            await wait_for(lambda: server.runtime.statistics()["tasks"] == 0, timeout=10)
            assert server.runtime.statistics()["sub_agent_work"] == 0


async def test_a_refused_dispatch_is_visible_in_the_parents_items() -> None:
    spec = orchestrator([{"say": "x"}])
    spec["executor"]["config"]["turns"] = [
        [{"call": "sys_session_send", "args": {"agent": "ghost", "title": "t", "args": "x"}}]
    ]
    with trio.fail_after(20):
        async with open_server() as server:
            parent = await server.session(spec)
            async with open_stream(server.client, "GET", f"/v1/sessions/{parent}/stream") as sse:
                await server.message(parent, "go")
                await sse.read_until(
                    lambda f: f.event == "session.status" and f.data["status"] == "idle"
                )
            items = (await server.client.get(f"/v1/sessions/{parent}/items")).json()["data"]
            outputs = [i["output"] for i in items if i["type"] == "function_call_output"]
            assert [json.loads(o) for o in outputs] == [
                {"error": "sub-agent 'ghost' not found in agent spec (you may dispatch to: w)"}
            ]
            children = (await server.client.get(f"/v1/sessions/{parent}/child_sessions")).json()
            assert children["data"] == []
