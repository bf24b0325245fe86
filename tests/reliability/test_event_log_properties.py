"""Property tests of the event log: every subscriber gets every event once, in order.

Hypothesis draws a program (see :mod:`.event_log_world`): publishes on two sessions,
subscribers joining at any ``after`` (or live only), reading some events, dropped at
any point, resuming from the last event they received, pauses, and restarts on the
same SQLite file — and the limits the bus works within: its replay page, each
subscriber's buffer (small ones make the writer detach slow subscribers, which then
catch up from the store) and its queue (small ones make publishers wait for room).
At the end every subscriber resumes and reads to the present; for each, the ids it
received are exactly ``after + 1 … last``, each once, in order, and each event is
the one that was published and stored under that id.

Two layers: the bus itself, and the HTTP SSE route of a real server on loopback
(a subscriber is an HTTP stream resumed with ``Last-Event-ID`` or ``?after=``; a
restart is a new runtime and server on the same file).

Bounded: ``OMNIGENT_PROPERTY_EXAMPLES`` examples for the bus (default 100; the HTTP
layer runs a quarter as many), derandomized — the same programs on every run, so CI
cannot flake on a new one; ``OMNIGENT_PROPERTY_SEED`` explores others — and each
example under ``trio.fail_after``.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any
from unittest import mock

import pytest
import trio
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import event as note
from hypothesis import strategies as st

import omnigent
from omnigent.core.bus import _live as live_module
from omnigent.core.bus import _subscription as subscription_module
from omnigent.core.bus import _writer as writer_module
from omnigent.core.bus._live import LiveSubscribers
from omnigent.model import Event, OutputTextDelta, event_from_dict
from omnigent.stores import open_store
from omnigent.testing import probe

from ..http_helpers import HTTPX_GENERATORS, open_server, scripted
from .event_log_world import (
    HttpProcess,
    Subscriber,
    World,
    check,
    make_sessions,
    open_bus_process,
    operations,
    run_program,
)

EXAMPLES = int(os.environ.get("OMNIGENT_PROPERTY_EXAMPLES", "100"))
SEED = os.environ.get("OMNIGENT_PROPERTY_SEED")
SESSIONS = ("conv_a", "conv_b")

limits = st.fixed_dictionaries(
    {"page": st.integers(1, 6), "buffer": st.integers(1, 6), "queue": st.integers(2, 12)}
)


def bounded(examples: int) -> Any:
    """Hypothesis settings for these tests (see the module docstring)."""

    def apply(test: Any) -> Any:
        configured = settings(
            max_examples=max(examples, 1),
            deadline=None,
            derandomize=SEED is None,
            database=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
        )(test)
        return seed(int(SEED))(configured) if SEED is not None else configured

    return apply


@asynccontextmanager
async def limited(limit: dict[str, int], detached: list[int]) -> AsyncIterator[None]:
    """The bus's limits set to ``limit``; counts the subscribers it detaches."""
    with (
        mock.patch.object(subscription_module, "REPLAY_PAGE", limit["page"]),
        mock.patch.object(live_module, "SUBSCRIBER_BUFFER", limit["buffer"]),
        mock.patch.object(writer_module, "QUEUE_SIZE", limit["queue"]),
        mock.patch.object(LiveSubscribers, "deliver", _counting_detaches(detached)),
    ):
        yield


def _counting_detaches(counter: list[int]) -> Any:
    """``LiveSubscribers.deliver``, counting the subscribers it detaches (too slow)."""
    deliver = LiveSubscribers.deliver

    def counting(self: LiveSubscribers, session_id: str, events: tuple[Event, ...]) -> None:
        before = self.count(session_id)
        deliver(self, session_id, events)
        counter[0] += before - self.count(session_id)

    return counting


def describe(world: World, program: list[tuple[Any, ...]], detached: int) -> None:
    """What the program exercised (``--hypothesis-show-statistics`` shows the spread)."""
    note(f"restarts: {sum(step[0] == 'restart' for step in program)}")
    note(f"subscribers: {len(world.subscribers)}")
    note("a slow subscriber was detached" if detached else "no subscriber detached")
    received = sum(len(sub.received) for sub in world.subscribers)
    note("events received: " + ("0" if not received else "1-19" if received < 20 else "20+"))


@bounded(EXAMPLES)
@given(program=operations(live=True), limit=limits)
async def test_every_bus_subscriber_gets_every_event_once_in_order(
    tmp_path_factory: pytest.TempPathFactory, program: list[tuple[Any, ...]], limit: dict[str, int]
) -> None:
    url = f"sqlite:///{tmp_path_factory.mktemp('log') / 'log.db'}"
    detached = [0]
    with trio.fail_after(30):
        async with limited(limit, detached):
            await make_sessions(url, SESSIONS)
            world = await run_program(lambda: open_bus_process(url), SESSIONS, program)
        async with open_store(url) as store:
            stored = {s: await store.read_events(s, 0, 100_000) for s in SESSIONS}
    check(world, stored)
    describe(world, program, detached[0])


@asynccontextmanager
async def open_http_process(url: str) -> AsyncIterator[HttpProcess]:
    """A runtime on ``url`` served over loopback; its bus publishes, clients stream."""
    async with open_server(url) as server:
        yield HttpProcess(probe(server.runtime).bus, server.client)


async def http_sessions(url: str) -> tuple[str, ...]:
    async with omnigent.open_runtime(url) as rt:
        agent = await rt.create_agent(scripted())
        return tuple([(await rt.create_session(agent.id)).id for _ in range(2)])


@HTTPX_GENERATORS[0]
@HTTPX_GENERATORS[1]
@bounded(EXAMPLES // 4)
@given(program=operations(live=False), limit=limits)
async def test_every_sse_client_gets_every_event_once_in_order(
    tmp_path_factory: pytest.TempPathFactory, program: list[tuple[Any, ...]], limit: dict[str, int]
) -> None:
    url = f"sqlite:///{tmp_path_factory.mktemp('sse') / 'sse.db'}"
    detached = [0]
    with trio.fail_after(60):
        sessions = await http_sessions(url)
        async with limited(limit, detached):
            world = await run_program(lambda: open_http_process(url), sessions, program)
        async with open_store(url) as store:
            stored = {s: await store.read_events(s, 0, 100_000) for s in sessions}
    check(world, stored)
    describe(world, program, detached[0])


def test_the_check_sees_a_subscriber_that_lost_an_event() -> None:
    """The check is not vacuous: a subscriber that skipped an event fails it."""
    world = World(SESSIONS)
    world.published["conv_a"] = {
        i: OutputTextDelta(response_id="r", item_id="i", delta=str(i))
        .stamped(session_id="conv_a", event_id=i, created_at=0.0)
        .to_dict()
        for i in (1, 2, 3)
    }
    sub = Subscriber("conv_a", 0, start=0)
    sub.received = [event_from_dict(world.published["conv_a"][i]) for i in (1, 3)]
    world.subscribers.append(sub)
    stored = {"conv_a": [world.published["conv_a"][i] for i in (1, 2, 3)], "conv_b": []}
    with pytest.raises(AssertionError, match="subscriber 0 from 0"):
        check(world, stored)
