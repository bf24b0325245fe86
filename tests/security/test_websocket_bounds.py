"""The ACP WebSocket bounds what one client may hold: message size and connections.

Found by the third attack probe (issue 23, minor): ``GET /v1/ws`` took 60 MiB messages
and any number of connections — each one a nursery, relays, perhaps MCP servers.
Now a message is at most 16 MiB under ``serve`` (larger closes the connection with
1009) and a server holds at most 256 sockets, 32 per caller (then ``503
server_busy`` at the upgrade, before anything is accepted).
"""

from __future__ import annotations

import contextlib
import json
from contextlib import AsyncExitStack
from pathlib import Path

import pytest
import trio
import trio_websocket

from omnigent.errors import ServerBusy
from omnigent.transports.http._ws_slots import (
    MAX_WEBSOCKETS_PER_USER,
    WS_MAX_MESSAGE_BYTES,
    WebSocketSlots,
)

from .serve_helpers import open_serve, scripted

INIT = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}})


async def test_a_message_over_the_bound_closes_the_socket(tmp_path: Path) -> None:
    with trio.fail_after(60):
        async with open_serve(tmp_path) as served:
            await served.agent(scripted("default"))
            stream = await trio.open_tcp_stream("127.0.0.1", served.port)
            async with stream:
                status, _ = await _handshake(stream)
                assert status == 101
                size = WS_MAX_MESSAGE_BYTES + 1
                # A masked text frame (mask key 0: the payload as is), sent in pieces.
                header = bytes([0x81, 0x80 | 127]) + size.to_bytes(8, "big") + bytes(4)
                with contextlib.suppress(trio.BrokenResourceError):
                    await stream.send_all(header)
                    for _ in range(size // (1 << 20) + 1):
                        await stream.send_all(b"x" * (1 << 20))
                received = b""
                with trio.move_on_after(15), contextlib.suppress(trio.BrokenResourceError):
                    while chunk := await stream.receive_some():
                        received += chunk
            # The server's close frame: opcode 8, status 1009 (message too big).
            assert received[:1] == b"\x88" and received[2:4] == (1009).to_bytes(2, "big"), received
            assert (await served.client.get("/health")).status_code == 200


async def test_one_caller_holds_a_bounded_number_of_sockets(tmp_path: Path) -> None:
    with trio.fail_after(60):
        async with open_serve(tmp_path) as served:
            await served.agent(scripted("default"))
            url = served.url.replace("http://", "ws://") + "/v1/ws"
            async with AsyncExitStack() as stack:
                for _ in range(MAX_WEBSOCKETS_PER_USER):
                    ws = await stack.enter_async_context(trio_websocket.open_websocket_url(url))
                    await ws.send_message(INIT)
                    await ws.get_message()
                status, body = await _upgrade(served.port)
                assert status == 503 and b"server_busy" in body, (status, body)
            # Closed ones free their slots.
            async with trio_websocket.open_websocket_url(url) as ws:
                await ws.send_message(INIT)
                assert json.loads(await ws.get_message())["id"] == 1


def test_the_server_wide_bound_counts_every_caller() -> None:
    slots = WebSocketSlots(total=3, per_user=2)
    with slots.hold("a"), slots.hold("a"):
        with pytest.raises(ServerBusy), slots.hold("a"):
            pass
        with slots.hold("b"):
            with pytest.raises(ServerBusy), slots.hold("c"):
                pass
            assert slots.statistics() == {"open": 3, "callers": 2}
    assert slots.statistics() == {"open": 0, "callers": 0}


async def _upgrade(port: int) -> tuple[int, bytes]:
    """A WebSocket handshake by hand on a new connection: the answer's status and text."""
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    async with stream:
        return await _handshake(stream, until=b"server_busy")


async def _handshake(stream: trio.SocketStream, until: bytes = b"\r\n\r\n") -> tuple[int, bytes]:
    request = (
        "GET /v1/ws HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n"
        "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
        "Sec-WebSocket-Version: 13\r\n\r\n"
    )
    await stream.send_all(request.encode())
    answer = b""
    while until not in answer and len(answer) < 65536:
        chunk = await stream.receive_some()
        if not chunk:
            break
        answer += chunk
    return int(answer.split(b" ", 2)[1]), answer
