"""A session's snapshot shows a status and a ``last_event_id`` that belong together.

A client reads a snapshot, then follows the session's stream after its
``last_event_id`` (the Python client's ``events()``, ACP's ``session/load``): the
snapshot's status must be the status as of that id. Regression: ``current`` read the
bus's newest id before the row, and took the status from the row when the bus had let
go of the session meanwhile — a ``session.status`` stored while the row was being read
was counted in ``last_event_id`` and missing from ``status``, so the client, following
after it, never heard of it (a session shown ``running`` for ever).

The store is real (a SQLite file; the suite's PostgreSQL, as a cluster member, where
``last_event_id`` missed the event altogether once the tree was let go); its
``append_events`` and ``get_session`` are held at a gate, so the write lands exactly
while the row is being read.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import trio

import omnigent
from omnigent.model import SessionSnapshot, SessionStatusChanged
from omnigent.stores import SessionRow, StoredEvent
from omnigent.testing import probe, scripted_agent


def _status_as_of(events: Sequence[dict[str, Any]], event_id: int) -> str:
    """The status the stored log says the session had once ``event_id`` was stored
    (a new session is ``idle``)."""
    status = "idle"
    for event in events:
        if event["event_id"] <= event_id and event["type"] == "session.status":
            status = event["status"]
    return status


async def test_a_status_stored_while_the_row_is_read_is_in_both_or_neither(
    db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # On PostgreSQL as a cluster member: the tree is let go once the event is stored.
    server_id = "s1" if db_url.startswith("postgresql") else None
    with trio.fail_after(20):
        async with omnigent.open_runtime(db_url, home=tmp_path / "home", server_id=server_id) as rt:
            agent = await rt.create_agent(scripted_agent(script=[{"say": "x"}]))
            session = await rt.create_session(agent.id)
            store, bus = probe(rt).store, probe(rt).bus
            before = await rt.get_session(session.id)

            stored_go = trio.Event()
            row_read, row_go = trio.Event(), trio.Event()
            armed = False
            append_events = store.append_events
            get_session = store.get_session

            async def held_append(events: Sequence[StoredEvent], **options: Any) -> None:
                await stored_go.wait()
                await append_events(events, **options)

            async def held_get(session_id: str) -> SessionRow | None:
                row = await get_session(session_id)
                if armed and not row_read.is_set():
                    row_read.set()
                    await row_go.wait()
                return row

            monkeypatch.setattr(store, "append_events", held_append)
            monkeypatch.setattr(store, "get_session", held_get)
            # A cluster member publishes only into a tree it holds: held for the
            # publish, let go while the event is still on its way to the store.
            tenure = await rt._ownership.enter(session.id, session.root_session_id)
            published = await bus.publish(session.id, SessionStatusChanged(status="running"))
            if tenure is not None:
                tenure.release()
            assert published.event_id == before.last_event_id + 1

            snapshots: list[SessionSnapshot] = []
            async with trio.open_nursery() as nursery:

                async def read() -> None:
                    snapshots.append(await rt.get_session(session.id))

                armed = True
                nursery.start_soon(read)
                await row_read.wait()  # the row is read: the status not yet stored
                stored_go.set()
                await bus.flush()  # stored, and the bus let go of the session
                assert bus.known_last_id(session.id) == 0
                row_go.set()

            (snapshot,) = snapshots
            events = await store.read_events(session.id, 0)
            assert snapshot.status == _status_as_of(events, snapshot.last_event_id), (
                snapshot.status,
                snapshot.last_event_id,
            )
            # Nothing published before the call is missed either.
            assert snapshot.last_event_id == published.event_id
            assert snapshot.status == "running"
