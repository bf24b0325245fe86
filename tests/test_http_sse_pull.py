"""The body a session stream is served by: frames pulled in the response task itself."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
import trio

from omnigent.errors import SessionNotFound
from omnigent.transports.http._sse import PING
from omnigent.transports.http._sse_pull import PulledSSEBody


class ChannelSource:
    """A cancel-safe frame source over a memory channel (``None`` ends it)."""

    def __init__(self, *, fail_open: Exception | None = None) -> None:
        self.send, self._receive = trio.open_memory_channel[bytes](100)
        self.released = trio.Event()
        self.settled = trio.Event()
        self.asked = 0
        self._fail_open = fail_open

    @asynccontextmanager
    async def open(self) -> AsyncIterator[None]:
        if self._fail_open is not None:
            raise self._fail_open
        try:
            yield
        finally:
            self.released.set()

    async def next_frame(self, *, wait: bool) -> bytes | None:
        self.asked += 1
        try:
            return await self._receive.receive() if wait else self._receive.receive_nowait()
        except trio.WouldBlock:
            return None
        except trio.EndOfChannel:
            raise StopAsyncIteration from None

    async def settle(self) -> None:
        await self.settled.wait()


async def test_what_is_at_hand_is_one_chunk_and_nothing_waits(
    autojump_clock: trio.abc.Clock,
) -> None:
    source = ChannelSource()
    for i in range(50):
        source.send.send_nowait(b"frame %d\n" % i)
    with trio.fail_after(5):
        async with PulledSSEBody(source, stopping=trio.Event()) as body:
            started = trio.current_time()
            chunk = await body.__anext__()
            assert chunk.count(b"frame") == 50
            source.send.send_nowait(b"lone")
            assert await body.__anext__() == b"lone"
            assert trio.current_time() == started
            source.send.close()
            with pytest.raises(StopAsyncIteration):
                await body.__anext__()
    assert source.released.is_set()


async def test_a_chunk_stops_taking_at_max_chunk(autojump_clock: trio.abc.Clock) -> None:
    source = ChannelSource()
    for _ in range(10):
        source.send.send_nowait(b"x" * 100)
    with trio.fail_after(5):
        async with PulledSSEBody(source, stopping=trio.Event(), max_chunk=250) as body:
            assert len(await body.__anext__()) == 300
            assert len(await body.__anext__()) == 300


async def test_a_ping_interrupts_only_the_wait_and_loses_nothing(
    autojump_clock: trio.abc.Clock,
) -> None:
    source = ChannelSource()

    async def feed() -> None:
        for _ in range(3):
            await trio.sleep(10)
            await source.send.send(b"frame")
        await trio.sleep(40)
        await source.send.send(b"late")

    with trio.fail_after(200):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(feed)
            async with PulledSSEBody(source, stopping=trio.Event(), ping_interval=15) as body:
                started = trio.current_time()
                got = []
                for _ in range(6):
                    chunk = await body.__anext__()
                    got.append((chunk, trio.current_time() - started))
    # Frames 10 s apart keep it quiet; then a ping every 15 s of silence, and the
    # frame that comes after the pings still arrives (the cancelled waits lost nothing).
    assert got == [
        (b"frame", 10),
        (b"frame", 20),
        (b"frame", 30),
        (PING, 45),
        (PING, 60),
        (b"late", 70),
    ]


async def test_stopping_settles_then_ends_and_releases_the_source(
    autojump_clock: trio.abc.Clock,
) -> None:
    source = ChannelSource()
    stopping = trio.Event()
    with trio.fail_after(100):
        async with PulledSSEBody(source, stopping=stopping, ping_interval=15) as body:
            assert await body.__anext__() == PING
            stopping.set()
            await trio.sleep(1)
            source.send.send_nowait(b"last")  # what the settling stream still forwards
            assert await body.__anext__() == b"last"
            source.settled.set()
            with pytest.raises(StopAsyncIteration):
                await body.__anext__()
        assert source.released.is_set()


async def test_leaving_early_releases_the_source() -> None:
    source = ChannelSource()
    source.send.send_nowait(b"one")
    with trio.fail_after(5), trio.move_on_after(0.2):
        async with PulledSSEBody(source, stopping=trio.Event()) as body:
            assert await body.__anext__() == b"one"
            await body.__anext__()  # waits until the move_on_after cancels it
    assert source.released.is_set()


async def test_errors_end_the_stream_with_an_error_frame(
    caplog: pytest.LogCaptureFixture,
) -> None:
    class Failing(ChannelSource):
        async def next_frame(self, *, wait: bool) -> bytes | None:
            raise RuntimeError("hidden detail")

    with trio.fail_after(5):
        async with PulledSSEBody(Failing(), stopping=trio.Event()) as body:
            chunks = [chunk async for chunk in body]
        assert chunks == [
            b'event: error\ndata: {"error":{"code":"internal_error",'
            b'"message":"internal error; the cause was logged"}}\n\n'
        ]
        assert "hidden detail" in caplog.text
        gone = ChannelSource(fail_open=SessionNotFound("conv_x"))
        async with PulledSSEBody(gone, stopping=trio.Event()) as body:
            chunks = [chunk async for chunk in body]
        assert len(chunks) == 1 and b'"code":"session_not_found"' in chunks[0]
