"""``omnigent.client``'s errors: its own types, one at a time, never an exception group.

Each test would have failed before the fix: ``health()`` raised ``httpx.ConnectError``
when nothing answered; an error inside an ACP block came out as an ``ExceptionGroup``;
a refused WebSocket upgrade was trio-websocket's own exception; a stream that could not
reconnect raised httpx's.
"""

from __future__ import annotations

import gc
import socket
import sys
from functools import partial
from pathlib import Path

import pytest
import trio

from omnigent.client import (
    ApiError,
    ClientError,
    ConnectionClosed,
    OmnigentClient,
    RpcError,
    ServerUnreachable,
    open_acp_process,
    open_acp_websocket,
)
from omnigent.rpc import METHOD_NOT_FOUND
from omnigent.testing import scripted_agent as scripted

from .http_helpers import HTTPX_GENERATORS
from .test_client import running_server

pytestmark = HTTPX_GENERATORS


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then let go)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


async def test_nothing_answering_is_server_unreachable_and_health_false() -> None:
    url = f"http://127.0.0.1:{closed_port()}"
    with trio.fail_after(20):
        async with OmnigentClient(url) as client:
            assert await client.health() is False
            with pytest.raises(ServerUnreachable) as unreachable:
                await client.list_agents()
            assert unreachable.value.url == url
            assert str(unreachable.value).startswith(f"no answer from {url}: ")
            assert isinstance(unreachable.value, ConnectionError)
            with pytest.raises(ServerUnreachable):
                async with client.events("conv_x", after=0, retries=1, backoff=0.01) as events:
                    await events.__anext__()
        with pytest.raises(ServerUnreachable) as socket_unreachable:
            async with open_acp_websocket(url):
                pass
        assert "v1/ws" in socket_unreachable.value.url


async def test_errors_inside_an_acp_block_come_out_alone(tmp_path: Path) -> None:
    with trio.fail_after(30):
        async with running_server(tmp_path) as (url, _):
            async with OmnigentClient(url) as client:
                await client.create_agent(scripted("solo", [{"say": "hi"}]))
            # The agent's error answer, raised in the block: an RpcError, no group.
            with pytest.raises(RpcError) as answered:
                async with open_acp_websocket(url) as acp:
                    await acp.call("no/such_method", {})
            assert answered.value.code == METHOD_NOT_FOUND
            assert isinstance(answered.value, ClientError)
            # The body's own error comes out as it was raised.
            with pytest.raises(KeyError):
                async with open_acp_websocket(url) as acp:
                    await acp.new_session(str(tmp_path))
                    raise KeyError("mine")


# trio-websocket 0.12 raises ConnectionRejected in its reader without closing the TCP
# stream it opened (and keeps it from the caller): the socket is closed only when it is
# collected. Collected here, so its warning stays in this test.
@pytest.mark.filterwarnings("ignore:unclosed <socket.socket:ResourceWarning")
@pytest.mark.filterwarnings(
    "ignore:Exception ignored in. <socket.socket:pytest.PytestUnraisableExceptionWarning"
)
async def test_an_upgrade_the_server_refuses_is_an_api_error(tmp_path: Path) -> None:
    with trio.fail_after(30):
        async with running_server(tmp_path) as (url, _):
            with pytest.raises(ApiError) as refused:
                async with open_acp_websocket(f"{url.replace('http', 'ws')}/v1/ws?agent=Bad!"):
                    pass
            assert (refused.value.status, refused.value.code) == (422, "invalid_request")
            assert refused.value.details[0]["loc"] == "agent"
    del refused  # its traceback holds the stream
    gc.collect()


async def test_an_agent_process_that_dies_is_connection_closed(tmp_path: Path) -> None:
    # A "process" that exits before answering initialize.
    command = [sys.executable, "-c", "import sys; sys.stdin.readline()"]
    with trio.fail_after(30), pytest.raises(ConnectionClosed):
        async with open_acp_process(command):
            pass


async def test_a_502_with_no_json_is_still_an_api_error() -> None:
    async def handle(stream: trio.SocketStream) -> None:
        await stream.receive_some(65536)
        await stream.send_all(
            b"HTTP/1.1 502 Bad Gateway\r\ncontent-length: 7\r\nconnection: close\r\n\r\nno path"
        )
        await stream.aclose()

    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            listeners = await nursery.start(partial(trio.serve_tcp, handle, 0, host="127.0.0.1"))
            port = listeners[0].socket.getsockname()[1]
            async with OmnigentClient(f"http://127.0.0.1:{port}") as client:
                assert await client.health() is False
                with pytest.raises(ApiError) as error:
                    await client.list_agents()
                assert (error.value.status, error.value.code, error.value.message) == (
                    502,
                    "http_error",
                    "no path",
                )
            nursery.cancel_scope.cancel()
