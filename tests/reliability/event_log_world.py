"""The event-log property's world: programs of operations, their subscribers, the check.

A *program* (drawn by hypothesis, see :data:`programs`) is a list of operations on two
sessions: ``publish`` (one at a time or together, as ``publish_now`` does),
``subscribe`` at an ``after`` (or live only), ``read`` some events, ``drop`` a
subscriber (its task cancelled wherever it is, as a client that goes away),
``resume`` it from the last event it received, ``yield`` a few checkpoints, ``pause``
until every task is blocked, and ``restart`` (every subscriber dropped, the
'process' closed and opened again on the same database).

A *process* is what serves subscribers: the bus itself (:class:`BusProcess`) or a
real HTTP server's SSE route (:class:`HttpProcess`). :func:`run_program` runs a
program on one, interleaved as drawn — a publish does not wait for subscribers, a
read does not wait for its events — then has every subscriber resume and read to
the present, and :func:`check` judges what each received.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, Protocol

import attrs
import httpx
import trio
import trio.testing
from hypothesis import strategies as st

from omnigent.core.bus import EventBus
from omnigent.model import Event, OutputTextDelta, event_from_dict
from omnigent.stores import open_store

from ..http_helpers import SSEReader
from ..test_store import session_row

MAX_SUBSCRIBERS = 6


def operations(live: bool) -> st.SearchStrategy[list[tuple[Any, ...]]]:
    """Programs; ``live``: subscribers may also join live only (``after=None``)."""
    session = st.integers(0, 1)
    subscriber = st.integers(0, MAX_SUBSCRIBERS - 1)
    after = st.none() | st.integers(0, 60) if live else st.integers(0, 60)
    publish = st.tuples(st.just("publish"), session, st.integers(1, 20), st.booleans())
    subscribe = st.tuples(st.just("subscribe"), session, after)
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
    return st.builds(
        lambda *parts: [step for part in parts for step in part],
        st.lists(subscribe, min_size=1, max_size=3),
        st.lists(publish, min_size=1, max_size=3),
        st.lists(operation, min_size=8, max_size=60),
    )


class Process(Protocol):
    """What serves one run of the program between restarts."""

    @property
    def bus(self) -> EventBus: ...

    def open_events(
        self, session_id: str, after: int | None
    ) -> AbstractAsyncContextManager[tuple[int, Any]]:
        """A subscription: the id it starts after, and an object with ``__anext__``."""
        ...


@attrs.frozen
class BusProcess:
    """Subscribers on the bus itself (``EventBus.subscribe``)."""

    bus: EventBus

    @asynccontextmanager
    async def open_events(self, session_id: str, after: int | None) -> AsyncIterator[Any]:
        async with self.bus.subscribe(session_id, after) as events:
            yield events.last_event_id, events


@attrs.frozen
class HttpProcess:
    """Subscribers on ``GET /v1/sessions/{id}/stream`` of a real server (loopback).

    A resume sends ``Last-Event-ID`` for an odd ``after`` and ``?after=`` for an even
    one, so both spellings are exercised.
    """

    bus: EventBus
    client: httpx.AsyncClient

    @asynccontextmanager
    async def open_events(self, session_id: str, after: int | None) -> AsyncIterator[Any]:
        assert after is not None, "an HTTP client names where it resumes"
        url = f"/v1/sessions/{session_id}/stream"
        options: dict[str, Any] = {"params": {"after": after}}
        if after % 2:
            options = {"headers": {"Last-Event-ID": str(after)}}
        async with self.client.stream("GET", url, timeout=None, **options) as response:
            assert response.status_code == 200, response.status_code
            reader = SSEReader(response)
            try:
                yield after, _Frames(reader)
            finally:
                await reader.aclose()


class _Frames:
    """The events of an SSE stream; each frame's ``id`` and ``event`` must match its data."""

    def __init__(self, reader: SSEReader) -> None:
        self._reader = reader

    async def __anext__(self) -> Event:
        frame = await self._reader.next()
        if frame is None:
            raise StopAsyncIteration
        assert frame.id == frame.data["event_id"] and frame.event == frame.data["type"], frame
        return event_from_dict(frame.data)


@attrs.define(eq=False)
class Subscriber:
    """A client of one session: its connections come and go; what it got stays."""

    session_id: str
    asked_after: int | None
    start: int | None = None  # the id it was served from (fixed on first connect)
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

    def nudge(self) -> None:
        """Wake whoever waits on this subscriber's progress."""
        self.progress.set()
        self.progress = trio.Event()


class World:
    """The program's state: the current process, what was published, the subscribers."""

    def __init__(self, sessions: Sequence[str]) -> None:
        self.sessions = tuple(sessions)
        self.process: Process | None = None
        self.connections: trio.Nursery | None = None
        self.published: dict[str, dict[int, dict[str, Any]]] = {s: {} for s in sessions}
        self.subscribers: list[Subscriber] = []
        self.counter = 0

    def last(self, session_id: str) -> int:
        return max(self.published[session_id], default=0)

    async def apply(self, step: tuple[Any, ...]) -> None:
        kind, *args = step
        if kind == "publish":
            await self.publish(*args)
        elif kind == "subscribe":
            await self.subscribe(*args)
        elif kind == "read":
            self.read(*args)
        elif kind == "drop":
            await self.drop(*args)
        elif kind == "resume":
            await self.resume(*args)
        elif kind == "yield":
            for _ in range(args[0]):
                await trio.lowlevel.checkpoint()
        elif kind == "pause":
            await trio.testing.wait_all_tasks_blocked()
        else:
            raise AssertionError(step)

    async def publish(self, index: int, count: int, together: bool) -> None:
        assert self.process is not None
        bus, session_id = self.process.bus, self.sessions[index]
        events = []
        for _ in range(count):
            self.counter += 1
            events.append(OutputTextDelta(response_id="r", item_id="i", delta=f"d{self.counter}"))
        if together:
            stamped = await bus.publish_now(session_id, *events)
        else:
            stamped = [await bus.publish(session_id, e) for e in events]
        for event in stamped:
            assert event.event_id not in self.published[session_id], "an id was reused"
            self.published[session_id][event.event_id] = event.to_dict()

    async def subscribe(self, index: int, after: int | None) -> None:
        if len(self.subscribers) == MAX_SUBSCRIBERS:
            return
        session_id = self.sessions[index]
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
        assert self.process is not None
        try:
            with trio.CancelScope() as scope:
                sub.scope = scope
                async with self.process.open_events(sub.session_id, after) as (start, events):
                    if sub.start is None:
                        sub.start = sub.wanted = start
                    task_status.started()
                    while True:
                        while sub.last_id < sub.wanted:
                            sub.received.append(await events.__anext__())
                            sub.nudge()
                        sub.nudge()  # caught up with what it was told to read
                        await sub.progress.wait()
        finally:
            sub.scope = None
            sub.gone.set()

    def read(self, index: int, count: int) -> None:
        if index < len(self.subscribers) and (sub := self.subscribers[index]).connected:
            sub.wanted = min(max(sub.wanted, sub.last_id) + count, self.last(sub.session_id))
            sub.nudge()

    async def drop(self, index: int) -> None:
        if index < len(self.subscribers) and (scope := self.subscribers[index].scope) is not None:
            scope.cancel()
            await self.subscribers[index].gone.wait()

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
            sub.nudge()
        for sub in self.subscribers:
            while sub.last_id < self.last(sub.session_id):
                await sub.progress.wait()


async def run_program(
    open_process: Callable[[], AbstractAsyncContextManager[Process]],
    sessions: Sequence[str],
    program: list[tuple[Any, ...]],
) -> World:
    """Run ``program``, a process per stretch between restarts; the world it left."""
    world = World(sessions)
    steps = iter(program)
    finished = False
    while not finished:
        async with open_process() as process, trio.open_nursery() as connections:
            world.process, world.connections = process, connections
            for step in steps:
                if step[0] == "restart":
                    break
                await world.apply(step)
            else:
                finished = True
                await world.read_to_the_end()
            await world.drop_all()
    return world


def check(world: World, stored: dict[str, list[dict[str, Any]]]) -> None:
    """The store holds what was published; each subscriber got each event once, in order."""
    for session_id in world.sessions:
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


@asynccontextmanager
async def open_bus_process(url: str) -> AsyncIterator[BusProcess]:
    """The store and the bus's writer, closed as a shutdown closes them."""
    async with open_store(url) as store, trio.open_nursery() as services:
        bus = EventBus(store)
        await services.start(bus.run)
        try:
            yield BusProcess(bus)
        finally:
            with trio.CancelScope(shield=True):
                await bus.close()
                await bus.drained.wait()


async def make_sessions(url: str, ids: Sequence[str]) -> None:
    """Session rows for the bus-level program (the bus needs nothing else)."""
    async with open_store(url) as store:
        for session_id in ids:
            await store.insert_session(session_row(session_id))
