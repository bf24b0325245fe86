"""The egress proxy: an HTTP proxy on a Unix socket, admitting only what the rules do.

:func:`open_egress_proxy` serves one sandbox (one command, terminal or server) for as
long as its block runs. Each connection from the sandbox carries one request:

* ``CONNECT host:port`` (HTTPS, or anything tunnelled): admitted host-level by
  :meth:`EgressRules.tunnel`; the proxy dials and then relays bytes both ways.
* an absolute ``http://`` request: admitted by method, host, port and path; the
  proxy dials, forwards the request (origin-form, ``Connection: close``) and its
  ``Content-Length`` body, and relays the answer until the server closes.

Either way the host is resolved *here*, and only addresses
:func:`permitted_address` allows are dialled (unless ``egress_allow_private_destinations``):
a rule naming a host that resolves to ``127.0.0.1`` or ``169.254.169.254`` does not
reach it, and the address checked is the address dialled (no second lookup to
rebind). A refusal is an HTTP answer saying why (``403``), logged at INFO.

Bounds: a request head is at most :data:`MAX_HEAD` bytes and must arrive within
:data:`HEAD_TIMEOUT`; at most :data:`MAX_CONNECTIONS` connections at once (the next
waits); a dial gives up after :data:`CONNECT_TIMEOUT`. An open tunnel has no idle
limit: it lives as long as the sandboxed process that holds it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import trio

from ...spec import EgressRules
from ._proxy_protocol import (
    MAX_HEAD,
    ProxyRequest,
    RequestError,
    decide,
    origin_request,
    parse_request,
    permitted_address,
    refusal,
)

__all__ = ["CONNECT_TIMEOUT", "HEAD_TIMEOUT", "MAX_CONNECTIONS", "open_egress_proxy"]

log = logging.getLogger(__name__)

HEAD_TIMEOUT = 30.0
CONNECT_TIMEOUT = 10.0
MAX_CONNECTIONS = 64
_CHUNK = 65536


class _Refused(Exception):
    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


async def _read_head(stream: trio.SocketStream) -> tuple[bytes, bytes]:
    """The request head and whatever arrived after it."""
    data = bytearray()
    while True:
        end = data.find(b"\r\n\r\n")
        if end >= 0:
            return bytes(data[:end]), bytes(data[end + 4 :])
        if len(data) > MAX_HEAD:
            raise _Refused(400, f"the request head is larger than {MAX_HEAD} bytes")
        chunk = await stream.receive_some(_CHUNK)
        if not chunk:
            raise _Refused(400, "the connection closed before the request head ended")
        data += chunk


async def _dial(request: ProxyRequest, allow_private: bool) -> trio.SocketStream:
    """Resolve, keep the permitted addresses, connect to the first that answers."""
    where = f"{request.host}:{request.port}"
    try:
        infos = await trio.socket.getaddrinfo(
            request.host, request.port, type=trio.socket.SOCK_STREAM
        )
    except OSError as exc:
        raise _Refused(502, f"cannot resolve {request.host}: {exc}") from None
    addresses = [(family, sockaddr) for family, _, _, _, sockaddr in infos]
    permitted = [
        a for a in addresses if permitted_address(str(a[1][0]), allow_private=allow_private)
    ]
    if not permitted:
        raise _Refused(
            403,
            f"{where} resolves only to private or reserved addresses; "
            "egress_allow_private_destinations is off",
        )
    failure = "no address answered"
    for family, sockaddr in permitted:
        sock = trio.socket.socket(family, trio.socket.SOCK_STREAM)
        try:
            with trio.fail_after(CONNECT_TIMEOUT):
                await sock.connect(sockaddr)
        except (OSError, trio.TooSlowError) as exc:
            sock.close()
            failure = str(exc) or type(exc).__name__
            continue
        return trio.SocketStream(sock)
    raise _Refused(502, f"cannot connect to {where}: {failure}")


async def _pipe(source: trio.SocketStream, sink: trio.SocketStream, limit: int | None) -> None:
    """Copy ``source`` to ``sink`` until EOF (or ``limit`` bytes), then half-close."""
    left = limit
    with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError, OSError):
        while left is None or left > 0:
            chunk = await source.receive_some(_CHUNK if left is None else min(_CHUNK, left))
            if not chunk:
                break
            await sink.send_all(chunk)
            if left is not None:
                left -= len(chunk)
        if limit is None:
            await sink.send_eof()


async def _relay(client: trio.SocketStream, upstream: trio.SocketStream, body: int | None) -> None:
    """Relay both ways; ``body`` bounds what goes up (None: a tunnel, no bound)."""
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_pipe, client, upstream, body)
        await _pipe(upstream, client, None)
        if body is not None:
            # The answer is complete (the server closed): nothing more goes up.
            nursery.cancel_scope.cancel()


async def _admit(
    stream: trio.SocketStream, rules: EgressRules, allow_private: bool
) -> tuple[ProxyRequest, bytes, trio.SocketStream]:
    """Read and judge one request; the request, what followed its head, the upstream.

    Raises:
        _Refused: a malformed request, one no rule admits, or an unreachable host.
    """
    with trio.fail_after(HEAD_TIMEOUT):
        head, early = await _read_head(stream)
    try:
        request = parse_request(head)
    except RequestError as exc:
        raise _Refused(exc.status, exc.reason) from None
    decision = decide(request, rules)
    if not decision.allowed:
        raise _Refused(403, decision.reason)
    return request, early, await _dial(request, allow_private or decision.trusted)


async def _serve_one(stream: trio.SocketStream, rules: EgressRules, allow_private: bool) -> None:
    async with stream:
        try:
            request, early, upstream = await _admit(stream, rules, allow_private)
        except _Refused as refused:
            log.info("sandbox egress refused: %s", refused.reason)
            with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                await stream.send_all(refusal(refused.status, refused.reason))
            return
        except (trio.TooSlowError, trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            return
        async with upstream:
            with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                if request.tunnel:
                    await stream.send_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
                    if early:
                        await upstream.send_all(early)
                    await _relay(stream, upstream, None)
                else:
                    await upstream.send_all(origin_request(request) + early[: request.length])
                    await _relay(stream, upstream, max(request.length - len(early), 0))


async def _accept_loop(
    listener: trio.socket.SocketType, rules: EgressRules, allow_private: bool
) -> None:
    slots = trio.Semaphore(MAX_CONNECTIONS)

    async def serve(sock: trio.socket.SocketType) -> None:
        try:
            await _serve_one(trio.SocketStream(sock), rules, allow_private)
        finally:
            slots.release()

    async with trio.open_nursery() as nursery:
        while True:
            await slots.acquire()
            try:
                sock, _ = await listener.accept()
            except BaseException:
                slots.release()
                raise
            nursery.start_soon(serve, sock)


def _private_dir() -> Path:
    return Path(tempfile.mkdtemp(prefix="omnigent-egress-"))


@asynccontextmanager
async def open_egress_proxy(rules: EgressRules, *, allow_private: bool) -> AsyncIterator[Path]:
    """Serve an egress proxy for the block; yields its Unix socket's path.

    The socket sits alone in a fresh directory only this user can enter (a Unix
    socket path must stay short, so it is under the temporary directory).

    Cancellation: leaving the block (however) cancels every open connection and
    removes the socket and its directory.
    """
    folder = await trio.to_thread.run_sync(_private_dir)
    path = folder / "egress.sock"
    listener = trio.socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        await listener.bind(str(path))
        listener.listen(MAX_CONNECTIONS)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_accept_loop, listener, rules, allow_private)
            try:
                yield path
            finally:
                nursery.cancel_scope.cancel()
    finally:
        # Two system calls, done in place: a cancelled block cannot hop to a thread.
        listener.close()
        with contextlib.suppress(OSError):
            os.unlink(path)
        with contextlib.suppress(OSError):
            os.rmdir(folder)
