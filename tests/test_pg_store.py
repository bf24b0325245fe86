"""What only the PostgreSQL store does: migrations, retries, leases, commands, LISTEN.

Against the suite's private cluster (``pg_cluster``), one fresh database per test.
Leases are exercised with TTLs of a second or two, and expiry is waited for on the
database's own clock (``next_expiry``), never with a fixed sleep.
"""

from __future__ import annotations

import json
import os
import socket
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import psycopg
import pytest
import trio
import trio.testing

from omnigent.errors import BadRequest, StoreUnavailable
from omnigent.stores import (
    COMMANDS_CHANNEL,
    EVENTS_CHANNEL,
    CommandRow,
    LeaseLost,
    Notification,
    StoredEvent,
    open_store,
)
from omnigent.stores._pg_schema import MIGRATIONS
from omnigent.stores.postgres import PostgresStore, open_postgres_store, safe_location

from .pg_cluster import PgCluster
from .test_store import event, message, session_row


@asynccontextmanager
async def member(url: str, instance: str, name: str | None = None) -> AsyncIterator[PostgresStore]:
    """A store opened as a cluster member, registered under ``name``."""
    async with open_postgres_store(url, instance=instance) as store:
        assert await store.register_server(name or instance, "host", 1, ttl=30) is None
        yield store


async def wait_expired(store: PostgresStore) -> None:
    """Until every other instance's lease has expired (by the database's clock)."""
    with trio.fail_after(10):
        while (left := await store.next_expiry()) is not None and left > 0:
            await trio.sleep(left + 0.01)
        # next_expiry() is None once only expired leases are left, or none at all.


# -- opening ---------------------------------------------------------------------------


async def test_migrations_apply_once_even_when_servers_start_together(pg_url: str) -> None:
    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            for _ in range(4):
                nursery.start_soon(_open_and_close, pg_url)
        async with open_postgres_store(pg_url) as store:
            versions = await store._run(
                lambda c: [r[0] for r in c.execute("SELECT version FROM omnigent_migrations")]
            )
    assert versions == list(range(1, len(MIGRATIONS) + 1))


async def _open_and_close(url: str) -> None:
    async with open_postgres_store(url):
        pass


async def test_open_store_picks_postgres_by_scheme(pg_url: str) -> None:
    with trio.fail_after(30):
        async with open_store(pg_url) as store:
            assert isinstance(store, PostgresStore)
        async with open_store(pg_url.replace("postgresql://", "postgres://", 1)) as store:
            assert isinstance(store, PostgresStore)


async def test_unreachable_database_is_a_clear_error(pg_cluster: PgCluster) -> None:
    url = f"postgresql://postgres@127.0.0.1:{pg_cluster.port}/no_such_database"
    with trio.fail_after(30), pytest.raises(StoreUnavailable, match="no_such_database"):
        async with open_store(url):
            pass
    with pytest.raises(BadRequest, match="invalid PostgreSQL URL"):
        async with open_store("postgresql://[bad"):
            pass


def test_location_hides_the_password() -> None:
    shown = safe_location("postgresql://bob:s3cret@db.example:5433/prod")
    assert shown == "postgresql://bob@db.example:5433/prod"
    assert "s3cret" not in shown


async def test_a_restarted_server_is_retried_without_losing_a_write(
    pg_cluster: PgCluster, pg_url: str
) -> None:
    with trio.fail_after(60):
        async with open_store(pg_url) as store:
            await store.insert_session(session_row("s1"))
            await store.append_events([event("s1", 1)])
            await trio.to_thread.run_sync(pg_cluster.restart)
            # Every pooled connection is dead now; the next calls reconnect.
            await store.append_events([event("s1", 2), event("s1", 3)])
            assert [e["event_id"] for e in await store.read_events("s1", 0)] == [1, 2, 3]
            assert await store.max_event_id("s1") == 3


async def test_a_repeated_batch_is_recognised_as_written(pg_url: str) -> None:
    async with open_store(pg_url) as store:
        await store.insert_session(session_row("s1"))
        batch = [event("s1", 1), event("s1", 2)]
        await store.append_events(batch)
        await store.append_events(batch)  # a retry after a lost answer: no error, no copy
        assert len(await store.read_events("s1", 0)) == 2


async def test_a_batch_keeps_every_byte_and_each_session_head(pg_url: str) -> None:
    """The batch's arrays go over the wire in binary: text that a text-format array
    would have to quote and escape (quotes, backslashes, braces, commas, ``NULL``,
    newlines, non-ASCII) comes back exactly; ids past 2**31, a status on one session
    and none on the other, and each session's head are kept."""
    awkward = 'a "quoted", {braced} \\ back\\slash, NULL\nnew line, é 漢 🙂'
    async with open_store(pg_url) as store:
        await store.insert_session(session_row("s1"))
        await store.insert_session(session_row("s2"))
        big = 2**31 + 5
        batch = [
            event("s1", big, delta=awkward),
            event("s2", 1, "session.status", status="running", created_at=12.5),
            event("s1", big + 1, delta="NULL"),
            event("s2", 2, delta=""),
        ]
        await store.append_events(batch)
        stored = await store.read_events("s1", 0)
        assert [e["event_id"] for e in stored] == [big, big + 1]
        assert [e["delta"] for e in stored] == [awkward, "NULL"]
        assert [e.data for e in batch[::2]] == [json.dumps(e) for e in stored]
        assert await store.max_event_id("s1") == big + 1
        s2 = await store.get_session("s2")
        assert s2 is not None and (s2.last_event_id, s2.status) == (2, "running")


async def test_a_batch_of_events_does_not_queue_behind_other_calls(pg_url: str) -> None:
    """Regression (issue 32): a batch waited for a pooled connection behind every other
    call — under 200 concurrent turns most of its round trip. With every ordinary
    connection held (one, by a write blocked on a lock), a batch still goes through
    at once on the connections kept for the event writer."""
    with trio.fail_after(30):
        async with (
            open_postgres_store(pg_url, pool_size=1) as store,
            open_postgres_store(pg_url) as other,
        ):
            await store.insert_session(session_row("s1"))
            blocked: list[Any] = []
            with psycopg.connect(pg_url) as locker:
                locker.execute("LOCK TABLE items IN ACCESS EXCLUSIVE MODE")
                async with trio.open_nursery() as nursery:

                    async def write_items() -> None:
                        await store.put_items("s1", [message("m1")])
                        blocked.append("done")

                    nursery.start_soon(write_items)
                    await wait_for_lock_waiter(other)  # the only ordinary connection waits
                    with trio.fail_after(5):
                        await store.append_events([event("s1", 1), event("s1", 2)])
                    assert not blocked
                    assert [e["event_id"] for e in await other.read_events("s1", 0)] == [1, 2]
                    locker.rollback()
            assert blocked == ["done"]


# -- servers and leases ----------------------------------------------------------------


async def test_servers_register_and_list(pg_url: str) -> None:
    with trio.fail_after(30):
        async with member(pg_url, "inst_a", "a") as a, member(pg_url, "inst_b", "b") as b:
            await a.insert_session(session_row("s1"))
            await a.insert_session(session_row("s2", parent_session_id="s1", root_session_id="s1"))
            assert (await a.claim("s1", 30)).instance == "inst_a"
            servers = {s.name: s for s in await b.live_servers()}
            assert set(servers) == {"a", "b"}
            assert (servers["a"].sessions, servers["b"].sessions) == (2, 0)
            assert servers["a"].instance == "inst_a"
            # A second live process may not take the name.
            async with open_postgres_store(pg_url, instance="inst_c") as c:
                left = await c.register_server("a", "host", 2, ttl=30)
                assert left is not None and 25 < left <= 30
            await a.unregister_server()
            assert [s.name for s in await b.live_servers()] == ["b"]
            assert await b.lease_holder("s1") is None


async def test_claim_release_and_holder(pg_url: str) -> None:
    with trio.fail_after(30):
        async with member(pg_url, "inst_a", "a") as a, member(pg_url, "inst_b", "b") as b:
            claim = await a.claim("root1", 30)
            assert (claim.instance, claim.server, claim.taken_from) == ("inst_a", "a", None)
            assert (await a.claim("root1", 30)).instance == "inst_a"  # its own: renewed
            held = await b.claim("root1", 30)
            assert (held.instance, held.server) == ("inst_a", "a")
            holder = await b.lease_holder("root1")
            assert holder is not None and holder.instance == "inst_a"
            await b.release("root1")  # not b's: nothing happens
            assert (await b.lease_holder("root1")) is not None
            await a.release("root1")
            assert await b.lease_holder("root1") is None
            assert (await b.claim("root1", 30)).instance == "inst_b"


async def test_trees_are_claimed_together(pg_url: str) -> None:
    """One call claims several trees (a group of claims, issue 32): each answer under
    its root, the sessions below a tree taken with it, one held elsewhere named."""
    with trio.fail_after(30):
        async with member(pg_url, "inst_a", "a") as a, member(pg_url, "inst_b", "b") as b:
            await a.insert_session(session_row("root1"))
            await a.insert_session(
                session_row("c1", parent_session_id="root1", root_session_id="root1")
            )
            await a.insert_session(
                session_row("c2", parent_session_id="c1", root_session_id="root1")
            )
            await a.insert_session(session_row("root2"))
            await b.claim("root3", 30)
            await a.claim("root1", 30)
            await a.append_events([event("root1", 1), event("root1", 2), event("c1", 1)])
            await a.release("root1")
            claims = await a.claim_all(["root2", "root3", "root1"], 30)
            assert sorted(claims) == ["root1", "root2", "root3"]
            assert (claims["root1"].instance, claims["root1"].sessions) == ("inst_a", ("c1", "c2"))
            assert (claims["root2"].instance, claims["root2"].sessions) == ("inst_a", ())
            assert (claims["root3"].instance, claims["root3"].server) == ("inst_b", "b")
            assert claims["root3"].sessions == ()
            # Each session's newest stored event id, the root's too: its counter's start.
            assert claims["root1"].heads == (("root1", 2), ("c1", 1), ("c2", 0))
            assert claims["root2"].heads == (("root2", 0),)
            assert claims["root3"].heads == ()
            assert (await a.claim("root1", 30)).sessions == ("c1", "c2")  # its own: renewed


def _waits_on_a_lock(url: str, table: str) -> bool:
    """Whether a statement inserting into ``table`` waits on a lock now."""
    with psycopg.connect(url, autocommit=True) as c:
        row = c.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
            "AND strpos(query, %s) > 0",
            (f"INSERT INTO {table}",),
        ).fetchone()
    return row is not None and row[0] > 0


async def test_a_message_is_stored_while_an_event_batch_updates_its_session(
    pg_url: str,
) -> None:
    """A turn's message waits for no event batch of its session: it key-share-locks the
    session's row, which an update of the row's head (not its key) leaves free; a
    delete of the session (``FOR UPDATE``) it still waits for. Regression (issue 32):
    its share lock waited for every batch in flight on the session."""
    with trio.fail_after(30):
        async with open_postgres_store(pg_url, timeout=5.0) as store:
            await store.insert_session(session_row("s1"))
            other = await trio.to_thread.run_sync(psycopg.connect, pg_url)
            try:
                # A batch in flight: the session's head updated, not yet committed.
                await trio.to_thread.run_sync(
                    other.execute, "UPDATE sessions SET last_event_id = 9 WHERE id = 's1'"
                )
                with trio.fail_after(2):
                    await store.put_items("s1", [message("m1")])
                await trio.to_thread.run_sync(other.rollback)
                # A delete under way: the message waits for it, then finds no session.
                await trio.to_thread.run_sync(
                    other.execute, "SELECT 1 FROM sessions WHERE id = 's1' FOR UPDATE"
                )
                await trio.to_thread.run_sync(other.execute, "DELETE FROM sessions WHERE id = 's1'")
                async with trio.open_nursery() as nursery:
                    refused: list[BaseException] = []

                    async def store_message() -> None:
                        try:
                            await store.put_items("s1", [message("m2")])
                        except LookupError as exc:
                            refused.append(exc)

                    nursery.start_soon(store_message)
                    while not await trio.to_thread.run_sync(_waits_on_a_lock, pg_url, "items"):
                        await trio.sleep(0.01)
                    assert refused == []
                    await trio.to_thread.run_sync(other.commit)
                assert len(refused) == 1
            finally:
                await trio.to_thread.run_sync(other.close)


async def test_a_batch_of_claims_waits_holding_no_lease_row(pg_url: str) -> None:
    """Regression (issue 32's batches of claims): a tree with a lease row is claimed
    alone, after the free trees' rows are committed, so a claim waiting on another
    server's lock holds none that server could wait on. (One statement taking both
    waited on the held row holding the new one: a deadlock, one side aborted.)"""

    with trio.fail_after(30):
        async with member(pg_url, "inst_a", "a") as a, member(pg_url, "inst_b", "b") as b:
            await b.claim("root1", 30)
            # b mid-write on its tree: its lease row share-locked, as an event batch does.
            other = await trio.to_thread.run_sync(psycopg.connect, pg_url)
            try:
                await trio.to_thread.run_sync(
                    other.execute, "SELECT 1 FROM leases WHERE root_id = 'root1' FOR SHARE"
                )
                claims: dict[str, Any] = {}
                async with trio.open_nursery() as nursery:

                    async def claim() -> None:
                        claims.update(await a.claim_all(["root0", "root1"], 30))

                    nursery.start_soon(claim)
                    while not await trio.to_thread.run_sync(_waits_on_a_lock, pg_url, "leases"):
                        await trio.sleep(0.01)
                    # b now takes a's new row: committed already, so nobody waits.
                    await trio.to_thread.run_sync(
                        other.execute,
                        "INSERT INTO leases (root_id, instance, server, acquired_at, "
                        "expires_at) VALUES ('root0', 'inst_b', 'b', now(), now()) "
                        "ON CONFLICT (root_id) DO NOTHING",
                    )
                    await trio.to_thread.run_sync(other.commit)
            finally:
                await trio.to_thread.run_sync(other.close)
            assert claims["root0"].instance == "inst_a"
            assert (claims["root1"].instance, claims["root1"].server) == ("inst_b", "b")


async def test_leases_are_released_together(pg_url: str) -> None:
    """One statement releases several trees (a group of let-gos, issue 32): only this
    instance's live leases among them."""
    with trio.fail_after(30):
        async with member(pg_url, "inst_a", "a") as a, member(pg_url, "inst_b", "b") as b:
            for root in ("root1", "root2", "root3"):
                await a.claim(root, 30)
            await b.claim("root4", 30)
            await a.release("root1", "root2", "root4")
            holders = [await b.lease_holder(f"root{n}") for n in range(1, 5)]
            assert [h and h.instance for h in holders] == [None, None, "inst_a", "inst_b"]
            await a.release()  # nothing to release


async def test_an_expired_lease_is_taken_over_and_never_renewed(pg_url: str) -> None:
    with trio.fail_after(30):
        async with member(pg_url, "inst_a", "a") as a, member(pg_url, "inst_b", "b") as b:
            await a.claim("root1", 0.3)
            await a.claim("root2", 30)
            await wait_expired(b)
            assert await b.lease_holder("root1") is None
            assert await a.heartbeat(30) == {"root2"}  # root1 expired: lost for good
            taken = await b.claim_expired(30, limit=10)
            assert [(c.root_id, c.instance, c.server, c.taken_from) for c in taken] == [
                ("root1", "inst_b", "b", "inst_a")
            ]
            assert await b.claim_expired(30, limit=10) == []
            # Claiming an expired lease directly also reports the takeover.
            await a.claim("root3", 0.3)
            await wait_expired(b)
            claim = await b.claim("root3", 30)
            assert (claim.instance, claim.taken_from) == ("inst_b", "inst_a")


async def test_heartbeat_of_a_replaced_instance_is_none(pg_url: str) -> None:
    with trio.fail_after(30):
        async with open_postgres_store(pg_url, instance="old") as old:
            assert await old.register_server("a", "host", 1, ttl=0.3) is None
            async with open_postgres_store(pg_url, instance="new") as new:
                left = await new.register_server("a", "host", 2, ttl=30)
                assert left is not None and left <= 0.3
                await trio.sleep(left + 0.05)  # the database said when it expires
                assert await new.register_server("a", "host", 2, ttl=30) is None
                assert await old.heartbeat(30) is None
                assert await new.heartbeat(30) == set()


async def test_orphaned_roots_are_unfinished_trees_without_a_lease(pg_url: str) -> None:
    async with member(pg_url, "inst_a") as a:
        await a.insert_session(session_row("r1"))
        await a.insert_session(session_row("c1", parent_session_id="r1", root_session_id="r1"))
        await a.insert_session(session_row("r2"))
        await a.update_session("c1", status="running")
        assert await a.orphaned_roots(10) == ["r1"]
        await a.claim("r1", 30)
        assert await a.orphaned_roots(10) == []
        # A message no turn took, or a task left running, is unfinished work too, once
        # it is older than a server handing it over would take.
        await a.put_items("r2", [{"type": "message", "id": "item_1"}], pending=True)
        assert await a.orphaned_roots(10, min_age=60) == []
        assert await a.orphaned_roots(10) == ["r2"]
        await a.insert_session(session_row("r3"))
        await a.add_running_task("r3", "task_1", "sys_os_shell")
        assert sorted(await a.orphaned_roots(10)) == ["r2", "r3"]


# -- fencing ---------------------------------------------------------------------------


async def test_event_writes_are_fenced_by_the_lease(pg_url: str) -> None:
    with trio.fail_after(30):
        async with member(pg_url, "inst_a", "a") as a, member(pg_url, "inst_b", "b") as b:
            for sid in ("mine", "theirs", "free"):
                await a.insert_session(session_row(sid))
            await a.claim("mine", 30)
            await b.claim("theirs", 30)
            with pytest.raises(LeaseLost) as lost:
                await a.append_events([event("mine", 1), event("theirs", 1), event("free", 1)])
            assert lost.value.session_ids == ("free", "theirs")
            assert len(await a.read_events("mine", 0)) == 1
            assert await a.read_events("theirs", 0) == []
            assert await a.read_events("free", 0) == []
            # Once expired, the lease fences its old holder out too.
            await a.claim("short", 0.2)
            await a.insert_session(session_row("short"))
            await wait_expired(b)
            with pytest.raises(LeaseLost):
                await a.append_events([event("short", 1)])


async def test_a_takeover_waits_for_a_write_in_flight(pg_url: str) -> None:
    """A write share-locks the lease row: a takeover waits for it, then sees its events."""
    with trio.fail_after(30):
        async with member(pg_url, "inst_a", "a") as a, member(pg_url, "inst_b", "b") as b:
            await a.insert_session(session_row("s1"))
            await a.claim("s1", 0.5)
            locked, go = trio.Event(), threading.Event()
            token = trio.lowlevel.current_trio_token()

            def write_slowly() -> None:
                # What append_events does in one statement, spread over a transaction.
                with psycopg.connect(pg_url, autocommit=True) as c, c.transaction():
                    c.execute("SELECT 1 FROM leases WHERE root_id = 's1' FOR SHARE")
                    c.execute("INSERT INTO events VALUES ('s1', 1, 'x', '{}')")
                    trio.from_thread.run_sync(locked.set, trio_token=token)
                    go.wait(20)

            async with trio.open_nursery() as nursery:
                nursery.start_soon(trio.to_thread.run_sync, write_slowly)
                await locked.wait()
                await wait_expired(b)
                claimed: list[Any] = []

                async def take() -> None:
                    claimed.append(await b.claim("s1", 30))

                nursery.start_soon(take)
                await wait_for_lock_waiter(b)  # b's claim is blocked on the row lock
                assert not claimed
                go.set()
            assert claimed[0].instance == "inst_b" and claimed[0].taken_from == "inst_a"
            assert await b.max_event_id("s1") == 1


async def wait_for_lock_waiter(store: PostgresStore) -> None:
    def waiting(c: Any) -> int:
        r = c.execute("SELECT count(*) FROM pg_locks WHERE NOT granted").fetchone()
        return int(r[0])

    while not await store._run(waiting):
        await trio.sleep(0.01)


# -- commands and notifications --------------------------------------------------------


async def test_commands_reach_their_target_with_a_notification(pg_url: str) -> None:
    with trio.fail_after(30):
        async with member(pg_url, "inst_a", "a") as a, member(pg_url, "inst_b", "b") as b:
            async with b.open_listener([COMMANDS_CHANNEL]) as notes:
                assert await notes.receive() == Notification("")  # connected
                for n in range(3):
                    command = CommandRow(f"cmd_{n}", "inst_b", "inst_a", "s1", "message", f"{n}")
                    await a.post_command(command)
                await a.post_command(CommandRow("cmd_0", "inst_b", "inst_a", "s1", "dup", ""))
                await a.post_command(CommandRow("cmd_x", "inst_a", "inst_b", "s1", "other", ""))
                assert await notes.receive() == Notification(COMMANDS_CHANNEL, "inst_b")
            taken = await b.take_commands(limit=2)
            assert [(c.id, c.payload) for c in taken] == [("cmd_0", "0"), ("cmd_1", "1")]
            assert [c.id for c in await b.take_commands(limit=10)] == ["cmd_2"]
            assert await b.take_commands(limit=10) == []
            reply = CommandRow("cmd_r", "inst_a", "inst_b", "s1", "reply", "{}", reply_to="cmd_1")
            await b.post_command(reply)
            assert [c.id for c in await a.take_commands(limit=10)] == ["cmd_x", "cmd_r"]


async def test_event_writes_notify_every_listener(pg_url: str) -> None:
    with trio.fail_after(30):
        async with member(pg_url, "inst_a") as a, member(pg_url, "inst_b") as b:
            await a.insert_session(session_row("s1"))
            await a.claim("s1", 30)
            async with b.open_listener([EVENTS_CHANNEL]) as notes:
                assert await notes.receive() == Notification("")
                await a.append_events([event("s1", 1), event("s1", 2)])
                await a.append_events([event("s1", 3)])
                got = [await notes.receive(), await notes.receive()]
            assert [n.payload for n in got] == ["s1:2:inst_a", "s1:3:inst_a"]


async def test_the_listener_reconnects_after_a_restart(pg_cluster: PgCluster, pg_url: str) -> None:
    with trio.fail_after(60):
        async with member(pg_url, "inst_a") as a:
            await a.insert_session(session_row("s1"))
            await a.claim("s1", 60)
            async with a.open_listener([EVENTS_CHANNEL]) as notes:
                assert await notes.receive() == Notification("")
                await trio.to_thread.run_sync(pg_cluster.restart)
                # The listener says it reconnected (what it missed must be re-read) …
                assert await notes.receive() == Notification("")
                # … and hears what comes next.
                await a.append_events([StoredEvent("s1", 1, "x", '{"type": "x"}')])
                assert (await notes.receive()).payload == "s1:1:inst_a"


async def test_garbage_collection_forgets_the_dead(pg_url: str) -> None:
    async with member(pg_url, "inst_a", "a") as a:
        async with open_postgres_store(pg_url, instance="gone") as gone:
            assert await gone.register_server("g", "host", 1, ttl=0.1) is None
        await a.post_command(CommandRow("cmd_1", "gone", "inst_a", "s1", "message", ""))
        await a.post_command(CommandRow("cmd_2", "inst_a", "gone", "s1", "message", ""))
        with trio.fail_after(10):
            while len(await a.live_servers()) > 1:
                await trio.sleep(0.05)
        await a.collect_garbage(max_age=0)
        names = await a._run(lambda c: [r[0] for r in c.execute("SELECT name FROM servers")])
        assert names == ["a"]
        assert [c.id for c in await a.take_commands(10)] == ["cmd_2"]
        left = await a._run(lambda c: [r[0] for r in c.execute("SELECT id FROM commands")])
        assert left == []


def _database_sockets(port: int) -> list[socket.socket]:
    """This process's TCP sockets connected to ``port`` on the loopback (each a dup)."""
    found = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            sock = socket.socket(fileno=os.dup(int(fd)))
        except OSError:
            continue  # not a socket (the dup of a plain file refuses to be one)
        try:
            if sock.family == socket.AF_INET and sock.getpeername() == ("127.0.0.1", port):
                found.append(sock)
                continue
        except OSError:
            pass  # not connected
        sock.close()
    return found


def _keepalive_settings(sock: socket.socket) -> tuple[int, int, int, int, int]:
    return (
        sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE),
        sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE),
        sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL),
        sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT),
        sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT),
    )


async def test_every_connection_notices_a_silent_database(
    pg_cluster: PgCluster, pg_url: str
) -> None:
    # A partition gives no reset: without keepalives a statement abandoned at its
    # deadline would wait on its socket for the system's default of hours, holding its
    # pool slot, and the listener's ping would never return. Every connection — the
    # pool's and the listener's — has them, as the kernel reports its sockets.
    with trio.fail_after(30):
        async with (
            member(pg_url, "inst_a") as store,
            store.open_listener([EVENTS_CHANNEL]) as notes,
        ):
            assert await notes.receive() == Notification("")
            await store.get_session("s_none")  # a pooled connection in use
            sockets = _database_sockets(pg_cluster.port)
            try:
                assert len(sockets) >= 2  # the pool's (at least one) and the listener's
                assert {_keepalive_settings(s) for s in sockets} == {(1, 10, 5, 3, 25000)}
            finally:
                for sock in sockets:
                    sock.close()


async def test_the_url_s_own_connection_settings_win(pg_cluster: PgCluster, pg_url: str) -> None:
    with trio.fail_after(30):
        url = f"{pg_url}?keepalives_idle=42&tcp_user_timeout=9000"
        async with open_postgres_store(url) as store:
            await store.get_session("s_none")
            sockets = _database_sockets(pg_cluster.port)
            try:
                assert sockets
                assert {_keepalive_settings(s) for s in sockets} == {(1, 42, 5, 3, 9000)}
            finally:
                for sock in sockets:
                    sock.close()


@asynccontextmanager
async def _first_read_held(store: PostgresStore) -> AsyncIterator[tuple[list[Any], trio.Event]]:
    """The store's reads counted; the first waits for the event given before it runs."""
    reads: list[Any] = []
    go = trio.Event()
    real = store._read

    async def read(fn: Any) -> Any:
        reads.append(fn)
        if len(reads) == 1:
            await go.wait()
        return await real(fn)

    store._read = read  # type: ignore[method-assign]
    try:
        yield reads, go
    finally:
        store._read = real  # type: ignore[method-assign]


async def test_rows_read_at_the_same_moment_share_a_statement(pg_url: str) -> None:
    """Issue 32: a turn's start reads its session's row and history; reads asked while
    one is on its way go in the next statement together, each answered its own (a
    missing session ``None``), each history decoded for its caller alone."""
    with trio.fail_after(30):
        async with open_postgres_store(pg_url) as store:
            for n in range(4):
                await store.insert_session(session_row(f"s{n}"))
                await store.put_items(f"s{n}", [message(f"m{n}")])
            await store.put_items("s0", [message("waiting")], pending=True)
            rows: dict[str, Any] = {}
            histories: list[Any] = []
            async with _first_read_held(store) as (reads, go), trio.open_nursery() as nursery:

                async def row(session_id: str) -> None:
                    rows[session_id] = await store.get_session(session_id)

                async def history(session_id: str) -> None:
                    page = await store.list_items(session_id, include_pending=False)
                    histories.append(page.rows)

                nursery.start_soon(row, "s0")
                await trio.testing.wait_all_tasks_blocked()
                for session_id in ("s1", "s2", "s3", "missing"):
                    nursery.start_soon(row, session_id)
                for session_id in ("s0", "s0", "s1"):
                    nursery.start_soon(history, session_id)
                await trio.testing.wait_all_tasks_blocked()
                go.set()
            kinds = [getattr(fn, "__qualname__", "").split(".")[-3] for fn in reads]
            # The first row; the other rows together; the first history, sent at once,
            # and the two asked while it was read, together.
            assert sorted(kinds) == ["_read_histories"] * 2 + ["_read_session_rows"] * 2
            assert {k: v and v.id for k, v in rows.items()} == {
                "s0": "s0",
                "s1": "s1",
                "s2": "s2",
                "s3": "s3",
                "missing": None,
            }
            assert sorted(h[0]["id"] for h in histories) == ["m0", "m0", "m1"]
            first, second = (h for h in histories if h[0]["id"] == "m0")
            assert first == second and first[0] is not second[0]  # not shared
            assert all(len(h) == 1 for h in histories)  # the pending message left out


async def test_a_read_sees_what_was_written_before_it_while_a_batch_is_on_its_way(
    pg_url: str,
) -> None:
    """A read never joins a batch already sent: asked after a write, it sees it."""
    with trio.fail_after(30):
        async with open_postgres_store(pg_url) as store:
            await store.insert_session(session_row("s1"))
            seen: list[Any] = []
            async with _first_read_held(store) as (reads, go), trio.open_nursery() as nursery:

                async def write_then_read() -> None:
                    await store.update_session("s1", title="after")
                    seen.append(await store.get_session("s1"))

                nursery.start_soon(store.get_session, "s1")  # its batch is sent, held up
                await trio.testing.wait_all_tasks_blocked()
                nursery.start_soon(write_then_read)
                await trio.testing.wait_all_tasks_blocked()
                go.set()
            assert len(reads) == 2 and seen[0].title == "after"


async def test_a_read_cancelled_while_its_batch_is_read_returns_at_once(pg_url: str) -> None:
    """Reads stay cancellable: a caller whose row another call is reading leaves."""
    with trio.fail_after(30):
        async with open_postgres_store(pg_url) as store:
            await store.insert_session(session_row("s1"))
            left: list[bool] = []
            async with _first_read_held(store) as (_reads, go), trio.open_nursery() as nursery:
                cancel = trio.CancelScope()

                async def given_up(session_id: str) -> None:
                    with cancel:
                        await store.get_session(session_id)
                    left.append(cancel.cancelled_caught)

                nursery.start_soon(store.get_session, "s1")  # its batch is sent, held up
                await trio.testing.wait_all_tasks_blocked()
                nursery.start_soon(given_up, "s2")  # joins the next batch, behind it
                await trio.testing.wait_all_tasks_blocked()
                cancel.cancel()
                await trio.testing.wait_all_tasks_blocked()
                assert left == [True]  # before the read ahead of it was answered
                go.set()
            assert (await store.get_session("s1")) is not None
