"""The event bus: persist then publish, replay from any point, slow subscribers."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
import trio
import trio.lowlevel
import trio.testing

import omnigent
from omnigent.core.bus import EventBus
from omnigent.core.bus import _live as live_module
from omnigent.core.bus import _subscription as subscription_module
from omnigent.core.bus import _writer as writer_module
from omnigent.errors import EventLogFull
from omnigent.model import Event, OutputTextDelta, SessionStatusChanged
from omnigent.stores import Store, StoredEvent, open_store
from omnigent.testing import collect_turn, probe, run_turn, scripted_agent

from .conftest import statuses
from .test_bus_ownership import row

WORDS = 400


def long_say(words: int = WORDS) -> dict[str, Any]:
    return scripted_agent(script=[{"say": " ".join(f"w{i}" for i in range(words))}])


async def test_every_event_is_persisted_before_a_subscriber_sees_it(
    rt: omnigent.Runtime,
) -> None:
    agent = await rt.create_agent(scripted_agent(script=[{"say": "a b c"}]))
    session = await rt.create_session(agent.id)
    async with rt.subscribe(session.id) as events:
        await rt.send_message(session.id, "go")
        async for event in events:
            stored = await probe(rt).store.read_events(session.id, event.event_id - 1, 1)
            assert stored == [event.to_dict()]
            if isinstance(event, SessionStatusChanged) and event.status == "idle":
                break


async def test_subscribers_at_every_after_see_the_same_events_once(
    rt: omnigent.Runtime,
) -> None:
    """Subscribe at every possible ``after`` while a turn streams hundreds of deltas."""
    agent = await rt.create_agent(long_say())
    session = await rt.create_session(agent.id)
    async with rt.subscribe(session.id) as live:
        await rt.send_message(session.id, "go")
        reference = await collect_turn(live)
    last = reference[-1].event_id
    # A second turn streams while late subscribers join at every point of the log.
    results: dict[int, list[int]] = {}

    async def follow(after: int) -> None:
        async with rt.subscribe(session.id, after=after) as events:
            ids: list[int] = []
            async for event in events:
                ids.append(event.event_id)
                if event.event_id >= 2 * last:
                    break
            results[after] = ids

    async with trio.open_nursery() as nursery:
        await rt.send_message(session.id, "again")
        for after in range(0, 2 * last):
            nursery.start_soon(follow, after)
            if after % 7 == 0:
                await trio.lowlevel.checkpoint()
    for after, ids in results.items():
        assert ids == list(range(after + 1, 2 * last + 1)), after


async def test_live_only_subscription_starts_after_the_present(rt: omnigent.Runtime) -> None:
    agent = await rt.create_agent(scripted_agent(script=[{"say": "x"}]))
    session = await rt.create_session(agent.id)
    first = await run_turn(rt, session.id)
    second = await run_turn(rt, session.id)
    assert second[0].event_id == first[-1].event_id + 1


async def test_slow_subscriber_never_blocks_the_writer_and_loses_nothing(
    rt: omnigent.Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(live_module, "SUBSCRIBER_BUFFER", 4)
    agent = await rt.create_agent(long_say(200))
    session = await rt.create_session(agent.id)
    async with rt.subscribe(session.id, after=0) as slow, rt.subscribe(session.id) as fast:
        await rt.send_message(session.id, "go")
        fast_events = await collect_turn(fast)  # the turn finishes while `slow` sleeps
        slow_events: list[Event] = []
        async for event in slow:
            slow_events.append(event)
            await trio.lowlevel.checkpoint()
            if event.event_id == fast_events[-1].event_id:
                break
    assert [e.event_id for e in slow_events] == [e.event_id for e in fast_events]
    assert [e.to_dict() for e in slow_events] == [e.to_dict() for e in fast_events]


async def test_a_large_backlog_replays_in_pages(
    rt: omnigent.Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(subscription_module, "REPLAY_PAGE", 16)
    agent = await rt.create_agent(long_say(100))
    session = await rt.create_session(agent.id)
    reference = await run_turn(rt, session.id)
    async with rt.subscribe(session.id, after=0) as events:
        seen = []
        async for event in events:
            seen.append(event)
            if event.event_id == reference[-1].event_id:
                break
    assert [e.to_dict() for e in seen] == [e.to_dict() for e in reference]


async def test_deltas_are_written_in_batches(rt: omnigent.Runtime) -> None:
    """A turn of thousands of deltas must not pay one store write per delta."""
    writes = 0
    original = probe(rt).store.append_events

    async def counting(events: Any, **options: Any) -> None:
        nonlocal writes
        writes += 1
        await original(events, **options)

    probe(rt).store.append_events = counting  # type: ignore[method-assign]
    agent = await rt.create_agent(long_say(3000))
    session = await rt.create_session(agent.id)
    events = await run_turn(rt, session.id)
    deltas = sum(isinstance(e, OutputTextDelta) for e in events)
    assert deltas == 3000
    assert writes < deltas / 10


async def test_deleting_a_session_ends_its_subscriptions(rt: omnigent.Runtime) -> None:
    agent = await rt.create_agent(scripted_agent(script=[{"sleep": 30}]))
    session = await rt.create_session(agent.id)
    with trio.fail_after(5):
        async with rt.subscribe(session.id) as events:
            await rt.send_message(session.id, "go")
            await rt.delete_session(session.id)
            seen = [e async for e in events]
    # The turn was cancelled (and said so) before the session went away.
    assert statuses(seen)[-1:] == ["cancelled"] or seen == []
    with pytest.raises(omnigent.SessionNotFound):
        await rt.get_session(session.id)
    assert rt.statistics()["subscribers"] == 0


async def test_a_cancelled_catch_up_loses_nothing(rt: omnigent.Runtime) -> None:
    """Regression: a cancel between the first store read and going live made a gap."""
    agent = await rt.create_agent(scripted_agent(script=[{"say": "a b c d"}]))
    session = await rt.create_session(agent.id)
    reference = await run_turn(rt, session.id)
    original = probe(rt).store.read_events
    calls = 0
    scope = trio.CancelScope()

    async def cancelled_on_second_read(session_id: str, after: int, limit: int = 1000) -> Any:
        nonlocal calls
        calls += 1
        if calls == 2:
            scope.cancel()
            await trio.lowlevel.checkpoint()
        return await original(session_id, after, limit)

    probe(rt).store.read_events = cancelled_on_second_read  # type: ignore[method-assign]
    async with rt.subscribe(session.id, after=0) as events:
        with scope:
            while True:
                await events.__anext__()
        assert scope.cancelled_caught
        first_batch_seen = events.last_event_id
        rest = []
        with trio.fail_after(5):
            while events.last_event_id < reference[-1].event_id:
                rest.append(await events.__anext__())
    ids = [e.event_id for e in rest]
    assert ids == list(range(first_batch_seen + 1, reference[-1].event_id + 1))


async def test_next_ready_takes_what_is_at_hand_and_never_waits(rt: omnigent.Runtime) -> None:
    """What a session stream coalesces into one chunk: the first event waited for,
    then every event at hand; together, every event once and in order."""
    agent = await rt.create_agent(long_say(1000))
    session = await rt.create_session(agent.id)
    with trio.fail_after(10):
        async with rt.subscribe(session.id) as events:
            assert await events.next_ready() is None  # nothing yet: no wait either
            await rt.send_message(session.id, "go")
            ids: list[int] = []
            chunks = 0
            while True:
                chunk = [await events.__anext__()]
                while (more := await events.next_ready()) is not None:
                    chunk.append(more)
                chunks += 1
                ids += [e.event_id for e in chunk]
                if any(isinstance(e, SessionStatusChanged) and e.status == "idle" for e in chunk):
                    break
    assert ids == list(range(ids[0], ids[0] + len(ids)))
    assert len(ids) > 1000 and chunks < len(ids) / 10


# -- the queue's bound (issue 22, defect 6) ----------------------------------------------


class Stalled:
    """A store whose ``append_events`` waits for ``go`` (a writer stuck on the database)."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self.go = trio.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    async def append_events(self, events: Sequence[StoredEvent], **options: Any) -> None:
        await self.go.wait()
        await self._store.append_events(events, **options)


def delta(text: str) -> OutputTextDelta:
    return OutputTextDelta(response_id="resp_1", item_id="item_1", delta=text)


async def fill_then_drain(bus: EventBus, store: Stalled, nursery: trio.Nursery) -> int:
    """Fill a stalled bus past its bound, then let the store answer; how many went in."""
    published = 1
    await bus.publish("s1", delta("taken by the writer, which then waits"))
    await trio.testing.wait_all_tasks_blocked()
    with pytest.raises(EventLogFull) as refused:
        for _ in range(100):  # an unbounded queue takes them all
            await bus.publish_now("s1", delta("a"), delta("b"))
            published += 2
    assert published == 1 + 12  # the queue's 8 places and its 4 reserved
    assert bus.statistics()["queued"] == 12
    assert refused.value.capacity == 12
    # An ordinary publish waits for room instead of being refused.
    waiting = trio.Event()

    async def ordinary() -> None:
        await bus.publish("s1", delta("waits"))
        waiting.set()

    nursery.start_soon(ordinary)
    await trio.testing.wait_all_tasks_blocked()
    assert not waiting.is_set()
    store.go.set()
    await waiting.wait()
    await bus.flush()
    return published + 1


async def test_publish_now_past_the_queues_bound_is_refused_not_queued(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Regression: the queue was an unbounded channel and ``publish_now`` went past its
    hand-made bound, so a stuck writer let it grow without limit. Now the reserved
    places fill, the next ``publish_now`` is refused with ``EventLogFull`` (no id
    taken), and what was queued is all written, without a gap, once the store answers."""
    monkeypatch.setattr(writer_module, "QUEUE_SIZE", 8)
    monkeypatch.setattr(writer_module, "RESERVE", 4)
    async with open_store(None) as inner:
        await inner.insert_session(row("s1"))
        store = Stalled(inner)
        bus = EventBus(store)  # type: ignore[arg-type]
        with trio.fail_after(10):
            async with trio.open_nursery() as nursery:
                await nursery.start(bus.run)
                try:
                    published = await fill_then_drain(bus, store, nursery)
                finally:
                    store.go.set()  # the writer is shielded: never leave it waiting
                await bus.close()
        stored = [e["event_id"] for e in await inner.read_events("s1", 0, 1000)]
    assert stored == list(range(1, published + 1))  # nothing dropped, no id skipped


async def test_a_turn_still_ends_when_the_queue_is_full(
    rt: omnigent.Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reserved places are what a turn's terminal pair uses when ordinary
    publishers have filled the queue: the turn ends ``cancelled`` and says so."""
    monkeypatch.setattr(writer_module, "QUEUE_SIZE", 4)
    agent = await rt.create_agent(long_say(50))
    session = await rt.create_session(agent.id)
    gate = trio.Event()
    store = probe(rt).store
    original = store.append_events

    async def stalled(events: Sequence[StoredEvent], **options: Any) -> None:
        await gate.wait()
        await original(events, **options)

    with trio.fail_after(10):
        async with rt.subscribe(session.id) as events:
            store.append_events = stalled  # type: ignore[method-assign]
            await rt.send_message(session.id, "go")
            await trio.testing.wait_all_tasks_blocked()  # the turn waits for room
            assert await rt.interrupt(session.id)
            await trio.testing.wait_all_tasks_blocked()
            gate.set()
            turn = await collect_turn(events)
    assert statuses(turn) == ["running", "cancelled"]
