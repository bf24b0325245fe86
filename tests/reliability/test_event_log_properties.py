"""Property tests of the event log: every subscriber gets every event once, in order.

Hypothesis draws a program of operations on two sessions of one SQLite file —
publishes (one at a time, or several together as ``publish_now`` does), subscribers
joining at any ``after`` (or live only), reading some events, being dropped at any
point (their task cancelled mid-read, as a client that goes away), resuming from the
last event they received, pauses that let everything run, and restarts (the bus and
the store closed and opened again on the same file, every subscriber dropped first) —
and the limits the bus works within: its replay page, each subscriber's buffer (small
ones make the writer detach slow subscribers, which then catch up from the store)
and its queue (small ones make publishers wait for room).

The program runs with the operations interleaved as drawn: a publish does not wait
for subscribers to catch up, a read does not wait for its events. At the end every
subscriber resumes and reads to the present, and for each: the ids it received are
exactly ``after + 1 … last``, each once, in order, and each event is the one that
was published (and stored) under that id.

Bounded: ``OMNIGENT_PROPERTY_EXAMPLES`` examples (default 100), derandomized (the
same programs on every run, so CI cannot flake on a new one; set
``OMNIGENT_PROPERTY_SEED`` to explore others), each under ``trio.fail_after``.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any
from unittest import mock

import attrs
import trio
import trio.testing
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import event as note
from hypothesis import strategies as st

from omnigent.core import _bus as bus_module
from omnigent.core import _subscription as subscription_module
from omnigent.core._bus import EventBus
from omnigent.model import Event, OutputTextDelta
from omnigent.stores import SessionRow, open_store

SESSIONS = ("conv_a", "conv_b")
MAX_SUBSCRIBERS = 6
EXAMPLES = int(os.environ.get("OMNIGENT_PROPERTY_EXAMPLES", "100"))
SEED = os.environ.get("OMNIGENT_PROPERTY_SEED")

session = st.integers(0, len(SESSIONS) - 1)
subscriber = st.integers(0, MAX_SUBSCRIBERS - 1)
publish = st.tuples(st.just("publish"), session, st.integers(1, 20), st.booleans())
subscribe = st.tuples(st.just("subscribe"), session, st.none() | st.integers(0, 60))
read = st.tuples(st.just("read"), subscriber, st.integers(1, 25))
operation = st.one_of(
    # Repeated branches weigh more: mostly traffic, with disruptions between.
    publish,
    publish,
    read,
    read,
    subscribe,
    st.tuples(st.just("drop"), subscriber),
    st.tuples(st.just("resume"), subscriber),
    st.tuples(st.just("yield"), st.integers(1, 6)),
    st.tuples(st.just("pause")),
    st.tuples(st.just("restart")),
)
programs = st.builds(
    lambda *parts: [step for part in parts for step in part],
    st.lists(subscribe, min_size=1, max_size=3),
    st.lists(publish, min_size=1, max_size=3),
    st.lists(operation, min_size=8, max_size=60),
)
limits = st.fixed_dictionaries(
    {"page": st.integers(1, 6), "buffer": st.integers(1, 6), "queue": st.integers(2, 12)}
)


@attrs.define(eq=False)
class Subscriber:
    """A client of one session: its connections come and go; what it got stays."""

    session_id: str
    asked_after: int | None
    start: int | None = None  # the after it was served from (fixed on first connect)
    received: list[Event] = attrs.Factory(list)
    scope: trio.CancelScope | None = None
    gone: trio.Event = attrs.Factory(trio.Event)
    progress: trio.Event = attrs.Factory(trio.Event)
    wanted: int = 0  # how far it has been told to read (an event id)

    @property
    def last_id(self) -> int:
        if self.received:
            return self.received[-1].event_id
        assert self.start is not None
        return self.start

    @property
    def connected(self) -> bool:
        return self.scope is not None


class World:
    """The program's state: the bus of the current 'process', what was published."""

    def __init__(self) -> None:
        self.bus: EventBus | None = None
        self.connections: trio.Nursery | None = None
        self.published: dict[str, dict[int, dict[str, Any]]] = {s: {} for s in SESSIONS}
        self.subscribers: list[Subscriber] = []
        self.counter = 0

    def last(self, session_id: str) -> int:
        return max(self.published[session_id], default=0)

    # -- operations ------------------------------------------------------------------

    async def publish(self, index: int, count: int, together: bool) -> None:
        assert self.bus is not None
        session_id = SESSIONS[index]
        events = []
        for _ in range(count):
            self.counter += 1
            events.append(OutputTextDelta(response_id="r", item_id="i", delta=f"d{self.counter}"))
        if together:
            stamped = await self.bus.publish_now(session_id, *events)
        else:
            stamped = [await self.bus.publish(session_id, e) for e in events]
        for event in stamped:
            assert event.event_id not in self.published[session_id], "an id was reused"
            self.published[session_id][event.event_id] = event.to_dict()

    async def subscribe(self, index: int, after: int | None) -> None:
        if len(self.subscribers) == MAX_SUBSCRIBERS:
            return
        session_id = SESSIONS[index]
        if after is not None:
            after = min(after, self.last(session_id))
        sub = Subscriber(session_id, after)
        self.subscribers.append(sub)
        await self.connect(sub)

    async def connect(self, sub: Subscriber) -> None:
        assert self.connections is not None and not sub.connected
        after = sub.asked_after if sub.start is None else sub.last_id
        sub.gone = trio.Event()
        await self.connections.start(self._connection, sub, after)

    async def _connection(
        self, sub: Subscriber, after: int | None, task_status: trio.TaskStatus[None]
    ) -> None:
        assert self.bus is not None
        try:
            with trio.CancelScope() as scope:
                sub.scope = scope
                async with self.bus.subscribe(sub.session_id, after) as events:
                    if sub.start is None:
                        sub.start = events.last_event_id
                        sub.wanted = sub.start
                    task_status.started()
                    while True:
                        while sub.last_id < sub.wanted:
                            event = await events.__anext__()
                            sub.received.append(event)
                            sub.progress.set()
                            sub.progress = trio.Event()
                        sub.progress.set()  # wake a reader waiting for "wanted"
                        sub.progress = trio.Event()
                        await sub.progress.wait()
        finally:
            sub.scope = None
            sub.gone.set()

    def read(self, index: int, count: int) -> None:
        if index >= len(self.subscribers):
            return
        sub = self.subscribers[index]
        if sub.connected:
            sub.wanted = min(max(sub.wanted, sub.last_id) + count, self.last(sub.session_id))
            sub.progress.set()

    async def drop(self, index: int) -> None:
        if index < len(self.subscribers):
            sub = self.subscribers[index]
            if sub.scope is not None:
                sub.scope.cancel()
                await sub.gone.wait()

    async def resume(self, index: int) -> None:
        if index < len(self.subscribers) and not self.subscribers[index].connected:
            await self.connect(self.subscribers[index])

    async def drop_all(self) -> None:
        for index in range(len(self.subscribers)):
            await self.drop(index)

    async def read_to_the_end(self) -> None:
        """Every subscriber resumes and reads up to the last event published."""
        for sub in self.subscribers:
            if not sub.connected:
                await self.connect(sub)
            sub.wanted = self.last(sub.session_id)
            sub.progress.set()
        for sub in self.subscribers:
            while sub.last_id < self.last(sub.session_id):
                await sub.progress.wait()


@asynccontextmanager
async def open_log(url: str) -> AsyncIterator[EventBus]:
    """One 'process': the store and the bus's writer, closed as a shutdown closes them."""
    async with open_store(url) as store, trio.open_nursery() as services:
        bus = EventBus(store)
        await services.start(bus.run)
        try:
            yield bus
        finally:
            with trio.CancelScope(shield=True):
                await bus.close()
                await bus.drained.wait()


async def make_sessions(url: str) -> None:
    async with open_store(url) as store:
        for session_id in SESSIONS:
            row = SessionRow(
                id=session_id,
                agent_id="agent_x",
                agent_version=1,
                owner="local",
                title=None,
                parent_session_id=None,
                root_session_id=session_id,
                harness_override=None,
                model_override=None,
                labels={},
                status="idle",
                last_event_id=0,
                turn_count=0,
                created_at=0.0,
            )
            await store.insert_session(row)


async def run_program(url: str, program: list[tuple[Any, ...]]) -> World:
    world = World()
    steps = iter(program)
    finished = False
    while not finished:
        async with open_log(url) as bus, trio.open_nursery() as connections:
            world.bus, world.connections = bus, connections
            for step in steps:
                if step[0] == "restart":
                    break
                await apply(world, step)
            else:
                finished = True
                await world.read_to_the_end()
            await world.drop_all()
    return world


async def apply(world: World, step: tuple[Any, ...]) -> None:
    kind, *args = step
    if kind == "publish":
        await world.publish(*args)
    elif kind == "subscribe":
        await world.subscribe(*args)
    elif kind == "read":
        world.read(*args)
    elif kind == "drop":
        await world.drop(*args)
    elif kind == "resume":
        await world.resume(*args)
    elif kind == "yield":
        for _ in range(args[0]):
            await trio.lowlevel.checkpoint()
    elif kind == "pause":
        await trio.testing.wait_all_tasks_blocked()
    else:
        raise AssertionError(step)


def check(world: World, stored: dict[str, list[dict[str, Any]]]) -> None:
    for session_id in SESSIONS:
        published = world.published[session_id]
        assert [e["event_id"] for e in stored[session_id]] == list(range(1, len(published) + 1))
        assert stored[session_id] == [published[i] for i in sorted(published)]
    for number, sub in enumerate(world.subscribers):
        assert sub.start is not None
        ids = [e.event_id for e in sub.received]
        expected = list(range(sub.start + 1, world.last(sub.session_id) + 1))
        assert ids == expected, f"subscriber {number} from {sub.start}"
        published = world.published[sub.session_id]
        assert [e.to_dict() for e in sub.received] == [published[i] for i in ids]


def _settings(test: Any) -> Any:
    configured = settings(
        max_examples=EXAMPLES,
        deadline=None,
        derandomize=SEED is None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    )(test)
    return seed(int(SEED))(configured) if SEED is not None else configured


@_settings
@given(program=programs, limit=limits)
async def test_every_subscriber_gets_every_event_once_in_order(
    tmp_path_factory: Any, program: list[tuple[Any, ...]], limit: dict[str, int]
) -> None:
    url = f"sqlite:///{tmp_path_factory.mktemp('log') / 'log.db'}"
    detached = [0]
    with (
        mock.patch.object(EventBus, "_deliver", _counting_detaches(detached)),
        mock.patch.object(subscription_module, "REPLAY_PAGE", limit["page"]),
        mock.patch.object(bus_module, "_SUBSCRIBER_BUFFER", limit["buffer"]),
        mock.patch.object(bus_module, "_QUEUE_SIZE", limit["queue"]),
        trio.fail_after(30),
    ):
        await make_sessions(url)
        world = await run_program(url, program)
        async with open_store(url) as store:
            stored = {s: await store.read_events(s, 0, 100_000) for s in SESSIONS}
    check(world, stored)
    # What the program exercised (``--hypothesis-show-statistics`` shows the spread).
    note(f"restarts: {sum(step[0] == 'restart' for step in program)}")
    note(f"subscribers: {len(world.subscribers)}")
    note("a slow subscriber was detached" if detached[0] else "no subscriber detached")
    received = sum(len(sub.received) for sub in world.subscribers)
    note("events received: " + ("0" if not received else "1-19" if received < 20 else "20+"))


def _counting_detaches(counter: list[int]) -> Any:
    """``EventBus._deliver``, counting the subscribers it detaches (too slow)."""
    deliver = EventBus._deliver

    def counting(self: EventBus, event: Event) -> None:
        before = len(self._live.get(event.session_id, ()))
        deliver(self, event)
        counter[0] += before - len(self._live.get(event.session_id, ()))

    return counting


def test_the_property_sees_a_subscription_that_loses_an_event(tmp_path: Path) -> None:
    """The check is not vacuous: a subscriber that skipped an event fails it."""
    world = World()
    world.published["conv_a"] = {
        i: OutputTextDelta(response_id="r", item_id="i", delta=str(i))
        .stamped(session_id="conv_a", event_id=i, created_at=0.0)
        .to_dict()
        for i in (1, 2, 3)
    }
    sub = Subscriber("conv_a", 0, start=0)
    from omnigent.model import event_from_dict

    sub.received = [event_from_dict(world.published["conv_a"][i]) for i in (1, 3)]
    world.subscribers.append(sub)
    stored = {"conv_a": [world.published["conv_a"][i] for i in (1, 2, 3)], "conv_b": []}
    try:
        check(world, stored)
    except AssertionError:
        return
    raise AssertionError("the check let a lost event through")
