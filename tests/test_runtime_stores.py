"""The runtime on both stores: the same turns, streams and recovery on SQLite and PostgreSQL.

Every test runs twice through ``db_url`` (a SQLite file, then a fresh PostgreSQL
database), so what a user sees does not depend on the store: a turn and its replay
after a restart, a buffered message and the continuation turn that answers it, an
interrupt and a stop, an approval, a delete, and recovery of a turn a dead process
left running.
"""

from __future__ import annotations

import json
from typing import Any

import trio

import omnigent
from omnigent.model import (
    ElicitationRequest,
    OutputTextDelta,
    ResponseCompleted,
    SessionStatusChanged,
)
from omnigent.stores import StoredEvent, open_store
from omnigent.testing import collect_turn, run_turn, scripted_agent

from .conftest import statuses, types

SLOW = [{"say": "started"}, {"sleep": 30}]


def turns(*scripts: list[dict[str, Any]]) -> dict[str, Any]:
    spec = scripted_agent("multi")
    spec["executor"]["config"]["turns"] = list(scripts)
    return spec


async def first(events: Any, kind: type, **fields: Any) -> Any:
    async for event in events:
        if isinstance(event, kind) and all(getattr(event, k) == v for k, v in fields.items()):
            return event
    raise AssertionError(f"no {kind.__name__}")


async def test_a_turn_and_its_replay_after_a_restart(db_url: str) -> None:
    with trio.fail_after(30):
        async with omnigent.open_runtime(db_url) as rt:
            agent = await rt.create_agent(scripted_agent(script=[{"say": "hello there"}]))
            session = (await rt.create_session(agent.id, title="t")).id
            live = await run_turn(rt, session)
        assert statuses(live) == ["running", "idle"]
        async with omnigent.open_runtime(db_url) as rt:
            async with rt.subscribe(session, after=0) as events:
                replay = [await events.__anext__() for _ in live]
            snapshot = await rt.get_session(session)
            page = await rt.list_sessions()
        assert [e.to_dict() for e in replay] == [e.to_dict() for e in live]
        assert snapshot.status == "idle" and snapshot.last_event_id == live[-1].event_id
        assert not snapshot.busy and [s.id for s in page.data] == [session]


async def test_a_buffered_message_is_answered_by_the_continuation(db_url: str) -> None:
    with trio.fail_after(30):
        async with omnigent.open_runtime(db_url) as rt:
            agent = await rt.create_agent(turns([{"say": "one"}, {"sleep": 0.3}], [{"say": "two"}]))
            session = (await rt.create_session(agent.id)).id
            async with rt.subscribe(session) as events:
                assert (await rt.send_message(session, "first")).status == "accepted"
                await first(events, OutputTextDelta)
            async with rt.open_turn_stream(session, "second") as (accepted, stream):
                assert accepted.status == "buffered"
                seen = [event async for event in stream]
            assert isinstance(seen[-1], ResponseCompleted)
            assert "two" in "".join(e.delta for e in seen if isinstance(e, OutputTextDelta))


async def test_interrupt_and_stop(db_url: str) -> None:
    with trio.fail_after(30):
        async with omnigent.open_runtime(db_url) as rt:
            agent = await rt.create_agent(scripted_agent(script=SLOW))
            session = (await rt.create_session(agent.id)).id
            async with rt.subscribe(session) as events:
                await rt.send_message(session, "go")
                await first(events, OutputTextDelta)
                assert await rt.interrupt(session)
                await first(events, SessionStatusChanged, status="cancelled")
                await rt.send_message(session, "again")
                await first(events, OutputTextDelta)
                await rt.stop_session(session)
                await first(events, SessionStatusChanged, status="cancelled")
            assert not await rt.interrupt(session)


async def test_an_approval(db_url: str) -> None:
    calls: list[dict[str, Any]] = []

    def record(**kwargs: Any) -> str:
        calls.append(kwargs)
        return "ok"

    spec = scripted_agent(script=[{"call": "record", "args": {"x": 1}}])
    spec["policies"] = [{"name": "ask", "type": "ask_tools", "tools": ["record"]}]
    with trio.fail_after(30):
        async with omnigent.open_runtime(db_url) as rt:
            rt.register_tool(record)
            session = (await rt.create_session((await rt.create_agent(spec)).id)).id
            async with rt.subscribe(session) as events:
                await rt.send_message(session, "go")
                request = await first(events, ElicitationRequest)
                pending = (await rt.get_session(session)).pending_elicitations
                assert [p.elicitation_id for p in pending] == [request.elicitation_id]
                assert await rt.resolve_elicitation(session, request.elicitation_id, "accept")
                turn = await collect_turn(events)
    assert statuses(turn)[-1] == "idle" and calls == [{"x": 1}]


async def test_a_delete_takes_the_session_and_ends_its_streams(db_url: str) -> None:
    with trio.fail_after(30):
        async with omnigent.open_runtime(db_url) as rt:
            agent = await rt.create_agent(scripted_agent(script=SLOW))
            parent = (await rt.create_session(agent.id)).id
            child = (await rt.create_session(agent.id, parent_session_id=parent)).id
            async with rt.subscribe(child) as events:
                await rt.send_message(child, "go")
                await first(events, OutputTextDelta)
                await rt.delete_session(parent)
                async for _ in events:
                    pass
            page = await rt.list_sessions()
    assert page.data == ()


async def test_a_turn_a_dead_process_left_running_ends_failed(db_url: str) -> None:
    with trio.fail_after(30):
        async with omnigent.open_runtime(db_url) as rt:
            agent = await rt.create_agent(scripted_agent(script=[{"say": "hi"}]))
            session = (await rt.create_session(agent.id)).id
        # What a process killed mid-turn leaves: a running status, and nobody's work.
        async with open_store(db_url) as store:
            status = {"type": "session.status", "status": "running", "event_id": 1}
            row = StoredEvent(session, 1, "session.status", json.dumps(status), "running")
            await store.append_events([row])
        async with omnigent.open_runtime(db_url) as rt:
            async with rt.subscribe(session, after=0) as events:
                seen = [await events.__anext__() for _ in range(2)]
            assert types(seen) == ["session.status", "session.status"]
            ended = seen[-1]
            assert isinstance(ended, SessionStatusChanged) and ended.status == "failed"
            assert ended.error is not None and ended.error.code == "runtime_restarted"
            after = await run_turn(rt, session)  # the next message runs normally
            assert statuses(after) == ["running", "idle"]
