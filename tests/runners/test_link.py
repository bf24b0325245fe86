"""The runner link: messages survive a dropped connection, a dead link ends in time."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.lowlevel
import trio.testing

from omnigent.rpc import ConnectionClosed, RpcConnection
from omnigent.runner import Link, LinkState, Outbox, ResumeRefused


class Pipe:
    """One direction-pair of an in-memory connection (a transport for a link)."""

    def __init__(self, out: trio.MemorySendChannel[str], into: trio.MemoryReceiveChannel[str]):
        self._out = out
        self._into = into
        self.sent: list[str] = []

    async def receive(self) -> str | None:
        try:
            return await self._into.receive()
        except (trio.EndOfChannel, trio.ClosedResourceError, trio.BrokenResourceError):
            return None

    async def send(self, text: str) -> None:
        self.sent.append(text)
        await self._out.send(text)

    async def aclose(self) -> None:
        self._out.close()
        self._into.close()


def pipes() -> tuple[Pipe, Pipe]:
    a_out, b_in = trio.open_memory_channel[str](100)
    b_out, a_in = trio.open_memory_channel[str](100)
    return Pipe(a_out, a_in), Pipe(b_out, b_in)


class Echo:
    methods = frozenset({"echo"})
    notifications = frozenset({"note"})
    ordered: frozenset[str] = frozenset()

    def __init__(self) -> None:
        self.notes: list[Any] = []

    async def handle_request(self, method: str, params: Any, admit: Any) -> Any:
        return params

    async def input_ended(self) -> None:
        pass

    async def handle_notification(self, method: str, params: Any) -> None:
        self.notes.append(params["n"])


def test_the_outbox_keeps_what_was_not_acknowledged() -> None:
    box = Outbox(max_messages=3)
    for text in ("a", "b", "c"):
        box.push(text)
    assert not box.has_room()
    assert box.ack(1) and box.has_room()
    assert box.resume(2) == ["c"]
    assert not box.ack(1)  # below what was acknowledged: ignored
    with pytest.raises(ResumeRefused):
        box.resume(9)  # more than was ever sent


async def test_messages_survive_dropped_connections_exactly_once() -> None:
    """Notifications sent while connections drop and come back arrive once, in order."""
    with trio.fail_after(10):
        server, runner = Link("link_" + "0" * 24), Link("link_" + "0" * 24)
        echo = Echo()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(server.run)
            nursery.start_soon(runner.run)
            nursery.start_soon(RpcConnection(server, echo).run)
            client = RpcConnection(runner, Echo())
            nursery.start_soon(client.run)

            async def connect() -> tuple[Pipe, Pipe]:
                a, b = pipes()
                nursery.start_soon(server.attach, a, runner.received)
                nursery.start_soon(runner.attach, b, server.received)
                return a, b

            for round_ in range(5):
                a, b = await connect()
                for n in range(round_ * 40, round_ * 40 + 40):
                    await client.notify("note", {"n": n})
                    if n % 13 == 0:
                        await trio.lowlevel.checkpoint()
                # The connection drops with messages in flight (some never read).
                await a.aclose()
                await b.aclose()
                await trio.testing.wait_all_tasks_blocked()
            await connect()
            assert await client.request("echo", {"x": 1}) == {"x": 1}
            assert echo.notes == list(range(200))
            server.close()
            runner.close()
            nursery.cancel_scope.cancel()


async def test_a_link_without_a_connection_ends_after_the_timeout(
    autojump_clock: trio.testing.MockClock,
) -> None:
    link = Link("link_" + "1" * 24, timeout=10)
    with trio.fail_after(60):
        start = trio.current_time()
        await link.run()
    assert link.state is LinkState.CLOSED
    assert 10 <= trio.current_time() - start < 11
    with pytest.raises(ConnectionClosed):
        await link.send("{}")
    assert await link.receive() is None


async def test_a_silent_connection_is_dropped_and_the_link_ends(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A peer that went away without closing (no frames, no FIN) is noticed in time."""
    link = Link("link_" + "2" * 24, heartbeat=2, timeout=10)
    a, _b = pipes()  # nothing ever comes from the other end
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(link.run)
            start = trio.current_time()
            nursery.start_soon(link.attach, a, 0)
            await trio.sleep(1)
            assert link.state is LinkState.ATTACHED
            while not link.closed:
                await trio.sleep(0.5)
            # Dropped after 10 s of silence, ended 10 s after it was last heard.
            assert trio.current_time() - start <= 10.5
    assert a.sent and all('"$/ack"' in s for s in a.sent)  # its heartbeats


async def test_a_sender_waits_for_room_until_the_peer_acknowledges(
    autojump_clock: trio.testing.MockClock,
) -> None:
    with trio.fail_after(10):
        server = Link("link_" + "3" * 24, max_unacked_messages=4)
        runner = Link("link_" + "3" * 24)
        for n in range(4):
            await server.send(str(n))  # detached: kept
        sent = trio.Event()

        async def fifth() -> None:
            await server.send("4")
            sent.set()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(fifth)
            await trio.testing.wait_all_tasks_blocked()
            assert not sent.is_set()
            a, b = pipes()
            nursery.start_soon(server.attach, a, 0)
            nursery.start_soon(runner.attach, b, 0)
            got = [await runner.receive() for _ in range(5)]
            assert got == ["0", "1", "2", "3", "4"]
            nursery.cancel_scope.cancel()


async def test_a_resume_that_claims_too_much_ends_the_link() -> None:
    link = Link("link_" + "4" * 24)
    a, _b = pipes()
    with trio.fail_after(5):
        with pytest.raises(ConnectionClosed):
            await link.attach(a, 3)  # nothing was ever sent
    assert link.closed
