"""The pure SSE pieces: frame encoding and the coalescing relay body, without sockets."""

from __future__ import annotations

import json

import pytest
import trio

from omnigent.model import OutputTextDelta
from omnigent.transports._sse import PING, SSEBody, encode_event, encode_frame


def test_encode_event_is_one_lean_frame() -> None:
    event = OutputTextDelta(response_id="resp_1", item_id="item_1", delta="hi\nthere").stamped(
        session_id="conv_1", event_id=7, created_at=1.5
    )
    frame = encode_event(event)
    head, data = frame.split(b"data: ")
    assert head == b"id: 7\nevent: response.output_text.delta\n"
    assert data.endswith(b"\n\n") and data.count(b"\n") == 2
    assert json.loads(data) == event.to_dict()
    assert b", " not in data and b": " not in data
    assert encode_frame("error", {"a": 1}) == b'event: error\ndata: {"a":1}\n\n'


async def test_ready_frames_coalesce_and_a_lone_frame_is_not_delayed(
    autojump_clock: trio.abc.Clock,
) -> None:
    # On the virtual clock the only time that passes is what the relay waits itself:
    # a lone frame waits at most the coalescing window, however loaded the machine.
    go = trio.Event()

    async def source(send: trio.MemorySendChannel[bytes]) -> None:
        for i in range(50):
            await send.send(encode_frame("x", {"i": i}, i))
        await go.wait()
        await send.send(b"lone")

    with trio.fail_after(5):
        async with SSEBody(source, stopping=trio.Event(), window=0.002) as body:
            chunk = await body.__anext__()
            assert chunk.count(b"event: x") == 50
            go.set()
            started = trio.current_time()
            assert await body.__anext__() == b"lone"
            assert trio.current_time() - started <= 0.002 + 1e-9
            with pytest.raises(StopAsyncIteration):
                await body.__anext__()


async def test_without_a_window_what_is_ready_goes_out_at_once(
    autojump_clock: trio.abc.Clock,
) -> None:
    """The default: no timer per chunk (a session's stream gets its events in batches
    already); the frames that are ready are one chunk, and nothing waits."""
    go = trio.Event()

    async def source(send: trio.MemorySendChannel[bytes]) -> None:
        for i in range(50):
            send.send_nowait(encode_frame("x", {"i": i}, i))
        await go.wait()
        await send.send(b"lone")

    with trio.fail_after(5):
        async with SSEBody(source, stopping=trio.Event()) as body:
            await trio.sleep(0.01)
            started = trio.current_time()
            assert (await body.__anext__()).count(b"event: x") == 50
            go.set()
            assert await body.__anext__() == b"lone"
            assert trio.current_time() == started


async def test_pings_stopping_and_cleanup(autojump_clock: trio.abc.Clock) -> None:
    released = trio.Event()

    async def source(send: trio.MemorySendChannel[bytes]) -> None:
        try:
            await trio.sleep_forever()
        finally:
            released.set()

    stopping = trio.Event()
    with trio.fail_after(100):
        async with SSEBody(source, stopping=stopping, ping_interval=15) as body:
            assert await body.__anext__() == PING
            stopping.set()
            with pytest.raises(StopAsyncIteration):
                await body.__anext__()
        assert released.is_set()


async def test_a_ping_comes_only_after_an_interval_without_a_chunk(
    autojump_clock: trio.abc.Clock,
) -> None:
    async def source(send: trio.MemorySendChannel[bytes]) -> None:
        for _ in range(3):
            await trio.sleep(10)
            await send.send(b"frame")
        await trio.sleep_forever()

    with trio.fail_after(100):
        async with SSEBody(source, stopping=trio.Event(), ping_interval=15) as body:
            started = trio.current_time()
            got = []
            for _ in range(5):
                chunk = await body.__anext__()
                got.append((chunk, trio.current_time() - started))
    # Frames 10 s apart keep it quiet; then a ping every 15 s of silence.
    assert got == [(b"frame", 10), (b"frame", 20), (b"frame", 30), (PING, 45), (PING, 60)]


async def test_leaving_early_cancels_the_source() -> None:
    released = trio.Event()

    async def source(send: trio.MemorySendChannel[bytes]) -> None:
        try:
            await send.send(b"one")
            await trio.sleep_forever()
        finally:
            released.set()

    with trio.fail_after(5), trio.move_on_after(0.2):
        async with SSEBody(source, stopping=trio.Event()) as body:
            assert await body.__anext__() == b"one"
            await body.__anext__()  # waits until the move_on_after cancels it
    assert released.is_set()


async def test_a_failing_source_ends_with_an_error_frame(caplog: pytest.LogCaptureFixture) -> None:
    async def source(send: trio.MemorySendChannel[bytes]) -> None:
        raise RuntimeError("hidden detail")

    with trio.fail_after(5):
        async with SSEBody(source, stopping=trio.Event()) as body:
            chunks = [chunk async for chunk in body]
    assert chunks == [
        b'event: error\ndata: {"error":{"code":"internal_error",'
        b'"message":"internal error; the cause was logged"}}\n\n'
    ]
    assert "hidden detail" in caplog.text
