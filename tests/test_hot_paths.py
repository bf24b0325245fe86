"""The relay's hot paths: encoded once, delivered in batches, fair, and no store reads.

Each test pins a property the benchmarks (``benchmarks/relay.py``, ``fanout.py``) rely
on, so that it cannot silently regress; none of them measures time.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio
from hypothesis import given
from hypothesis import strategies as st

import omnigent
from omnigent.core.bus import _bus as bus_module
from omnigent.core.bus import _subscription as subscription_module
from omnigent.harnesses.base import TurnContext, TurnRequest
from omnigent.model import OutputTextDelta, SessionStatusChanged
from omnigent.model._events import _ENCODE
from omnigent.testing import RecordingHarness, collect_turn, probe, scripted_agent
from omnigent.transports.http._openapi import openapi_document
from omnigent.transports.http._sse import encode_event
from omnigent.transports.http._sse_pull import PulledSSEBody

from .conftest import statuses


@given(
    text=st.text(),
    ids=st.tuples(st.text(), st.text(), st.text()),
    event_id=st.integers(min_value=0, max_value=2**63),
    created_at=st.one_of(st.floats(allow_nan=False, allow_infinity=False), st.integers(0, 2**40)),
)
def test_a_delta_is_encoded_as_the_generic_encoder_would(
    text: str, ids: tuple[str, str, str], event_id: int, created_at: float
) -> None:
    event = OutputTextDelta(response_id=ids[0], item_id=ids[1], delta=text).stamped(
        session_id=ids[2], event_id=event_id, created_at=created_at
    )
    assert event.to_json() == _ENCODE(event.to_dict())
    assert json.loads(event.to_json()) == event.to_dict()


def test_a_delta_that_json_cannot_carry_is_refused() -> None:
    event = OutputTextDelta(response_id="r", item_id="i", delta="d").stamped(
        session_id="s", event_id=1, created_at=float("nan")
    )
    with pytest.raises(ValueError, match="JSON"):
        event.to_json()


def test_the_kept_encoding_is_not_part_of_the_value() -> None:
    a = SessionStatusChanged(status="idle").stamped(session_id="s", event_id=1, created_at=1.0)
    b = SessionStatusChanged(status="idle").stamped(session_id="s", event_id=1, created_at=1.0)
    a.to_json()
    assert a == b and hash(a) == hash(b) and repr(a) == repr(b)
    assert "_json" not in a.to_dict()
    again = a.stamped(session_id="s", event_id=2, created_at=1.0)
    assert json.loads(again.to_json())["event_id"] == 2  # a copy is encoded afresh
    assert "_json" not in json.dumps(openapi_document())


async def test_every_subscriber_gets_the_text_encoded_once_at_publish(
    rt: omnigent.Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Regression (fan-out): each SSE subscriber encoded every event again."""
    from omnigent.model import _events

    encoded = 0

    def counting(value: Any) -> str:
        nonlocal encoded
        encoded += 1
        return _ENCODE(value)

    monkeypatch.setattr(_events, "_ENCODE", counting)  # the generic path (not deltas)
    agent = await rt.create_agent(scripted_agent(script=[{"say": "a b c d e f g h"}]))
    session = await rt.create_session(agent.id)
    seen: list[list[Any]] = [[] for _ in range(5)]
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            ready = trio.Semaphore(0)

            async def watch(mine: list[Any]) -> None:
                async with rt.subscribe(session.id) as events:
                    ready.release()
                    async for event in events:
                        assert event._json is not None  # encoded before it was delivered
                        mine.append(event)
                        if isinstance(event, SessionStatusChanged) and event.status == "idle":
                            return

            for mine in seen:
                nursery.start_soon(watch, mine)
            for _ in seen:
                await ready.acquire()
            await rt.send_message(session.id, "go")
    first = seen[0]
    assert sum(isinstance(e, OutputTextDelta) for e in first) == 8
    for other in seen[1:]:  # the very same objects, so the very same text
        assert len(other) == len(first) and all(a is b for a, b in zip(other, first, strict=True))
    frames = [encode_event(e) for e in first]
    assert all(
        json.loads(f.split(b"data: ")[1]) == e.to_dict() for f, e in zip(frames, first, strict=True)
    )
    generic = sum(not isinstance(e, OutputTextDelta) for e in first)
    assert encoded == generic  # once per event, at publish, not once per subscriber


async def test_a_turn_stream_reads_nothing_back_from_the_store(rt: omnigent.Runtime) -> None:
    """Regression: the turn's stream attached late and read its first events back."""
    reads = 0
    original = probe(rt).store.read_events

    async def counting(*args: Any, **kwargs: Any) -> Any:
        nonlocal reads
        reads += 1
        return await original(*args, **kwargs)

    probe(rt).store.read_events = counting  # type: ignore[method-assign]
    words = " ".join(f"w{i}" for i in range(500))  # fewer than a subscriber's buffer
    agent = await rt.create_agent(scripted_agent(script=[{"say": words}]))
    session = await rt.create_session(agent.id)
    with trio.fail_after(20):
        async with rt.open_turn_stream(session.id, "go") as (_accepted, events):
            await trio.sleep(0.05)  # the turn streams meanwhile: all must come live
            seen = [event async for event in events]
    assert sum(isinstance(e, OutputTextDelta) for e in seen) == 500
    assert reads == 0


async def test_a_flooding_session_leaves_the_queue_to_the_others(
    rt: omnigent.Runtime,
) -> None:
    """A session streaming from memory faster than the store writes holds at most a
    couple of batches of the writer's queue; another session's turn runs meanwhile."""
    deepest = 0
    other_done = trio.Event()

    async def flood(request: TurnRequest, ctx: TurnContext) -> None:
        nonlocal deepest
        async with ctx.open_message() as message:
            for i in range(30_000):
                await message.write(f"d{i} ")
                deepest = max(deepest, probe(rt).bus.statistics()["queued"])
                if other_done.is_set() and i > 10_000:
                    return

    rt.register_harness("flood", RecordingHarness(flood).factory)
    flooded = (
        await rt.create_session((await rt.create_agent(scripted_agent("f", harness="flood"))).id)
    ).id
    other = (
        await rt.create_session(
            (await rt.create_agent(scripted_agent("o", script=[{"say": "x"}]))).id
        )
    ).id
    with trio.fail_after(30):
        async with rt.subscribe(flooded) as flood_events, rt.subscribe(other) as events:
            await rt.send_message(flooded, "go")
            await rt.send_message(other, "go")
            assert statuses(await collect_turn(events)) == ["running", "idle"]
            other_done.set()
            assert statuses(await collect_turn(flood_events))[-1] == "idle"
    assert deepest <= bus_module.SESSION_IN_FLIGHT + 1


async def test_a_backlog_is_sent_at_once_as_one_chunk(autojump_clock: trio.abc.Clock) -> None:
    """Frames already at hand go out together, and nothing waits for more."""
    frame = b"event: x\ndata: " + b"y" * 1000 + b"\n\n"

    class Backlog:
        def __init__(self) -> None:
            self.frames = [frame] * 64

        @asynccontextmanager
        async def open(self) -> AsyncIterator[None]:
            yield

        async def next_frame(self, *, wait: bool) -> bytes | None:
            if not self.frames:
                if wait:
                    raise StopAsyncIteration
                return None
            return self.frames.pop()

        async def settle(self) -> None:
            pass

    with trio.fail_after(5):
        async with PulledSSEBody(Backlog(), stopping=trio.Event()) as body:
            started = trio.current_time()
            chunk = await body.__anext__()
            assert trio.current_time() == started
            assert chunk == frame * 64


async def test_a_waiting_subscription_holds_no_events(rt: omnigent.Runtime) -> None:
    """Regression (scale): a stream kept its replayed page's and last batch's buffers.

    A thousand idle streams each held a deque (and the events of the last batch) long
    after serving them: while waiting for the next batch a subscription keeps nothing.
    """
    agent = await rt.create_agent(scripted_agent(script=[{"say": "a b c"}]))
    session = await rt.create_session(agent.id)
    with trio.fail_after(10):
        async with rt.subscribe(session.id) as first:
            await rt.send_message(session.id, "one")
            await collect_turn(first)  # a page to replay
        async with rt.subscribe(session.id, after=0) as events:
            waiting = trio.Event()
            async with trio.open_nursery() as nursery:

                async def read_two_turns() -> None:
                    idle = 0
                    async for event in events:
                        if isinstance(event, SessionStatusChanged) and event.status == "idle":
                            idle += 1
                            if idle == 2:
                                waiting.set()  # and on to wait for a next batch

                nursery.start_soon(read_two_turns)
                await rt.send_message(session.id, "two")  # live batches
                await waiting.wait()
                await trio.testing.wait_all_tasks_blocked()  # the reader waits in __anext__
                # The shared empty placeholders: no deque, no batch of its own.
                assert events._replay is subscription_module._EMPTY and events._batch == ()
                nursery.cancel_scope.cancel()
