"""The Store protocol, method by method, on both stores: SQLite and PostgreSQL.

Every test runs twice through the ``store`` fixture — on a real SQLite file and on a
fresh database of the suite's private PostgreSQL cluster — and checks the semantics
the core relies on (``omnigent/stores/_protocol.py``), so the two stay the same.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
import trio

from omnigent.errors import Forbidden
from omnigent.stores import (
    FileRow,
    ProcessGroupRow,
    RunningTask,
    SessionRow,
    Store,
    StoredEvent,
    WorkRow,
    open_store,
)


@pytest.fixture
async def store(db_url: str) -> AsyncIterator[Store]:
    with trio.fail_after(30):
        async with open_store(db_url) as opened:
            yield opened


def session_row(session_id: str, **fields: Any) -> SessionRow:
    values: dict[str, Any] = {
        "id": session_id,
        "agent_id": "agent_x",
        "agent_version": 1,
        "owner": "alice",
        "title": None,
        "parent_session_id": None,
        "root_session_id": session_id,
        "harness_override": None,
        "model_override": None,
        "labels": {},
        "status": "idle",
        "last_event_id": 0,
        "turn_count": 0,
        "created_at": 1.0,
        "cwd": None,
        "updated_at": 1.0,
    }
    values.update(fields)
    return SessionRow(**values)


def message(item_id: str, text: str = "hi") -> dict[str, Any]:
    return {
        "type": "message",
        "id": item_id,
        "role": "user",
        "content": [{"type": "input_text", "text": text}],
    }


def event(session_id: str, event_id: int, type: str = "x", **data: Any) -> StoredEvent:
    """A stored event as the bus hands it over: encoded, with its status and time."""
    wire = {"type": type, "event_id": event_id, "session_id": session_id, **data}
    status = data.get("status") if type == "session.status" else None
    return StoredEvent(
        session_id, event_id, type, json.dumps(wire), status, float(data.get("created_at", 0.0))
    )


async def tree(store: Store) -> None:
    """root ← child ← grandchild, and a second root."""
    await store.insert_session(session_row("root"))
    await store.insert_session(
        session_row("child", parent_session_id="root", root_session_id="root")
    )
    await store.insert_session(
        session_row("grand", parent_session_id="child", root_session_id="root")
    )
    await store.insert_session(session_row("other", owner="bob"))


# -- agents ------------------------------------------------------------------------------


async def test_agent_versions(store: Store) -> None:
    first = await store.put_agent_version("coder", {"name": "coder", "v": 1}, "alice")
    assert (first.name, first.owner, first.version) == ("coder", "alice", 1)
    same = await store.put_agent_version("coder", {"v": 1, "name": "coder"}, "alice")
    assert (same.id, same.version) == (first.id, 1)  # unchanged spec: no new version
    with pytest.raises(Forbidden):  # the name is alice's
        await store.put_agent_version("coder", {"name": "coder", "v": 2}, "bob")
    second = await store.put_agent_version("coder", {"name": "coder", "v": 2}, "alice")
    assert (second.id, second.version, second.owner) == (first.id, 2, "alice")
    latest = await store.get_agent(first.id)
    assert latest is not None and latest.spec == {"name": "coder", "v": 2}
    old = await store.get_agent(first.id, 1)
    assert old is not None and old.spec == {"name": "coder", "v": 1} and old.version == 1
    by_name = await store.get_agent_by_name("coder")
    assert by_name is not None and by_name.version == 2
    assert await store.get_agent("agent_missing") is None
    assert await store.get_agent(first.id, 9) is None
    assert await store.get_agent_by_name("nobody") is None


async def test_list_agents_oldest_first_at_latest_version(store: Store) -> None:
    a = await store.put_agent_version("a", {"n": 1}, "u")
    b = await store.put_agent_version("b", {"n": 1}, "u")
    await store.put_agent_version("a", {"n": 2}, "u")
    listed = await store.list_agents()
    assert [(r.id, r.version) for r in listed] == [(a.id, 2), (b.id, 1)]


# -- sessions ----------------------------------------------------------------------------


async def test_insert_and_get_session(store: Store) -> None:
    row = session_row("s1", title="T", labels={"k": "v"}, harness_override="loop")
    await store.insert_session(row, [message("item_1"), message("item_2")])
    assert await store.get_session("s1") == row
    assert await store.get_session("missing") is None
    items = await store.list_items("s1")
    assert [i["id"] for i in items.rows] == ["item_1", "item_2"]


async def test_a_session_and_its_agents_latest_version_in_one_read(store: Store) -> None:
    agent = await store.put_agent_version("coder", {"name": "coder", "v": 1}, "alice")
    await store.put_agent_version("coder", {"name": "coder", "v": 2}, "alice")
    row = session_row("s1", agent_id=agent.id, title="T")
    await store.insert_session(row)
    assert await store.get_session_and_agent_version("s1") == (row, 2)
    await store.insert_session(session_row("s2"))  # its agent is not stored
    assert await store.get_session_and_agent_version("s2") == (session_row("s2"), None)
    assert await store.get_session_and_agent_version("missing") is None


async def test_list_sessions_newest_first_with_cursor(store: Store) -> None:
    for n in range(5):
        await store.insert_session(session_row(f"s{n}", agent_id="a" if n % 2 else "b"))
    page = await store.list_sessions(limit=2)
    assert [r.id for r in page.rows] == ["s4", "s3"] and page.has_more
    page = await store.list_sessions(limit=2, after="s3")
    assert [r.id for r in page.rows] == ["s2", "s1"] and page.has_more
    page = await store.list_sessions(limit=2, after="s1")
    assert [r.id for r in page.rows] == ["s0"] and not page.has_more
    page = await store.list_sessions(agent_id="a")
    assert [r.id for r in page.rows] == ["s3", "s1"]
    with pytest.raises(LookupError):
        await store.list_sessions(after="nope")


async def test_list_sessions_by_parent_and_viewer(store: Store) -> None:
    await tree(store)
    children = await store.list_sessions(parent_session_id="root")
    assert [r.id for r in children.rows] == ["child"]
    seen = await store.list_sessions(viewer="alice")
    assert {r.id for r in seen.rows} == {"root", "child", "grand"}
    assert [r.id for r in (await store.list_sessions(viewer="carol")).rows] == []
    await store.put_grant("other", "carol", 1)
    assert [r.id for r in (await store.list_sessions(viewer="carol")).rows] == ["other"]
    await store.put_grant("root", "__public__", 1)  # public through the root
    seen = await store.list_sessions(viewer="dave")
    assert {r.id for r in seen.rows} == {"root", "child", "grand"}


async def test_list_sessions_by_working_directory(store: Store) -> None:
    await store.insert_session(session_row("a", cwd="/work/a"))
    await store.insert_session(session_row("b", cwd="/work/b"))
    await store.insert_session(session_row("c"))
    assert [r.id for r in (await store.list_sessions(cwd="/work/a")).rows] == ["a"]
    row = await store.get_session("b")
    assert row is not None and row.cwd == "/work/b"


async def test_grants_on_any_ancestor_reach_the_subtree(store: Store) -> None:
    await tree(store)
    await store.put_grant("child", "carol", 1)
    seen = await store.list_sessions(viewer="carol")
    assert {r.id for r in seen.rows} == {"child", "grand"}
    with pytest.raises(LookupError):
        await store.list_sessions(viewer="carol", after="root")  # not carol's to see


async def test_update_session_and_begin_turn(store: Store) -> None:
    await store.insert_session(session_row("s1"))
    await store.update_session("s1", title="new", labels={"a": "b"}, model_override="m")
    row = await store.get_session("s1")
    assert row is not None
    assert (row.title, row.labels, row.model_override) == ("new", {"a": "b"}, "m")
    await store.update_session("s1", title=None)
    row = await store.get_session("s1")
    assert row is not None and row.title is None
    assert [await _turn_number(store, "s1") for _ in range(3)] == [0, 1, 2]
    row = await store.get_session("s1")
    assert row is not None and row.turn_count == 3


async def test_sessions_with_status(store: Store) -> None:
    await store.insert_session(session_row("a"))
    await store.insert_session(session_row("b"))
    await store.append_events([event("a", 1, "session.status", status="running")])
    assert await store.sessions_with_status(["running", "waiting"]) == ["a"]
    assert sorted(await store.sessions_with_status(["idle", "running"])) == ["a", "b"]


async def test_ancestors_and_descendants(store: Store) -> None:
    await tree(store)
    assert await store.ancestor_ids("grand") == ["child", "root"]
    assert await store.ancestor_ids("root") == []
    assert await store.descendant_ids("root") == ["child", "grand"]
    assert await store.descendant_ids("grand") == []


async def test_delete_sessions_takes_everything_they_hold(store: Store) -> None:
    await tree(store)
    for sid in ("child", "other"):
        await store.put_items(sid, [message(f"item_{sid}")])
        await store.append_events([event(sid, 1)])
        await store.add_inbox_item(sid, f"inbox_{sid}", "{}")
        await store.insert_elicitation(f"elicit_{sid}", sid, "{}")
        await store.put_grant(sid, "carol", 2)
    await store.delete_sessions(["child"])
    assert await store.get_session("child") is None
    assert (await store.list_items("child")).rows == []
    assert await store.read_events("child", 0) == []
    assert await store.inbox_count("child") == 0
    assert await store.get_elicitation("elicit_child") is None
    assert await store.grants_for({"child"}, None) == []
    # Another session keeps all of its own.
    assert len((await store.list_items("other")).rows) == 1
    assert len(await store.read_events("other", 0)) == 1
    assert await store.inbox_count("other") == 1
    assert await store.get_elicitation("elicit_other") is not None
    assert await store.grants_for({"other"}, None) == [("carol", 2)]


# -- grants ------------------------------------------------------------------------------


async def test_grants(store: Store) -> None:
    await tree(store)
    await store.put_grant("root", "carol", 1)
    await store.put_grant("root", "carol", 2)  # replaces
    await store.put_grant("child", "dave", 1)
    assert await store.grants_for({"root", "child"}, None) == [("carol", 2), ("dave", 1)]
    assert await store.grants_for({"root", "child"}, {"dave", "erin"}) == [("dave", 1)]
    assert await store.delete_grant("root", "carol") is True
    assert await store.delete_grant("root", "carol") is False
    assert await store.grants_for({"root"}, None) == []


# -- items -------------------------------------------------------------------------------


async def test_items_upsert_in_place(store: Store) -> None:
    await store.insert_session(session_row("s1"))
    await store.put_items("s1", [message("item_a"), message("item_b")])
    await store.put_items("s1", [message("item_a", "edited"), message("item_c")])
    rows = (await store.list_items("s1")).rows
    assert [i["id"] for i in rows] == ["item_a", "item_b", "item_c"]
    assert rows[0]["content"][0]["text"] == "edited"


async def test_move_items_to_end(store: Store) -> None:
    await store.insert_session(session_row("s1"))
    await store.insert_session(session_row("s2"))
    await store.put_items("s1", [message(f"item_{n}") for n in range(4)])
    await store.put_items("s2", [message("item_x")])
    await store.move_items_to_end("s1", ["item_1", "item_0"])
    assert [i["id"] for i in (await store.list_items("s1")).rows] == [
        "item_2",
        "item_3",
        "item_1",
        "item_0",
    ]
    await store.move_items_to_end("s1", [])
    await store.move_items_to_end("s1", ["item_x"])  # another session's: untouched
    assert [i["id"] for i in (await store.list_items("s2")).rows] == ["item_x"]


async def test_one_message_moves_to_the_end_and_is_taken(store: Store) -> None:
    """A turn's message alone (one statement on PostgreSQL, where several take a
    transaction): moved behind what came after it, marked taken; one already last
    stays where it is and keeps its turn."""
    await store.insert_session(session_row("s1"))
    await store.put_items("s1", [message(f"item_{n}") for n in range(3)], pending=True)
    await store.move_items_to_end("s1", ["item_0"], taken_by="resp_1")
    order = ["item_1", "item_2", "item_0"]
    assert [i["id"] for i in (await store.list_items("s1")).rows] == order
    assert [p.item["id"] for p in await store.pending_items(["s1"])] == ["item_1", "item_2"]
    await store.move_items_to_end("s1", ["item_0"])
    assert [i["id"] for i in (await store.list_items("s1")).rows] == order
    assert await store.item_taken_by("s1", "item_0") == "resp_1"


async def test_a_turn_is_counted_as_it_takes_its_messages(store: Store) -> None:
    """``begin_turn`` takes the turn's messages in the same write (one statement on
    PostgreSQL for one message, where counting and taking were two): moved behind
    what came after them, marked taken; other sessions' items untouched."""
    await store.insert_session(session_row("s1"))
    await store.insert_session(session_row("s2"))
    await store.put_items("s1", [message(f"item_{n}") for n in range(5)], pending=True)
    await store.put_items("s2", [message("item_x")], pending=True)
    assert await _turn_number(store, "s1", ["item_0"], taken_by="resp_1") == 0
    assert await _turn_number(store, "s1", ["item_2", "item_1"], taken_by="resp_2") == 1
    assert await _turn_number(store, "s1", ["item_x"], taken_by="resp_3") == 2  # not s1's
    assert await _turn_number(store, "s1") == 3
    ids = [i["id"] for i in (await store.list_items("s1")).rows]
    assert ids == ["item_3", "item_4", "item_0", "item_2", "item_1"]
    assert [p.item["id"] for p in await store.pending_items(["s1", "s2"])] == [
        "item_3",
        "item_4",
        "item_x",
    ]
    taken = [await store.item_taken_by("s1", f"item_{n}") for n in range(3)]
    assert taken == ["resp_1", "resp_2", "resp_2"]
    assert await store.item_taken_by("s2", "item_x") is None
    row = await store.get_session("s1")
    assert row is not None and row.turn_count == 4


async def _turn_number(store: Store, session_id: str, *taken: Any, **kwargs: Any) -> int:
    start = await store.begin_turn(session_id, *taken, **kwargs)
    assert start is not None
    return start.number


async def test_a_turn_s_start_reads_the_row_and_its_agent_s_version(store: Store) -> None:
    """``begin_turn`` answers with the row as counted and the agent's latest version
    (the read a turn's start made after it); a missing session gets ``None`` and
    nothing is written."""
    agent = await store.put_agent_version("coder", {"name": "coder", "v": 1}, "alice")
    await store.insert_session(session_row("s1", agent_id=agent.id))
    await store.put_items("s1", [message("item_0")], pending=True)
    await store.put_agent_version("coder", {"name": "coder", "v": 2}, "alice")
    for taken in ([], ["item_0"], ["item_0", "item_1"]):
        start = await store.begin_turn("s1", taken, taken_by="resp_1")
        assert start is not None
        assert start.row == await store.get_session("s1")
        assert (start.number, start.row.turn_count, start.latest_version) == (
            start.row.turn_count - 1,
            len(taken) + 1,
            2,
        )
    await store.insert_session(session_row("s2"))  # its agent is gone
    start = await store.begin_turn("s2")
    assert start is not None and start.latest_version is None
    assert await store.begin_turn("missing", ["item_0"], taken_by="resp_9") is None
    assert await store.item_taken_by("s1", "item_0") == "resp_1"


async def test_which_turn_took_a_message(store: Store) -> None:
    await store.insert_session(session_row("s1"))
    await store.put_items("s1", [message("item_a"), message("item_b"), message("item_c")])
    assert await store.item_taken_by("s1", "item_a") is None
    await store.move_items_to_end("s1", ["item_a"], taken_by="resp_1")
    assert await store.item_taken_by("s1", "item_a") == "resp_1"
    await store.settle_items("s1", ["item_b", "item_a"])  # a stop dropped b; a was taken
    assert await store.item_taken_by("s1", "item_b") == ""
    assert await store.item_taken_by("s1", "item_a") == "resp_1"
    assert await store.item_taken_by("s1", "item_c") is None
    assert await store.item_taken_by("other", "item_a") is None
    assert await store.item_taken_by("s1", "item_missing") is None


async def test_list_items_pages(store: Store) -> None:
    await store.insert_session(session_row("s1"))
    await store.put_items("s1", [message(f"item_{n}") for n in range(5)])
    page = await store.list_items("s1", limit=2)
    assert [i["id"] for i in page.rows] == ["item_0", "item_1"] and page.has_more
    page = await store.list_items("s1", limit=2, after="item_1")
    assert [i["id"] for i in page.rows] == ["item_2", "item_3"] and page.has_more
    page = await store.list_items("s1", limit=5, after="item_3")
    assert [i["id"] for i in page.rows] == ["item_4"] and not page.has_more
    page = await store.list_items("s1", order="desc", limit=2)
    assert [i["id"] for i in page.rows] == ["item_4", "item_3"] and page.has_more
    page = await store.list_items("s1", order="desc", after="item_1")
    assert [i["id"] for i in page.rows] == ["item_0"] and not page.has_more
    with pytest.raises(LookupError):
        await store.list_items("s1", after="item_missing")


# -- events ------------------------------------------------------------------------------


async def test_append_events_batch_keeps_heads(store: Store) -> None:
    await store.insert_session(session_row("a"))
    await store.insert_session(session_row("b"))
    await store.append_events(
        [
            event("a", 1, "session.status", status="running"),
            event("b", 1, "x"),
            event("a", 2, "x", n=2),
            event("a", 3, "session.status", status="idle"),
            event("b", 2, "session.status", status="failed"),
            event("a", 4, "x", created_at=5.0),
        ]
    )
    a, b = await store.get_session("a"), await store.get_session("b")
    assert a is not None and (a.last_event_id, a.status) == (4, "idle")
    assert a.updated_at == 5.0  # the newest event's created_at
    assert b is not None and (b.last_event_id, b.status) == (2, "failed")
    assert [e["event_id"] for e in await store.read_events("a", 0)] == [1, 2, 3, 4]
    assert (await store.read_events("a", 1, limit=1))[0] == {
        "type": "x",
        "event_id": 2,
        "session_id": "a",
        "n": 2,
    }
    assert await store.max_event_id("a") == 4
    newest = await store.newest_event("a", ["session.status", "y"])
    assert newest is not None and newest["event_id"] == 3
    assert await store.newest_event("a", ["y"]) is None
    assert await store.max_event_id("b") == 2
    assert await store.max_event_id("none") is None
    assert await store.read_events("a", 4) == []


async def test_the_newest_event_of_one_call(store: Store) -> None:
    """A kept tool call's events are found by ``call_id`` (MCP's tasks)."""
    await store.insert_session(session_row("a"))
    await store.append_events(
        [
            event("a", 1, "t", call_id="call_1", status="working"),
            event("a", 2, "t", call_id="call_2", status="working"),
            event("a", 3, "x", call_id="call_1"),
            event("a", 4, "t", call_id="call_1", status="completed"),
        ]
    )
    one = await store.newest_event("a", ["t"], match=("call_id", "call_1"))
    assert one is not None and (one["event_id"], one["status"]) == (4, "completed")
    two = await store.newest_event("a", ["t"], match=("call_id", "call_2"))
    assert two is not None and two["event_id"] == 2
    assert await store.newest_event("a", ["t"], match=("call_id", "call_3")) is None
    assert await store.newest_event("a", ["t"], match=("call_id", "x' OR '1'='1")) is None


async def test_append_events_calls_on_stored_once_committed_and_never_on_failure(
    store: Store, db_url: str
) -> None:
    """The bus delivers a batch from ``on_stored``: once, only for a committed batch,
    and on SQLite from the commit's completion (not the caller's task, which resumes
    a scheduler round later)."""
    await store.insert_session(session_row("a"))
    called_in: list[trio.lowlevel.Task] = []

    def on_stored() -> None:
        called_in.append(trio.lowlevel.current_task())

    with trio.fail_after(10):
        await store.append_events([event("a", 1, "x"), event("a", 2, "x")], on_stored=on_stored)
        assert len(called_in) == 1
        if db_url.startswith("sqlite"):
            assert called_in[0] is not trio.lowlevel.current_task()
        with pytest.raises(Exception):  # noqa: B017 -- each store's own integrity error
            await store.append_events([event("a", 2, "x", n=9)], on_stored=on_stored)
        assert len(called_in) == 1


async def test_append_events_refuses_a_taken_id(store: Store) -> None:
    await store.insert_session(session_row("a"))
    await store.append_events([event("a", 1, "x", n=1)])
    with pytest.raises(Exception):  # noqa: B017 - each store's own integrity error
        await store.append_events([event("a", 2, "x"), event("a", 1, "x", n=99)])
    # All or nothing: event 2 was not written either.
    assert [e["event_id"] for e in await store.read_events("a", 0)] == [1]
    assert (await store.read_events("a", 0))[0]["n"] == 1


async def test_read_events_pages_large_logs(store: Store) -> None:
    await store.insert_session(session_row("a"))
    await store.append_events([event("a", n, "x", text="w" * 10) for n in range(1, 2501)])
    seen: list[int] = []
    after = 0
    while page := await store.read_events("a", after, limit=1000):
        seen += [e["event_id"] for e in page]
        after = seen[-1]
    assert seen == list(range(1, 2501))


# -- inbox -------------------------------------------------------------------------------


async def test_inbox(store: Store) -> None:
    await store.insert_session(session_row("s1"))
    assert await store.add_inbox_item("s1", "inbox_1", '{"n": 1}') == 1
    assert await store.add_inbox_item("s1", "inbox_2", '{"n": 2}') == 2
    assert await store.inbox_count("s1") == 2
    assert await store.drain_inbox("s1") == [("inbox_1", '{"n": 1}'), ("inbox_2", '{"n": 2}')]
    assert await store.inbox_count("s1") == 0
    assert await store.drain_inbox("s1") == []
    assert await store.add_inbox_item("s1", "inbox_3", "{}") == 1


# -- elicitations ------------------------------------------------------------------------


async def test_elicitations(store: Store) -> None:
    await store.insert_session(session_row("s1"))
    request = json.dumps({"elicitation_id": "elicit_1"})
    await store.insert_elicitation("elicit_1", "s1", request)
    await store.insert_elicitation("elicit_2", "s1", "{}")
    await store.insert_elicitation("elicit_3", "s1", "{}")
    row = await store.get_elicitation("elicit_1")
    assert row is not None
    assert (row["session_id"], row["status"], row["request"], row["action"]) == (
        "s1",
        "pending",
        request,
        None,
    )
    await store.finish_elicitation("elicit_1", "resolved", "accept")
    row = await store.get_elicitation("elicit_1")
    assert row is not None and (row["status"], row["action"]) == ("resolved", "accept")
    assert row["resolved_at"] is not None
    await store.insert_session(session_row("s2"))
    await store.insert_elicitation("elicit_4", "s2", "{}")
    assert await store.expire_pending_elicitations(["s2", "nobody"]) == 1
    assert await store.expire_pending_elicitations([]) == 0
    assert await store.expire_pending_elicitations() == 2
    row = await store.get_elicitation("elicit_2")
    assert row is not None and (row["status"], row["action"]) == ("expired", "expired")
    assert await store.expire_pending_elicitations() == 0
    assert await store.get_elicitation("elicit_missing") is None


# -- what a crash leaves: pending messages, running tasks, process groups --------------


async def test_pending_messages_until_a_turn_takes_them(store: Store) -> None:
    await store.insert_session(session_row("s1"))
    await store.insert_session(session_row("s2"))
    await store.put_items("s1", [message("item_old")])
    await store.put_items("s1", [message("item_a"), message("item_b")], pending=True)
    await store.put_items("s2", [message("item_c")], pending=True)
    assert [(p.session_id, p.item["id"]) for p in await store.pending_items()] == [
        ("s1", "item_a"),
        ("s1", "item_b"),
        ("s2", "item_c"),
    ]
    assert [p.item["id"] for p in await store.pending_items(["s2"])] == ["item_c"]
    shown = await store.list_items("s1", include_pending=False)
    assert [i["id"] for i in shown.rows] == ["item_old"]
    await store.move_items_to_end("s1", ["item_a"], taken_by="resp_1")
    await store.settle_items("s2", ["item_c"])
    await store.delete_items("s1", ["item_b"])
    assert await store.pending_items() == []
    assert [i["id"] for i in (await store.list_items("s1")).rows] == ["item_old", "item_a"]
    with pytest.raises(LookupError):
        await store.put_items("gone", [message("item_x")])


async def test_running_tasks_end_with_their_inbox_item(store: Store) -> None:
    await store.insert_session(session_row("s1"))
    await store.insert_session(session_row("s2"))
    await store.add_running_task("s1", "task_1", "sys_os_shell")
    await store.add_running_task("s2", "task_2", "sys_os_read")
    assert await store.running_tasks() == [
        RunningTask("s1", "task_1", "sys_os_shell"),
        RunningTask("s2", "task_2", "sys_os_read"),
    ]
    assert await store.running_tasks(["s2"]) == [RunningTask("s2", "task_2", "sys_os_read")]
    assert await store.add_inbox_item("s1", "inbox_1", "{}", task_id="task_1") == 1
    assert [t.handle_id for t in await store.running_tasks()] == ["task_2"]


async def test_process_groups(store: Store) -> None:
    one = ProcessGroupRow(100, 5, "boot", "s1")
    two = ProcessGroupRow(200, 6, "boot", "s2")
    await store.put_process_group(one)
    await store.put_process_group(two)
    assert sorted(await store.process_groups(), key=lambda r: r.pgid) == [one, two]
    assert await store.process_groups(["s2"]) == [two]
    await store.delete_process_group(100, 5)
    assert await store.process_groups() == [two]


async def test_a_child_of_a_deleted_parent_is_refused(store: Store) -> None:
    await store.insert_session(session_row("root"))
    await store.delete_sessions(["root"])
    with pytest.raises(LookupError):
        await store.insert_session(
            session_row("child", parent_session_id="root", root_session_id="root")
        )


async def test_a_delete_takes_the_subtree(store: Store) -> None:
    await tree(store)
    await store.delete_sessions(["child"])  # and "grand" below it
    assert await store.get_session("grand") is None
    assert await store.get_session("root") is not None


# -- sub-agent work ----------------------------------------------------------------------


def work(work_id: str, parent: str = "root", child: str = "child", at: float = 1.0) -> WorkRow:
    return WorkRow(work_id, parent, child, "researcher", "t", "item_m", "launching", None, at)


async def test_work_is_finished_exactly_once_with_its_inbox_item(store: Store) -> None:
    await tree(store)
    await store.insert_work(work("work_1"))
    await store.insert_work(work("work_2", at=2.0))
    assert await store.start_work("work_1") is True
    assert await store.start_work("work_1") is False  # running already
    assert [w.work_id for w in await store.list_work(parent_session_id="root")] == [
        "work_1",
        "work_2",
    ]
    assert [w.status for w in await store.list_work(child_session_id="child")] == [
        "running",
        "launching",
    ]
    count = await store.finish_work("work_1", "completed", "42", "inbox_1", '{"n": 1}')
    assert count == 1
    assert await store.finish_work("work_1", "failed", "late", "inbox_2", "{}") is None
    assert await store.peek_inbox("root") == [("inbox_1", '{"n": 1}')]
    assert [w.work_id for w in await store.list_work()] == ["work_2"]  # open ones only
    done = [w for w in await store.list_work(open_only=False) if w.work_id == "work_1"]
    assert (done[0].status, done[0].output) == ("completed", "42")
    assert done[0].finished_at is not None
    await store.drop_work("work_2")
    assert await store.list_work(open_only=False) == done


async def test_finishing_work_for_a_deleted_parent_delivers_nothing(store: Store) -> None:
    await tree(store)
    await store.insert_work(work("work_1", parent="other", child="root"))
    await store.insert_work(work("work_2", parent="root", child="child"))
    await store.delete_sessions(["other"])
    assert await store.finish_work("work_1", "completed", "x", "inbox_1", "{}") is None
    await store.delete_sessions(["child", "grand"])  # the work goes with its child
    assert await store.list_work(open_only=False) == []


async def test_the_inbox_vetted_before_it_is_read(store: Store) -> None:
    await tree(store)
    for n in range(3):
        await store.add_inbox_item("child", f"inbox_{n}", str(n))
    assert await store.sessions_with_inbox() == ["child"]
    assert [i for i, _ in await store.peek_inbox("child", limit=2)] == ["inbox_0", "inbox_1"]
    assert await store.ack_inbox("child", ["inbox_1"]) == 2
    assert [i for i, _ in await store.peek_inbox("child")] == ["inbox_0", "inbox_2"]
    assert await store.ack_inbox("child", ["inbox_0", "inbox_2"]) == 0
    assert await store.sessions_with_inbox() == []


async def test_a_sub_agent_session_keeps_its_path(store: Store) -> None:
    row = session_row("s1", sub_agent="lead/researcher")
    await store.insert_session(row)
    assert await store.get_session("s1") == row


# -- harness state -----------------------------------------------------------------------


async def test_harness_state(store: Store) -> None:
    await store.insert_session(session_row("s1"))
    assert await store.get_harness_state("s1", "codex") == {}
    await store.put_harness_state("s1", "codex", "thread", "t1")
    await store.put_harness_state("s1", "codex", "thread", "t2")  # replaces
    await store.put_harness_state("s1", "claude-code", "session", "c1")
    assert await store.get_harness_state("s1", "codex") == {"thread": "t2"}
    await store.put_harness_state("s1", "codex", "thread", None)
    assert await store.get_harness_state("s1", "codex") == {}
    await store.put_harness_state("gone", "codex", "thread", "t")  # no session: not kept
    assert await store.get_harness_state("gone", "codex") == {}
    await store.delete_sessions(["s1"])
    assert await store.get_harness_state("s1", "claude-code") == {}


# -- files and identity ------------------------------------------------------------------


async def test_files(store: Store) -> None:
    row = FileRow("file_1", "a.png", "image/png", 3, "alice", 2.5)
    await store.put_file(row, b"\x00\x01\x02")
    assert await store.get_file("file_1") == row
    assert await store.get_file_content("file_1") == b"\x00\x01\x02"
    assert await store.get_file("file_2") is None
    assert await store.get_file_content("file_2") is None


async def test_location_names_the_database_without_secrets(store: Store) -> None:
    await store.ping()
    assert store.kind in ("sqlite", "postgresql")
    assert store.location
    assert "password" not in store.location
    assert isinstance(await store.owner_info(), str | None)
