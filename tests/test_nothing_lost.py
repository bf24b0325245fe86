"""Nothing lost: bad events, records-only runtimes, held approvals, and three races.

Each test is a regression test for a defect of issue 8; it fails on the code before
the fix.
"""

from __future__ import annotations

import datetime
import logging
import sqlite3
from pathlib import Path
from typing import Any

import pytest
import trio

import omnigent
from omnigent.core import elicitation_params
from omnigent.errors import InvalidInput, SessionNotFound, StoreBusy
from omnigent.harnesses.base import TurnContext, TurnRequest
from omnigent.model import (
    Event,
    ResourceCreated,
    SessionStatusChanged,
)
from omnigent.stores import StoredEvent
from omnigent.testing import RecordingHarness, collect_turn, probe, run_turn, scripted_agent

from .conftest import statuses, wait_quiet
from .http_helpers import HTTPX_GENERATORS, open_server


def long_say(n: int, name: str) -> dict[str, Any]:
    return scripted_agent(name, script=[{"say": " ".join(f"w{i}" for i in range(n))}])


async def stored_log(rt: omnigent.Runtime, session_id: str) -> list[dict[str, Any]]:
    async with rt.subscribe(session_id, after=0) as events:
        last = await rt.last_event_id(session_id)
        seen: list[dict[str, Any]] = []
        if last == 0:
            return seen
        async for event in events:
            seen.append(event.to_dict())
            if event.event_id == last:
                return seen
    raise AssertionError("the log ended early")


def assert_gap_free(log: list[dict[str, Any]]) -> None:
    assert [e["event_id"] for e in log] == list(range(1, len(log) + 1))


async def watch_turn(rt: omnigent.Runtime, session_id: str, into: list[Event]) -> None:
    async with rt.subscribe(session_id, after=0) as events:
        into.extend(await collect_turn(events))


async def test_one_sessions_bad_event_leaves_every_other_log_complete(tmp_path: Path) -> None:
    """Regression: an unencodable payload made the writer drop a whole batch — up to
    1,024 events of *other* sessions, after their ids and live fan-out were taken."""

    async def bad(request: TurnRequest, ctx: TurnContext) -> None:
        async with ctx.open_message() as message:
            await message.write("before")
        await ctx.emit(ResourceCreated(resource={"when": datetime.datetime.now()}))

    async with omnigent.open_runtime(db=f"sqlite:///{tmp_path / 'a.db'}") as rt:
        rt.register_harness("bad", RecordingHarness(bad).factory)
        bad_session = (
            await rt.create_session((await rt.create_agent(scripted_agent("b", harness="bad"))).id)
        ).id
        good = [
            (await rt.create_session((await rt.create_agent(long_say(3000, f"g{i}"))).id)).id
            for i in range(3)
        ]
        live: dict[str, list[Event]] = {sid: [] for sid in [bad_session, *good]}
        with trio.fail_after(20):
            async with trio.open_nursery() as nursery:
                for sid, seen in live.items():
                    nursery.start_soon(watch_turn, rt, sid, seen)
                await trio.testing.wait_all_tasks_blocked()
                for sid in live:
                    await rt.send_message(sid, "go")
        # The bad event was refused to its publisher: its turn failed, saying why.
        bad_turn = live[bad_session]
        assert statuses(bad_turn) == ["running", "failed"]
        failure = bad_turn[-1]
        assert isinstance(failure, SessionStatusChanged) and failure.error is not None
        assert "cannot be stored" in failure.error.message
        for sid in [bad_session, *good]:
            stored = await stored_log(rt, sid)
            assert_gap_free(stored)
            assert [e.to_dict() for e in live[sid]] == stored
        for sid in good:
            assert statuses(live[sid]) == ["running", "idle"]


async def test_a_row_the_store_refuses_costs_only_that_row(
    rt: omnigent.Runtime, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Regression: a batch the store would not take was dropped whole."""
    monkeypatch.setattr("omnigent.core.bus._persist._RETRY_DELAYS", (0.0,))
    victim = (
        await rt.create_session(
            (await rt.create_agent(scripted_agent("v", script=[{"say": "x"}]))).id
        )
    ).id
    other = (await rt.create_session((await rt.create_agent(long_say(500, "o"))).id)).id
    original = probe(rt).store.append_events

    async def picky(events: list[StoredEvent], **options: Any) -> None:
        if any(e.session_id == victim and e.type == "response.created" for e in events):
            raise sqlite3.IntegrityError("this row cannot be stored")
        await original(events, **options)

    monkeypatch.setattr(probe(rt).store, "append_events", picky)
    seen: dict[str, list[Event]] = {victim: [], other: []}
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            for sid, into in seen.items():
                nursery.start_soon(watch_turn, rt, sid, into)
            await trio.testing.wait_all_tasks_blocked()
            await rt.send_message(other, "go")
            await rt.send_message(victim, "go")
    other_log = await stored_log(rt, other)
    assert_gap_free(other_log)
    assert [e.to_dict() for e in seen[other]] == other_log
    victim_types = [e["type"] for e in await stored_log(rt, victim)]
    assert "response.created" not in victim_types
    assert victim_types[0] == "session.status" and victim_types[-1] == "session.status"
    assert f"(response.created) of session {victim}" in caplog.text


async def test_resolving_with_content_that_is_not_json_is_refused(
    rt: omnigent.Runtime, rec_session: str
) -> None:
    """Regression: the answer was accepted, and its event later broke the writer."""
    params = elicitation_params("ok?", "mcp_elicitation")
    eid = await rt.hold_elicitation(rec_session, params)
    with pytest.raises(InvalidInput) as caught:
        await rt.resolve_elicitation(rec_session, eid, "accept", {"when": datetime.datetime.now()})
    assert caught.value.details[0].loc == "content"
    assert (await rt.get_elicitation(rec_session, eid)).status == "pending"
    assert await rt.resolve_elicitation(rec_session, eid, "accept", {"when": "today"})


async def test_a_tool_publishing_a_bad_payload_gets_an_error_string(
    rt: omnigent.Runtime, rec_session: str, recorder: RecordingHarness
) -> None:
    outputs: list[str] = []

    async def ask_badly() -> str:
        params = elicitation_params("when?", "tool_call", tool_input={"at": datetime.date.today()})
        await rt.elicit(rec_session, params)
        return "asked"

    rt.register_tool(ask_badly)

    async def body(request: TurnRequest, ctx: TurnContext) -> None:
        outputs.append(await ctx.call_tool("ask_badly", {}))

    recorder.body = body
    events = await run_turn(rt, rec_session)
    assert statuses(events) == ["running", "idle"]
    assert outputs[0].startswith("Error: ask_badly failed:")
    assert "cannot be stored" in outputs[0]
    assert_gap_free(await stored_log(rt, rec_session))


async def test_a_records_only_bus_refuses_to_publish(tmp_path: Path) -> None:
    """Regression: a records-only runtime published events into the owner's logs,
    colliding with its event ids (the owner's batch then dropped)."""
    db = f"sqlite:///{tmp_path / 'shared.db'}"
    async with omnigent.open_runtime(db=db) as owner:
        agent = await owner.create_agent(scripted_agent(script=[{"say": "x"}]))
        session = (await owner.create_session(agent.id)).id
        async with omnigent.open_runtime(db=db, exclusive=False) as reader:
            with pytest.raises(StoreBusy):
                await probe(reader).bus.publish(session, SessionStatusChanged(status="idle"))
            with pytest.raises(StoreBusy):
                await probe(reader).bus.publish_now(session, SessionStatusChanged(status="idle"))
            with pytest.raises(StoreBusy):
                await probe(reader).elicitations.ask(session, elicitation_params("x", "tool_call"))
        assert statuses(await run_turn(owner, session)) == ["running", "idle"]
        assert_gap_free(await stored_log(owner, session))


# -- held approvals ----------------------------------------------------------------------


async def _parked(rt: omnigent.Runtime, session_id: str) -> str:
    """Wait until an elicitation is pending on ``session_id``; returns its id."""
    with trio.fail_after(5):
        while not (pending := (await rt.get_session(session_id)).pending_elicitations):
            await trio.sleep(0.005)
    return pending[0].elicitation_id


async def test_stop_withdraws_hooks_held_on_the_session_and_its_children(
    rt: omnigent.Runtime,
) -> None:
    """Regression: a hook request parked on a session outlived stop_session."""
    agent = await rt.create_agent(scripted_agent(script=[{"say": "x"}]))
    parent = (await rt.create_session(agent.id)).id
    child = (await rt.create_session(agent.id, parent_session_id=parent)).id
    answers: dict[str, Any] = {}

    async def hook(session_id: str) -> None:
        answers[session_id] = await rt.elicit(session_id, elicitation_params("rm?", "tool_call"))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(hook, parent)
        nursery.start_soon(hook, child)
        await _parked(rt, parent)
        child_eid = await _parked(rt, child)
        start = trio.current_time()
        await rt.stop_session(parent)
    assert trio.current_time() - start < 1.0
    assert answers[parent].action == answers[child].action == "cancel"
    assert (await rt.get_session(parent)).pending_elicitations == ()
    row = await probe(rt).store.get_elicitation(child_eid)
    assert row is not None and row["status"] == "expired"


async def test_delete_withdraws_held_approvals_and_nothing_publishes_into_the_session(
    tmp_path: Path,
) -> None:
    """Regression: a held waiter wrote ``response.elicitation_resolved`` into a deleted
    session's log after the delete."""
    async with omnigent.open_runtime(db=f"sqlite:///{tmp_path / 'd.db'}") as rt:
        agent = await rt.create_agent(scripted_agent(script=[{"say": "x"}]))
        parent = (await rt.create_session(agent.id)).id
        child = (await rt.create_session(agent.id, parent_session_id=parent)).id
        answers: list[Any] = []

        async def hook() -> None:
            answers.append(await rt.elicit(child, elicitation_params("rm?", "tool_call")))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(hook)
            await _parked(rt, child)
            held = await rt.hold_elicitation(parent, elicitation_params("q", "mcp_elicitation"))
            await rt.delete_session(parent)
        assert [a.action for a in answers] == ["cancel"]
        for sid in (parent, child):
            with pytest.raises(SessionNotFound):
                await probe(rt).bus.publish(sid, SessionStatusChanged(status="idle"))
            assert await probe(rt).store.read_events(sid, 0) == []
        assert await probe(rt).store.get_elicitation(held) is None
        await probe(rt).bus.flush()
    raw = sqlite3.connect(tmp_path / "d.db")
    assert raw.execute("SELECT COUNT(*) FROM events").fetchone()[0] == 0
    raw.close()


async def test_a_policy_ask_held_outside_a_turn_is_denied_by_a_stop(
    rt: omnigent.Runtime,
) -> None:
    spec = scripted_agent(script=[{"say": "x"}])
    spec["policies"] = [{"name": "ask", "type": "ask_tools", "tools": ["sys_os_shell"]}]
    session = (await rt.create_session((await rt.create_agent(spec)).id)).id
    verdicts: list[Any] = []

    async def evaluate() -> None:
        event = {"type": "PHASE_TOOL_CALL", "data": {"tool_name": "sys_os_shell", "tool_input": {}}}
        verdicts.append(await rt.evaluate_policy(session, event))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(evaluate)
        await _parked(rt, session)
        await rt.stop_session(session)
    assert [v.action for v in verdicts] == ["DENY"]


# -- races -------------------------------------------------------------------------------


async def test_a_child_created_while_its_parent_is_deleted_is_refused(
    rt: omnigent.Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Regression: a child stored while its parent's delete finished was left orphaned."""
    agent = await rt.create_agent(scripted_agent(script=[{"say": "x"}]))
    parent = (await rt.create_session(agent.id)).id
    original = probe(rt).store.insert_session

    async def insert_then_delete_parent(row: Any, items: Any = ()) -> None:
        await original(row, items)
        # The parent's whole delete runs between the child's insert and its check.
        monkeypatch.setattr(probe(rt).store, "insert_session", original)
        await rt.delete_session(parent)

    monkeypatch.setattr(probe(rt).store, "insert_session", insert_then_delete_parent)
    with pytest.raises(SessionNotFound):
        await rt.create_session(agent.id, parent_session_id=parent)
    assert (await rt.list_sessions()).data == ()


async def test_the_store_refuses_a_child_of_a_missing_parent(rt: omnigent.Runtime) -> None:
    agent = await rt.create_agent(scripted_agent(script=[{"say": "x"}]))
    parent = (await rt.create_session(agent.id)).id
    original = probe(rt).store.insert_session

    async def delete_parent_first(row: Any, items: Any = ()) -> None:
        await probe(rt).store.delete_sessions([parent])
        await original(row, items)

    probe(rt).store.insert_session = delete_parent_first  # type: ignore[method-assign]
    with pytest.raises(SessionNotFound):
        await rt.create_session(agent.id, parent_session_id=parent)
    probe(rt).store.insert_session = original  # type: ignore[method-assign]
    assert (await rt.list_sessions()).data == ()


async def test_the_stores_delete_takes_a_child_created_on_the_way(rt: omnigent.Runtime) -> None:
    agent = await rt.create_agent(scripted_agent(script=[{"say": "x"}]))
    parent = (await rt.create_session(agent.id)).id
    doomed = [parent, *await probe(rt).store.descendant_ids(parent)]  # listed: no child yet
    child = (await rt.create_session(agent.id, parent_session_id=parent)).id
    await probe(rt).store.delete_sessions(doomed)
    assert await probe(rt).store.get_session(child) is None


async def test_a_message_refused_as_the_runtime_closes_is_not_stored(
    rt: omnigent.Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Regression: the message was stored, then refused with RuntimeClosed."""
    agent = await rt.create_agent(scripted_agent(script=[{"say": "x"}]))
    session = (await rt.create_session(agent.id)).id
    original = probe(rt).store.put_items

    async def close_meanwhile(session_id: str, items: Any, **options: Any) -> None:
        await original(session_id, items, **options)
        probe(rt).set_closing(True)  # shutdown began while the message was being written

    monkeypatch.setattr(probe(rt).store, "put_items", close_meanwhile)
    with pytest.raises(omnigent.RuntimeClosed):
        await rt.send_message(session, "late")
    probe(rt).set_closing(False)
    assert (await rt.list_items(session)).data == ()


async def test_a_cancel_right_after_the_pending_row_is_written_leaves_none(
    rt: omnigent.Runtime, rec_session: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Regression: the row was written before the waiter existed: a cancel in between
    left it pending for ever."""
    original = probe(rt).store.insert_elicitation
    inserted: list[str] = []
    scope = trio.CancelScope()

    async def insert_then_cancel(elicitation_id: str, *args: Any) -> None:
        # What a thread call cancelled while it runs does: the row is written, and
        # the caller sees Cancelled as the call returns.
        await original(elicitation_id, *args)
        inserted.append(elicitation_id)
        scope.cancel()
        await trio.lowlevel.checkpoint()

    monkeypatch.setattr(probe(rt).store, "insert_elicitation", insert_then_cancel)
    with scope:
        await rt.elicit(rec_session, elicitation_params("x", "tool_call"))
    row = await probe(rt).store.get_elicitation(inserted[0])
    assert row is not None and row["status"] == "expired"
    assert rt.statistics()["elicitations"] == 0


async def test_the_writer_logs_each_refused_row_with_its_session(
    rt: omnigent.Runtime, rec_session: str, monkeypatch: pytest.MonkeyPatch, caplog: Any
) -> None:
    caplog.set_level(logging.ERROR)
    monkeypatch.setattr("omnigent.core.bus._persist._RETRY_DELAYS", ())

    async def refuse(events: list[StoredEvent], **options: Any) -> None:
        raise sqlite3.OperationalError("no")

    monkeypatch.setattr(probe(rt).store, "append_events", refuse)
    await probe(rt).bus.publish(rec_session, SessionStatusChanged(status="idle"))
    await probe(rt).bus.flush()
    assert f"dropping event 1 (session.status) of session {rec_session}" in caplog.text
    assert "OperationalError: no" in caplog.text
    await wait_quiet(rt)


@pytest.mark.parametrize("how", ["stop", "delete"])
@HTTPX_GENERATORS[0]
@HTTPX_GENERATORS[1]
async def test_a_hook_request_answers_deny_when_its_session_is_stopped(how: str) -> None:
    """Regression: ``hooks/permission-request`` kept waiting after a stop or DELETE."""
    body = {
        "session_id": "claude-1",
        "hook_event_name": "PermissionRequest",
        "tool_name": "Bash",
        "tool_input": {"command": "rm -rf /"},
    }
    with trio.fail_after(10):
        async with open_server() as server:
            sid = await server.session()
            answers: list[Any] = []

            async def hook() -> None:
                url = f"/v1/sessions/{sid}/hooks/permission-request"
                answers.append(await server.client.post(url, json=body))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(hook)
                await _parked(server.runtime, sid)
                start = trio.current_time()
                if how == "stop":
                    event = {"type": "stop_session", "data": {}}
                    answer = await server.client.post(f"/v1/sessions/{sid}/events", json=event)
                else:
                    answer = await server.client.delete(f"/v1/sessions/{sid}")
                assert answer.status_code in (200, 202), answer.text
            assert trio.current_time() - start < 1.0
            decision = answers[0].json()["hookSpecificOutput"]["decision"]
            assert decision["behavior"] == "deny"
