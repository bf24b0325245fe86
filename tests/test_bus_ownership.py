"""The event bus where a store can be away or a lease lost (the cluster's failure cases).

Unit tests over the bus with a real SQLite file behind a wrapper that fails on cue:
an unreachable store is retried until it answers (nothing lost, nothing twice), a
write refused for a lost lease is never delivered and tells the ownership, an id
skipped in live delivery sends a subscriber back to the store, and events written
elsewhere are delivered through ``deliver_remote``.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest
import trio

from omnigent.core.bus import EventBus
from omnigent.core.bus import _persist as persist_module
from omnigent.core.cluster._ownership import SoloOwnership
from omnigent.errors import SessionElsewhere, StoreUnavailable
from omnigent.model import OutputTextDelta, event_from_dict
from omnigent.stores import LeaseLost, SessionRow, Store, StoredEvent, open_store


def row(session_id: str) -> SessionRow:
    return SessionRow(
        session_id, "agent_x", 1, "u", None, None, session_id, None, None, {}, "idle", 0, 0, 1.0
    )


class Flaky:
    """A store whose ``append_events`` fails as told, then goes through."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self.failures: list[BaseException] = []
        self.attempts = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    async def append_events(self, events: Sequence[StoredEvent], **options: Any) -> None:
        self.attempts += 1
        if self.failures:
            raise self.failures.pop(0)
        await self._store.append_events(events, **options)


class Refusing(SoloOwnership):
    """Owns everything but ``elsewhere``, and remembers what it was told it lost."""

    def __init__(self) -> None:
        super().__init__("test")
        self.elsewhere: set[str] = set()
        self.lost_ids: list[str] = []

    async def admit(self, session_id: str) -> bool:
        return session_id not in self.elsewhere

    def owns(self, session_id: str) -> bool:
        return session_id not in self.elsewhere

    def lost(self, session_ids: tuple[str, ...]) -> None:
        self.lost_ids.extend(session_ids)


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[Store]:
    async with open_store(f"sqlite:///{tmp_path / 'o.db'}") as opened:
        for sid in ("s1", "s2"):
            await opened.insert_session(row(sid))
        yield opened


async def run_bus(bus: EventBus, nursery: trio.Nursery) -> None:
    await nursery.start(bus.run)


def delta(text: str) -> OutputTextDelta:
    return OutputTextDelta(response_id="resp_1", item_id="item_1", delta=text)


async def test_an_unreachable_store_is_retried_until_it_answers(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(persist_module, "_UNREACHABLE_DELAY", 0.01)
    flaky = Flaky(store)
    flaky.failures = [StoreUnavailable("db")] * 5  # longer than the ordinary retries
    bus = EventBus(flaky)  # type: ignore[arg-type]
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            await run_bus(bus, nursery)
            async with bus.subscribe("s1", after=0) as events:
                for n in range(3):
                    await bus.publish("s1", delta(str(n)))
                got = [await events.__anext__() for _ in range(3)]
            await bus.close()
    assert [e.event_id for e in got] == [1, 2, 3]
    assert [e["event_id"] for e in await store.read_events("s1", 0)] == [1, 2, 3]
    assert flaky.attempts >= 6  # five refusals, then one write or more


async def test_a_write_refused_for_a_lost_lease_is_never_delivered(store: Store) -> None:
    flaky = Flaky(store)
    owners = Refusing()
    bus = EventBus(flaky, owners)  # type: ignore[arg-type]
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            await run_bus(bus, nursery)
            async with bus.subscribe("s1", after=0) as events:
                await bus.publish("s1", delta("kept"))
                assert (await events.__anext__()).event_id == 1
                flaky.failures = [LeaseLost(["s1"])]
                await bus.publish("s1", delta("refused"))
                await bus.flush()
                assert owners.lost_ids == ["s1"]
                # The counter is forgotten: the next holder reads it from the store.
                assert bus.known_last_id("s1") == 0
                owners.elsewhere.add("s1")
                with pytest.raises(SessionElsewhere):
                    await bus.publish("s1", delta("not ours"))
                # What the new holder writes reaches this subscriber, without a gap.
                wire = delta("theirs").stamped(session_id="s1", event_id=2, created_at=1.0)
                written = StoredEvent("s1", 2, wire.type, json.dumps(wire.to_dict()))
                await store.append_events([written])
                assert await bus.last_event_id("s1") == 2  # read, not remembered
                bus.deliver_remote(event_from_dict(wire.to_dict()))
                assert (await events.__anext__()).event_id == 2
            await bus.close()
    assert [e["event_id"] for e in await store.read_events("s1", 0)] == [1, 2]


async def test_a_skipped_id_sends_a_subscriber_back_to_the_store(store: Store) -> None:
    owners = Refusing()
    owners.elsewhere.add("s2")
    bus = EventBus(store, owners)
    wire = [
        {**delta(f"d{n}").stamped(session_id="s2", event_id=n, created_at=1.0).to_dict()}
        for n in (1, 2, 3)
    ]
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            await run_bus(bus, nursery)
            async with bus.subscribe("s2", after=0) as events:
                await store.append_events(
                    [StoredEvent("s2", d["event_id"], d["type"], json.dumps(d)) for d in wire[:1]]
                )
                first = await events.__anext__()
                assert bus.live_position("s2") is not None
                # Another server wrote 2 and 3; the feed delivers only 3 (2 was missed).
                await store.append_events(
                    [StoredEvent("s2", d["event_id"], d["type"], json.dumps(d)) for d in wire[1:]]
                )
                bus.deliver_remote(event_from_dict(wire[2]))
                rest = [await events.__anext__(), await events.__anext__()]
            await bus.close()
    assert [e.event_id for e in [first, *rest]] == [1, 2, 3]
