"""The PostgreSQL store's calls run on the Trio thread (issue 32), and stay bounded.

psycopg's sync API runs in a greenlet whose database waits are Trio's
(``omnigent/stores/_pg_bridge.py``); connections come from a pool the Trio thread
keeps (``_pg_pool.py``). These tests hold the properties that design must keep:
no worker thread per call, many calls at once on few connections, a call given up
mid-exchange cancelled on the server and its connection never lent again, a
transaction given up rolled back, and a query larger than the socket's buffers sent
whole. Against the suite's private cluster, one fresh database per test.
"""

from __future__ import annotations

import weakref
from typing import Any

import psycopg
import pytest
import trio

from omnigent.errors import StoreTimeout
from omnigent.stores.postgres import open_postgres_store

from .test_store import event, session_row


def _active(url: str, marker: str) -> list[str]:
    """The statements of other backends now running that contain ``marker``."""
    with psycopg.connect(url, autocommit=True) as c:
        rows = c.execute(
            "SELECT query FROM pg_stat_activity WHERE state = 'active' "
            "AND pid <> pg_backend_pid() AND strpos(query, %s) > 0",
            (marker,),
        ).fetchall()
    return [str(r[0]) for r in rows]


async def test_a_call_runs_no_worker_thread(pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Regression (issue 32): every call hopped to a worker thread and back, ≈ 300 µs of
    this process's CPU under load; now only making a connection does."""
    with trio.fail_after(30):
        async with open_postgres_store(pg_url) as store:
            await store.insert_session(session_row("s1"))  # the pool has a connection
            hops: list[object] = []
            real = trio.to_thread.run_sync

            async def counted(fn: Any, *args: Any, **kwargs: Any) -> Any:
                hops.append(fn)
                return await real(fn, *args, **kwargs)

            monkeypatch.setattr(trio.to_thread, "run_sync", counted)
            for _ in range(20):
                assert (await store.get_session("s1")) is not None
            await store.append_events([event("s1", 1), event("s1", 2)])
            assert [e["event_id"] for e in await store.read_events("s1", 0)] == [1, 2]
            assert hops == []


async def test_many_calls_at_once_share_the_pool(pg_url: str) -> None:
    """More concurrent calls than connections: each waits its turn on the limiter,
    all answer, and the pool never opens more than the calls were allowed."""
    with trio.fail_after(30):
        async with open_postgres_store(pg_url, pool_size=3) as store:
            await store.insert_session(session_row("s1"))
            answers: list[str] = []

            async def read() -> None:
                for _ in range(5):
                    row = await store._read(
                        lambda c: c.execute("SELECT id, pg_sleep(0.001) FROM sessions").fetchone()
                    )
                    answers.append(row[0])

            async with trio.open_nursery() as nursery:
                for _ in range(40):
                    nursery.start_soon(read)
            assert answers == ["s1"] * 200
            with psycopg.connect(pg_url, autocommit=True) as c:
                row = c.execute(
                    "SELECT count(*) FROM pg_stat_activity "
                    "WHERE datname = current_database() AND pid <> pg_backend_pid()"
                ).fetchone()
            assert row is not None and row[0] <= 3


async def test_a_read_given_up_is_cancelled_on_the_server_and_its_connection_closed(
    pg_url: str,
) -> None:
    with trio.fail_after(30):
        async with open_postgres_store(pg_url, pool_size=1) as store:
            await store.insert_session(session_row("s1"))
            pids: list[int] = []

            def endless(conn: Any) -> None:
                pids.append(conn.info.backend_pid)
                conn.execute("SELECT pg_sleep(600) -- given up")

            with trio.move_on_after(0.2):
                await store._read(endless)
            with trio.fail_after(5):
                while _active(pg_url, "given up"):
                    await trio.sleep(0.02)
            # The only connection was discarded: the next call has a new backend.
            assert await store._read(lambda c: c.info.backend_pid) != pids[0]
            assert (await store.get_session("s1")) is not None


async def test_a_transaction_given_up_at_the_timeout_writes_nothing(pg_url: str) -> None:
    with trio.fail_after(30):
        async with open_postgres_store(pg_url, timeout=0.5) as store:
            await store.insert_session(session_row("s1"))

            def write_then_hang(conn: Any) -> None:
                conn.execute("UPDATE sessions SET title = 'changed' WHERE id = 's1'")
                conn.execute("SELECT pg_sleep(600) -- hung writer")

            with pytest.raises(StoreTimeout):
                await store._transaction(write_then_hang)
            with trio.fail_after(5):
                while _active(pg_url, "hung writer"):
                    await trio.sleep(0.02)
            session = await store.get_session("s1")
            assert session is not None and session.title != "changed"


async def test_a_batch_larger_than_the_socket_buffers_is_sent_whole(pg_url: str) -> None:
    """A query of megabytes is flushed while the server already answers (psycopg waits
    for reading *or* writing): the bridge waits for both."""
    with trio.fail_after(30):
        async with open_postgres_store(pg_url) as store:
            await store.insert_session(session_row("s1"))
            big = "ü" * (3 << 20)
            await store.append_events([event("s1", i, delta=f"{big}{i}") for i in (1, 2)])
            stored = await store.read_events("s1", 0)
            assert [e["delta"] for e in stored] == [f"{big}1", f"{big}2"]


async def test_without_greenlet_the_store_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The ``postgres`` extra brings greenlet now (it replaced psycopg-pool): an install
    without it is told which extra to add, not given a bare ImportError."""
    import sys

    from omnigent.errors import BadRequest
    from omnigent.stores import open_store

    monkeypatch.setitem(sys.modules, "greenlet", None)  # import greenlet → ImportError
    for name in (
        "omnigent.stores.postgres",
        "omnigent.stores._pg_bridge",
        "omnigent.stores._pg_pool",
    ):
        monkeypatch.delitem(sys.modules, name, raising=False)
    with pytest.raises(
        BadRequest, match=r"psycopg and greenlet: pip install 'omnigent\[postgres\]'"
    ):
        async with open_store("postgresql://nobody@127.0.0.1:1/none"):
            raise AssertionError("opened")


async def test_statements_reuse_the_spare_cursor_nobody_holds(pg_url: str) -> None:
    """Issue 32: a fresh cursor per statement looked its adapters up again (≈ 20 µs of
    a simple statement); statements whose cursors were dropped run on one cursor."""

    def sequential(c: Any) -> bool:
        assert c.execute("SELECT 0").fetchone() == (0,)
        spare = weakref.ref(c._spare)  # not a reference that holds it
        for n in range(1, 4):
            assert c.execute("SELECT %s::int", (n,)).fetchone() == (n,)
        return spare() is c._spare is not None

    with trio.fail_after(30):
        async with open_postgres_store(pg_url) as store:
            assert await store._read(sequential)


async def test_a_cursor_still_held_is_never_reused(pg_url: str) -> None:
    """A result read after later statements, and a loop over one that runs statements
    inside, keep their own rows: a held cursor is left to its holder."""

    def held(c: Any) -> tuple[Any, ...]:
        first = c.execute("SELECT 'first'")
        second = c.execute("SELECT 'second'")
        loop = []
        for (n,) in c.execute("SELECT generate_series(1, 3)"):
            loop.append((n, c.execute("SELECT %s::int * 10", (n,)).fetchone()[0]))
        closed = c.execute("SELECT 1")
        closed.close()  # a caller may close one: the next statement gets another
        return first.fetchone(), second.fetchone(), loop, c.execute("SELECT 'after'").fetchone()

    with trio.fail_after(30):
        async with open_postgres_store(pg_url) as store:
            first, second, loop, after = await store._read(held)
    assert (first, second, after) == (("first",), ("second",), ("after",))
    assert loop == [(1, 10), (2, 20), (3, 30)]
