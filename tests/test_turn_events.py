"""The turn stream's iterator (:class:`TurnEvents`): cancel-safe, over in-memory doubles."""

from __future__ import annotations

from typing import Any

import pytest
import trio

from omnigent.core.session._turn_stream import TurnEvents
from omnigent.model import Event, OutputTextDelta, ResponseCompleted, SessionStatusChanged
from omnigent.model._events import ResponseInfo

ITEM = "item_1"


def completed(response_id: str, event_id: int) -> Event:
    info = ResponseInfo(id=response_id, status="completed")
    return ResponseCompleted(response=info).stamped(
        session_id="conv_1", event_id=event_id, created_at=1.0
    )


def delta(text: str, event_id: int) -> Event:
    event = OutputTextDelta(response_id="resp_2", item_id="msg_1", delta=text)
    return event.stamped(session_id="conv_1", event_id=event_id, created_at=1.0)


class Events:
    """A subscription double: ``events`` in order, then waits (nothing more at hand)."""

    session_id = "conv_1"

    def __init__(self, events: list[Event]) -> None:
        self._events = list(events)
        self.taken = 0

    async def __anext__(self) -> Event:
        if not self._events:
            await trio.sleep_forever()
        self.taken += 1
        return self._events.pop(0)

    async def next_ready(self) -> Event | None:
        await trio.lowlevel.checkpoint()
        if not self._events:
            return None
        self.taken += 1
        return self._events.pop(0)


class Store:
    """``item_taken_by`` answers ``taken_by``; while ``hold`` is set, each read blocks
    until cancelled (counted in ``asked``)."""

    def __init__(self, taken_by: str | None) -> None:
        self.taken_by = taken_by
        self.hold = False
        self.asked = 0
        self.reading = trio.Event()

    async def item_taken_by(self, session_id: str, item_id: str) -> str | None:
        assert (session_id, item_id) == ("conv_1", ITEM)
        self.asked += 1
        if self.hold:
            self.reading.set()
            await trio.sleep_forever()
        return self.taken_by


def turn_events(events: Events, store: Store, watched: dict[str, str | None]) -> TurnEvents:
    return TurnEvents(events, ITEM, watched=watched, store=store)  # type: ignore[arg-type]


async def cancelled_in_store_read(turn: TurnEvents, store: Store, *, wait: bool) -> None:
    """Call ``turn`` and cancel the call while it waits for its store read."""
    store.hold, store.reading = True, trio.Event()
    async with trio.open_nursery() as nursery:

        async def call() -> Any:
            return await (turn.__anext__() if wait else turn.next_ready())

        nursery.start_soon(call)
        await store.reading.wait()
        nursery.cancel_scope.cancel()
    store.hold = False


@pytest.mark.parametrize("wait", [True, False])
async def test_a_cancel_in_the_end_of_turn_check_loses_nothing(wait: bool) -> None:
    """Regression: the turn stream was an async generator, finalized by a cancel.

    The message was taken by a turn on another server (``resp_2``, known only to the
    store). An earlier turn's end (``resp_1``) and ``resp_2``'s own are each checked in
    the store; a cancel during either check loses no event and repeats none, and the
    stream still ends right after ``resp_2``'s terminal event.
    """
    events = Events([completed("resp_1", 1), delta("a", 2), completed("resp_2", 3), delta("x", 4)])
    store = Store(taken_by="resp_2")
    turn = turn_events(events, store, {ITEM: None})
    with trio.fail_after(5):
        assert await turn.__anext__() == completed("resp_1", 1)
        await cancelled_in_store_read(turn, store, wait=wait)
        assert await turn.__anext__() == delta("a", 2)  # resp_1's check ran again
        assert await turn.__anext__() == completed("resp_2", 3)
        await cancelled_in_store_read(turn, store, wait=wait)
        with pytest.raises(StopAsyncIteration):
            await turn.__anext__()
        with pytest.raises(StopAsyncIteration):
            await turn.next_ready()
    assert store.asked == 4  # both checks, each once cancelled and once answered
    assert events.taken == 3  # nothing past the end was taken


async def test_next_ready_takes_only_what_is_at_hand() -> None:
    events = Events([delta("a", 1), completed("resp_2", 2)])
    store = Store(taken_by=None)
    turn = turn_events(events, store, {ITEM: "resp_2"})  # taken by a local turn
    with trio.fail_after(5):
        assert await turn.next_ready() == delta("a", 1)
        assert await turn.next_ready() == completed("resp_2", 2)
        with pytest.raises(StopAsyncIteration):
            await turn.next_ready()
    assert store.asked == 0  # the local answer needs no store read


async def test_a_dropped_message_ends_with_the_terminal_status() -> None:
    cancelled = SessionStatusChanged(status="cancelled").stamped(
        session_id="conv_1", event_id=2, created_at=1.0
    )
    events = Events([completed("resp_1", 1), cancelled, delta("later", 3)])
    turn = turn_events(events, Store(taken_by=None), {ITEM: ""})  # a stop dropped it
    with trio.fail_after(5):
        assert [event async for event in turn] == [completed("resp_1", 1), cancelled]
        with pytest.raises(StopAsyncIteration):
            await turn.next_ready()
    assert events.taken == 2


async def test_nothing_at_hand_is_none_and_the_next_wait_resumes() -> None:
    events = Events([delta("a", 1)])
    turn = turn_events(events, Store(taken_by=None), {ITEM: None})
    with trio.fail_after(5):
        assert await turn.next_ready() == delta("a", 1)
        assert await turn.next_ready() is None
        with trio.move_on_after(0.01) as waited:
            await turn.__anext__()
        assert waited.cancelled_caught
        events._events.append(completed("resp_2", 2))
        assert await turn.__anext__() == completed("resp_2", 2)
