"""The store calls a turn's start makes, on both stores (issue 32).

Two hundred turns starting at once on PostgreSQL spent half their wall time in store
calls, each costing this process 240–300 µs of CPU there: a stream turn read its
session's row nine times (the turn builder three times plus following its agent, the
announcement to a parent twice — for a root session too, which has none —, the row
lookups of the send, the compose and the stream). Regression tests: each fails if a
redundant read comes back. Since the turn's count reads the row back (``begin_turn``
answers with it and its agent's latest version), the turn's start reads it no more.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import trio

import omnigent
from omnigent.errors import InvalidInput
from omnigent.harnesses.base import TurnContext, TurnRequest
from omnigent.model import ChildSessionUpdated
from omnigent.stores import cluster_of, is_postgres_url
from omnigent.testing import RecordingHarness, probe, scripted_agent

from .conftest import wait_quiet
from .runners.test_binding import Links

COUNTED = (
    "begin_turn",
    "get_session",
    "get_session_and_agent_version",
    "read_events",
    "max_event_id",
    "get_agent",
    "usage_of",
)


def row_reads(counts: Counter[str]) -> int:
    """Reads of a session's row (alone, or with its agent's latest version)."""
    return counts["get_session"] + counts["get_session_and_agent_version"]


@contextmanager
def counting(rt: omnigent.Runtime, monkeypatch: pytest.MonkeyPatch) -> Iterator[Counter[str]]:
    """Count the runtime's calls of the :data:`COUNTED` store methods, by name."""
    store = probe(rt).store
    counts: Counter[str] = Counter()

    def counted(name: str) -> Any:
        original = getattr(store, name)

        async def call(*args: Any, **kwargs: Any) -> Any:
            counts[name] += 1
            return await original(*args, **kwargs)

        return call

    with monkeypatch.context() as patch:
        for name in COUNTED:
            patch.setattr(store, name, counted(name))
        yield counts


async def test_a_stream_turn_reads_its_session_row_once(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A root session's stream turn, from the message to its actor's exit: the stream
    reads the row once (to hand the message to where the tree is held); the turn's
    start has it from counting the turn (for its tools, harness and request, with its
    agent's latest version to follow). The stream holds the tree before it
    subscribes, so its subscription starts live from the bus's counter (one read of
    the newest id, which the turn's events then take) and never reads the log back —
    on PostgreSQL too, where no server held the tree when the message came. A spec
    with no ``limits`` reads no stored usage."""
    with trio.fail_after(30):
        async with omnigent.open_runtime(db_url) as rt:
            agent = await rt.create_agent(scripted_agent(script=[{"say": "hi"}]))
            session = (await rt.create_session(agent.id)).id
            with counting(rt, monkeypatch) as counts:
                async with rt.open_turn_stream(session, "go") as (accepted, events):
                    seen = [event.type async for event in events]
                await wait_quiet(rt)  # the turn's end is announced after its last event
            assert accepted.status == "accepted"
            assert seen[-1] == "response.completed"
            assert row_reads(counts) == 1, counts
            # The actor's first turn follows its agent: its latest version comes with
            # the row, read back by the turn's count.
            assert counts["begin_turn"] == 1, counts
            assert counts["get_session_and_agent_version"] == 0, counts
            assert counts["get_agent"] == 0, counts
            # The bus's counter starts from the newest stored id: on PostgreSQL as the
            # claim of the tree read it, else read once.
            assert counts["max_event_id"] == (0 if is_postgres_url(db_url) else 1), counts
            assert counts["read_events"] == 0, counts
            assert counts["usage_of"] == 0, counts  # no limits: no stored sum to check


async def test_each_turn_reads_the_row_once_and_sees_a_change_made_before_it(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An actor's next turn reads the row again — a row kept across turns would miss
    a change made between them (here a ``model_override``) — once, as its count reads
    it back, and follows no
    agent (only the actor's first turn does); a root session's two turn ends and the
    next start announce nothing, and so read nothing."""
    recorder = RecordingHarness()
    started, released = trio.Event(), trio.Event()

    async def body(request: TurnRequest, ctx: TurnContext) -> None:
        if request.turn_number == 0:
            started.set()
            await released.wait()
        async with ctx.open_message() as message:
            await message.write(f"turn {request.turn_number}")

    recorder.body = body
    with trio.fail_after(30):
        async with omnigent.open_runtime(db_url) as rt:
            rt.register_harness("recorder", recorder.factory)
            agent = await rt.create_agent(scripted_agent("rec", harness="recorder"))
            session = (await rt.create_session(agent.id)).id
            async with rt.subscribe(session) as events:
                assert (await rt.send_message(session, "first")).status == "accepted"
                await started.wait()
                assert (await rt.send_message(session, "second")).status == "buffered"
                await rt.update_session(session, model_override="changed-model")
                with counting(rt, monkeypatch) as counts:
                    released.set()
                    completed = 0
                    async for event in events:
                        completed += event.type == "response.completed"
                        if completed == 2:
                            break
                    await wait_quiet(rt)
    assert [r.turn_number for r in recorder.requests] == [0, 1]
    assert recorder.requests[0].model != "changed-model"
    assert recorder.requests[1].model == "changed-model"
    assert counts["begin_turn"] == 1, counts  # the second turn's start, the row read back
    assert counts["get_session"] == 0, counts
    assert counts["get_session_and_agent_version"] == counts["get_agent"] == 0, counts


async def test_a_child_turn_still_tells_its_parent(db_url: str) -> None:
    """The announcement is skipped only for a session with no parent: a child's turn
    is announced to its parent when it starts and when it ends."""
    with trio.fail_after(30):
        async with omnigent.open_runtime(db_url) as rt:
            agent = await rt.create_agent(scripted_agent(script=[{"say": "done"}]))
            parent = (await rt.create_session(agent.id)).id
            child = (await rt.create_session(agent.id, parent_session_id=parent)).id
            async with rt.subscribe(parent) as events:
                await rt.send_message(child, "go")
                busy = []
                async for event in events:
                    assert isinstance(event, ChildSessionUpdated)
                    busy.append(event.child.busy)
                    if not event.child.busy and event.child.preview == "done":
                        break
            assert True in busy  # the start, while its turn runs
            await wait_quiet(rt)


async def test_a_refused_stream_message_gives_the_tree_back(pg_url: str) -> None:
    """The stream holds the tree before its message is checked: a message refused
    then (nothing stored, no turn) lets the lease go again."""
    with trio.fail_after(30):
        async with omnigent.open_runtime(pg_url) as rt:
            agent = await rt.create_agent(scripted_agent(script=[{"say": "hi"}]))
            session = (await rt.create_session(agent.id)).id
            with pytest.raises(InvalidInput):
                async with rt.open_turn_stream(session, [{"type": "no-such-block"}]):
                    raise AssertionError("the stream opened")
            store = cluster_of(probe(rt).store)
            assert store is not None
            while await store.lease_holder(session) is not None:
                await trio.sleep(0.01)  # the let-go runs in the ownership's nursery
            assert (await rt.get_session(session)).status == "idle"


async def test_a_claim_is_not_preceded_by_a_lookup_of_the_holder(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With runners, a message's tree is placed where the placement says if nobody holds
    it. Regression (issue 32): the holder was looked up first on every turn, one more
    round trip before the claim, whose own answer names a holder anyway, and the
    placement read the session's row again for its runner binding, which the stream
    had just read. Now the holder is read only when the placement would send the tree
    to another server, and the binding comes with the stream's row."""
    with trio.fail_after(30):
        async with omnigent.open_runtime(pg_url, runners=Links()) as rt:  # type: ignore[arg-type]
            agent = await rt.create_agent(scripted_agent(script=[{"say": "hi"}]))
            session = (await rt.create_session(agent.id)).id
            store = cluster_of(probe(rt).store)
            assert store is not None
            calls: Counter[str] = Counter()
            for name in ("lease_holder", "claim_all"):
                original = getattr(store, name)

                async def call(*args: Any, _name: str = name, _fn: Any = original) -> Any:
                    calls[_name] += 1
                    return await _fn(*args)

                monkeypatch.setattr(store, name, call)
            with counting(rt, monkeypatch) as counts:
                async with rt.open_turn_stream(session, "go") as (accepted, events):
                    seen = [event.type async for event in events]
                await wait_quiet(rt)
            assert accepted.status == "accepted"
            assert seen[-1] == "response.completed"
            assert calls == {"claim_all": 1}, calls
            assert row_reads(counts) == 1, counts  # as without runners
