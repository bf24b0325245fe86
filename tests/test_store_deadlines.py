"""Store calls keep their deadlines (issue 22, defect 1), on both stores.

Every store call used to wait for its worker thread shielded, reads included, so a
``move_on_after`` around one did nothing: ``Runtime.health()`` answered "ok" after
6 s on a slow store, the lease renewer's timeout could not fire, and a write held up
by a lock was waited on for as long as the lock was held. Now a read is cancellable
(its thread's result is abandoned, its statement interrupted), and a write is waited
on through a cancel only until the store's timeout, then reported as
:class:`~omnigent.errors.StoreTimeout`. Each test fails on the code before the fix.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import outcome
import psycopg
import pytest
import trio
import trio.lowlevel

import omnigent
from omnigent.errors import StoreTimeout
from omnigent.model import OutputTextDelta
from omnigent.stores import Store, StoredEvent, is_postgres_url, open_store, parse_sqlite_url
from omnigent.stores._sqlite_commit import GroupCommit, WriteJob
from omnigent.testing import collect_turn, probe, scripted_agent

from .conftest import statuses
from .test_nothing_lost import assert_gap_free, stored_log
from .test_store import event, message, session_row

# A read that never ends on its own: only an interrupt (SQLite) or a server-side
# cancel (PostgreSQL) stops it.
ENDLESS = {
    "sqlite": "WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r) "
    "SELECT count(*) FROM r",
    "postgres": "SELECT pg_sleep(600)",
}


def kind(url: str) -> str:
    return "postgres" if is_postgres_url(url) else "sqlite"


@contextmanager
def held_lock(url: str) -> Iterator[None]:
    """Another connection holds what every write needs until the block ends.

    SQLite: the database's write lock. PostgreSQL: the ``items`` table, exclusively.
    """
    if kind(url) == "sqlite":
        path = parse_sqlite_url(url)
        assert path is not None
        import sqlite3

        other = sqlite3.connect(path, isolation_level=None)
        other.execute("BEGIN IMMEDIATE")
        try:
            yield
        finally:
            other.execute("ROLLBACK")
            other.close()
        return
    with psycopg.connect(url) as other:
        other.execute("LOCK TABLE items IN ACCESS EXCLUSIVE MODE")
        try:
            yield
        finally:
            other.rollback()


async def test_a_cancelled_read_returns_at_once_and_gives_its_connection_back(
    db_url: str,
) -> None:
    """Regression: ``move_on_after`` around a read waited for the read to end."""
    endless = ENDLESS[kind(db_url)]
    with trio.fail_after(30):
        async with open_store(db_url) as store:
            await store.insert_session(session_row("s1"))
            # More reads than either store has connections: each one the cancel
            # abandoned must have been interrupted, or the pool runs dry.
            for _ in range(10):
                began = trio.current_time()
                with trio.move_on_after(0.1) as deadline:
                    await store._sql_read(lambda c: c.execute(endless).fetchone())  # type: ignore[attr-defined]
                assert deadline.cancelled_caught
                assert trio.current_time() - began < 1.5
            session = await store.get_session("s1")
            assert session is not None and session.id == "s1"


async def test_a_write_held_up_by_a_lock_is_reported_within_the_store_timeout(
    db_url: str,
) -> None:
    """Regression: a write waited as long as another connection held the lock (SQLite:
    its 30 s busy timeout, then a bare ``OperationalError``; PostgreSQL: forever)."""
    with trio.fail_after(30):
        async with open_store(db_url, timeout=1.0) as store:
            await store.insert_session(session_row("s1"))
            with held_lock(db_url):
                began = trio.current_time()
                with pytest.raises(StoreTimeout) as caught:
                    await store.put_items("s1", [message("m1")])
                took = trio.current_time() - began
            assert took < 2.5, took
            assert caught.value.status == 503 and caught.value.code == "store_timeout"
            assert caught.value.location == store.location
            # Held up by a lock: nothing was written, and the store says so.
            assert not caught.value.unknown, caught.value
            assert (await store.list_items("s1")).rows == []
            await store.put_items("s1", [message("m1")])  # the store is usable again
            assert [i["id"] for i in (await store.list_items("s1")).rows] == ["m1"]


async def test_a_cancelled_write_still_completes_within_the_timeout(db_url: str) -> None:
    """A write is shielded (bounded): the cancel is seen after it is written."""
    with trio.fail_after(30):
        async with open_store(db_url) as store:
            await store.insert_session(session_row("s1"))
            written = False
            with trio.CancelScope() as scope:
                scope.cancel()
                await store.put_items("s1", [message("m1")])
                written = True
                await trio.lowlevel.checkpoint()  # the cancel is seen here
            assert written and scope.cancelled_caught
            assert [i["id"] for i in (await store.list_items("s1")).rows] == ["m1"]


async def test_an_event_batch_written_twice_is_recognised(db_url: str) -> None:
    """A retry of a batch whose first write did commit (its answer came too late) is
    a success, not a conflict; other content under a stored id still is one."""
    with trio.fail_after(30):
        async with open_store(db_url) as store:
            await store.insert_session(session_row("s1"))
            batch = [event("s1", 1), event("s1", 2, "session.status", status="running")]
            await store.append_events(batch)
            await store.append_events(batch)
            assert await store.max_event_id("s1") == 2
            assert [e["event_id"] for e in await store.read_events("s1", after=0)] == [1, 2]
            with pytest.raises(Exception):  # noqa: B017 - each store's own integrity error
                await store.append_events([event("s1", 2, "other")])


# -- the runtime -----------------------------------------------------------------------


@contextmanager
def hung_database(url: str) -> Iterator[None]:
    """The database server and every backend of the database stopped (``SIGSTOP``) until
    the block ends: a server that hangs, as one that is swapping or on a dead disk does —
    its connections answer nothing and a new one is never accepted."""
    with psycopg.connect(url, autocommit=True) as c:
        rows = c.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
            "AND pid <> pg_backend_pid()"
        ).fetchall()
        data = c.execute("SELECT current_setting('data_directory')").fetchone()
    assert data is not None
    postmaster = int((Path(data[0]) / "postmaster.pid").read_text().split()[0])
    pids = [postmaster, *(int(r[0]) for r in rows)]
    assert len(pids) > 1
    for pid in pids:
        os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        for pid in pids:
            os.kill(pid, signal.SIGCONT)


async def test_health_answers_within_its_bound_when_the_database_hangs(pg_url: str) -> None:
    """Regression: ``health()`` (documented to answer within 2 s) waited for the store's
    ping however long it took, and then said "ok"."""
    with trio.fail_after(30):
        async with omnigent.open_runtime(pg_url) as rt:
            assert (await rt.health()).status == "ok"
            with hung_database(pg_url):
                began = trio.current_time()
                health = await rt.health()
                took = trio.current_time() - began
            assert health.status == "unavailable"
            assert took < 3.0, took
            with trio.fail_after(10):
                while (await rt.health()).status != "ok":  # the server answers again
                    await trio.sleep(0.05)


async def test_the_lease_renewer_gives_up_a_heartbeat_the_database_holds_up(
    pg_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Regression: the renewer's ``move_on_after(ttl / 3)`` could not fire, so a
    heartbeat stuck on a lock kept it from noticing that its leases were running out."""
    caplog.set_level(logging.WARNING)
    ttl = 1.5
    spec = scripted_agent("slow", script=[{"say": "started"}, {"sleep": 30}])
    with trio.fail_after(30):
        async with omnigent.open_runtime(pg_url, server_id="a", lease_ttl=ttl) as rt:
            session = (await rt.create_session((await rt.create_agent(spec)).id)).id
            async with rt.subscribe(session) as events:
                await rt.send_message(session, "go")
                async for seen in events:
                    if isinstance(seen, OutputTextDelta):
                        break  # the turn runs: its tree's lease is held here
            other = await trio.to_thread.run_sync(psycopg.connect, pg_url)
            try:
                # The heartbeat updates this row first: it waits on the lock.
                await trio.to_thread.run_sync(
                    other.execute, "SELECT 1 FROM servers WHERE name = 'a' FOR UPDATE"
                )
                began = trio.current_time()
                with trio.fail_after(ttl * 3):
                    while "renewals failed for most of the lease" not in caplog.text:
                        await trio.sleep(0.02)
                assert trio.current_time() - began >= ttl * 0.5
            finally:
                await trio.to_thread.run_sync(other.rollback)
                await trio.to_thread.run_sync(other.close)


async def test_an_event_batch_whose_write_answered_too_late_is_not_lost(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A write of unknown outcome (it committed, but after the store's timeout) is
    written again by the event writer, recognised as written, and delivered once —
    never reported lost, never stored twice."""
    caplog.set_level(logging.WARNING)
    monkeypatch.setattr("omnigent.core.bus._persist._UNREACHABLE_DELAY", 0.0)
    async with omnigent.open_runtime(db=f"sqlite:///{tmp_path / 'a.db'}") as rt:
        session = (
            await rt.create_session(
                (await rt.create_agent(scripted_agent(script=[{"say": "x"}]))).id
            )
        ).id
        store: Store = probe(rt).store
        original = store.append_events
        late: list[int] = []

        async def committed_late(events: list[StoredEvent], **options: Any) -> None:
            await original(events, **options)
            if not late:
                late.append(len(events))
                raise StoreTimeout(store.location, 1.0, unknown=True)

        monkeypatch.setattr(store, "append_events", committed_late)
        with trio.fail_after(10):
            async with rt.subscribe(session, after=0) as events:
                await rt.send_message(session, "go")
                turn = await collect_turn(events)
        assert late
        assert statuses(turn) == ["running", "idle"]
        stored = await stored_log(rt, session)
        assert_gap_free(stored)
        assert [e.to_dict() for e in turn] == stored
    assert "dropping" not in caplog.text
    assert "did not answer" in caplog.text


async def test_a_write_given_up_at_its_deadline_calls_no_on_committed(caplog: Any) -> None:
    """``on_committed`` is the caller's fast path: once the caller gave up (and will
    write again), a late commit must not call it — the retry's would deliver twice."""
    release = threading.Event()

    def run(jobs: list[WriteJob]) -> list[Any]:
        release.wait(5)
        return [outcome.Value(None) for _ in jobs]

    commits = GroupCommit(run)
    called: list[str] = []
    late = commits.submit(lambda c: None, lambda: called.append("late"))
    assert commits.give_up(late)  # it had started: it runs to its end in its thread
    on_time = commits.submit(lambda c: None, lambda: called.append("on time"))
    with trio.fail_after(5):
        release.set()
        await late.done.wait()
        await on_time.done.wait()
    assert called == ["on time"]
    assert "given up at its deadline has been committed since" in caplog.text
