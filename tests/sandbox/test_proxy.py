"""The egress proxy on its own: a real Unix socket, a real loopback upstream."""

from __future__ import annotations

import socket

import trio

from omnigent.processes.sandbox import open_egress_proxy
from omnigent.processes.sandbox._proxy_protocol import MAX_HEAD
from omnigent.spec import EgressRules

from .helpers import loopback_http


async def ask(path: object, request: bytes) -> bytes:
    """Send ``request`` to the proxy at ``path``; everything it answers."""
    sock = trio.socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    await sock.connect(str(path))
    stream = trio.SocketStream(sock)
    async with stream:
        await stream.send_all(request)
        answer = b""
        while chunk := await stream.receive_some(65536):
            answer += chunk
            if request.startswith(b"CONNECT") and answer.endswith(b"\r\n\r\n"):
                break
        return answer


async def test_a_tunnel_is_admitted_by_host_and_then_carries_anything() -> None:
    with trio.fail_after(20):
        async with loopback_http() as port:
            rules = EgressRules.parse([f"GET 127.0.0.1:{port}/ok/**"])
            async with open_egress_proxy(rules, allow_private=True) as path:
                sock = trio.socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                await sock.connect(str(path))
                async with trio.SocketStream(sock) as stream:
                    await stream.send_all(f"CONNECT 127.0.0.1:{port} HTTP/1.1\r\n\r\n".encode())
                    established = await stream.receive_some(4096)
                    # Inside the tunnel the proxy sees nothing: a path no rule names passes.
                    await stream.send_all(b"POST /anything HTTP/1.1\r\nHost: x\r\n\r\n")
                    answer = b""
                    while chunk := await stream.receive_some(4096):
                        answer += chunk
    assert established.startswith(b"HTTP/1.1 200")
    assert b"hello POST /anything HTTP/1.1" in answer


async def test_names_are_resolved_before_private_addresses_are_refused() -> None:
    with trio.fail_after(20):
        async with loopback_http() as port:
            rules = EgressRules.parse([f"* localhost:{port}"])
            request = f"GET http://localhost:{port}/x HTTP/1.1\r\n\r\n".encode()
            async with open_egress_proxy(rules, allow_private=False) as path:
                refused = await ask(path, request)
            async with open_egress_proxy(rules, allow_private=True) as path:
                allowed = await ask(path, request)
    assert refused.startswith(b"HTTP/1.1 403") and b"private or reserved" in refused
    assert b"hello GET /x HTTP/1.1" in allowed


async def test_bounded_and_malformed_requests_are_refused_with_a_reason() -> None:
    rules = EgressRules.parse(["* example.com"])
    with trio.fail_after(20):
        async with open_egress_proxy(rules, allow_private=False) as path:
            huge = await ask(path, b"GET http://example.com/ HTTP/1.1\r\nX: " + b"a" * MAX_HEAD)
            relative = await ask(path, b"GET / HTTP/1.1\r\n\r\n")
            chunked = await ask(
                path, b"POST http://example.com/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
            )
    assert huge.startswith(b"HTTP/1.1 400") and b"larger than" in huge
    assert relative.startswith(b"HTTP/1.1 400")
    assert chunked.startswith(b"HTTP/1.1 411")


async def test_leaving_the_block_removes_the_socket() -> None:
    with trio.fail_after(10):
        async with open_egress_proxy(EgressRules(()), allow_private=False) as path:
            assert await trio.Path(path).exists()
    assert not await trio.Path(path).exists()
    assert not await trio.Path(path.parent).exists()
