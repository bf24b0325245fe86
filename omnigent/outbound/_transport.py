"""The guarded transport: outbound HTTP to URLs a client named, checked as it connects.

A client of a server can name URLs the server then fetches: a spec's
``executor.config.base_url`` (the model endpoint) and ``mcp_servers[].url`` (with
headers of its choosing), an ACP client's HTTP MCP servers. Those are admitted only
under the operator's allow-lists (``serve --allow-model-url``, ``--allow-mcp-url``);
this transport keeps them there on the wire:

* **Every request** (each redirect hop included: httpx sends each one through the
  transport) must be under the allow-list, else it is refused before any connection.
* **Every connection** goes to an address :func:`~._addresses.address_refusal`
  accepts, decided on the addresses the name resolves to *now* — and the connection
  is then made to that very address, so a second lookup (DNS rebinding between check
  and use) cannot send it elsewhere. TLS still verifies the name (SNI and the
  certificate use the URL's host).

A refusal is the HTTP library's own ``ConnectError`` with a message that says why:
callers already turn connection failures into their own errors (a failed turn, a
failed MCP server). The same guard serves ``httpx`` (the model endpoints) and the MCP
SDK's ``httpx2`` (:mod:`._httpx2`): one wiring (:func:`guarded_http_transport`) over
either library; only the transport classes around it and their exceptions differ.

Resource handling: a transport owns a connection pool; close it with ``aclose`` (or
use the client that owns it as a context manager).
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Awaitable, Callable, Iterable
from types import ModuleType
from typing import Any

import httpx
import trio

from ._addresses import address_refusal, is_loopback_name
from ._urls import UrlAllowList

__all__ = [
    "REFUSED",
    "GuardedBackend",
    "GuardedTransport",
    "Resolver",
    "guarded_mounts",
    "resolve_system",
]

Resolver = Callable[[str, int], Awaitable[list[str]]]
"""Resolves a host name and port to IP addresses (in preference order)."""

REFUSED = "refused by omnigent's outbound guard"


async def resolve_system(host: str, port: int) -> list[str]:
    """The system resolver, through Trio (a worker thread)."""
    infos = await trio.socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


def _literal(host: str) -> str | None:
    bare = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    try:
        return str(ipaddress.ip_address(bare.split("%", 1)[0]))
    except ValueError:
        return None


class GuardedBackend:
    """A network backend (httpcore's or httpcore2's interface, by duck typing) that
    connects only to addresses the rules accept.

    Args:
        inner: the library's own backend, which makes the connection (Trio's).
        connect_error, connect_timeout: the library's exception classes, so its
            client maps them to its ``ConnectError`` / ``ConnectTimeout``.
        resolve: how names are resolved (:func:`resolve_system`).
    """

    def __init__(
        self,
        inner: Any,
        *,
        connect_error: type[Exception],
        connect_timeout: type[Exception],
        resolve: Resolver = resolve_system,
    ) -> None:
        self._inner = inner
        self._connect_error = connect_error
        self._connect_timeout = connect_timeout
        self._resolve = resolve

    async def _addresses(self, host: str, port: int, timeout: float | None) -> list[str]:
        """The addresses of ``host`` a connection may go to, in order.

        Raises:
            the library's ConnectError (refused, or the name does not resolve) or
            ConnectTimeout (resolving took longer than ``timeout``).
        """
        literal = _literal(host)
        if literal is not None:
            addresses = [literal]
        else:
            with trio.move_on_after(float("inf") if timeout is None else timeout) as scope:
                try:
                    addresses = await self._resolve(host, port)
                except OSError as exc:
                    raise self._connect_error(f"cannot resolve {host!r}: {exc}") from exc
            if scope.cancelled_caught:
                raise self._connect_timeout(f"resolving {host!r} took too long")
        allowed, refusals = [], []
        for address in addresses:
            named = literal is not None or (
                is_loopback_name(host) and ipaddress.ip_address(address).is_loopback
            )
            problem = address_refusal(address, named_literally=named)
            if problem is None:
                allowed.append(address)
            else:
                refusals.append(problem)
        if not allowed:
            why = "; ".join(dict.fromkeys(refusals)) or f"{host!r} resolves to nothing"
            raise self._connect_error(f"{REFUSED}: {why}")
        return allowed

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> Any:
        failure: Exception | None = None
        for address in await self._addresses(host, port, timeout):
            try:
                return await self._inner.connect_tcp(
                    address, port, timeout, local_address, socket_options
                )
            except self._connect_error as exc:
                failure = exc
        assert failure is not None
        raise failure

    async def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> Any:
        raise self._connect_error(f"{REFUSED}: no Unix sockets")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


def refusal(allow: UrlAllowList, url: str) -> str | None:
    """The message for a request to ``url`` outside ``allow`` (``None``: it is under)."""
    if allow.admits(url):
        return None
    shown = url.split("?", 1)[0].split("#", 1)[0]
    return f"{REFUSED}: {shown} is under no URL the operator allowed"


def guarded_http_transport(http: ModuleType, core: ModuleType, resolve: Resolver) -> Any:
    """A new ``http.AsyncHTTPTransport`` whose every connection goes through a
    :class:`GuardedBackend` (and so only to addresses the rules accept).

    ``http`` and ``core`` are httpx and httpcore, or the MCP SDK's forks of them,
    httpx2 and httpcore2, whose interfaces are the same: one wiring serves both.

    httpx takes no network backend, so the transport's pool (not opened yet) is
    replaced by one on the guarded backend, with httpx's default limits;
    tests/security/test_outbound.py fails if a new httpx stops using it.
    """
    transport = http.AsyncHTTPTransport()
    transport._pool = core.AsyncConnectionPool(
        ssl_context=http.create_ssl_context(),
        network_backend=GuardedBackend(
            core.TrioBackend(),
            connect_error=core.ConnectError,
            connect_timeout=core.ConnectTimeout,
            resolve=resolve,
        ),
        max_connections=100,
        max_keepalive_connections=20,
        keepalive_expiry=5.0,
    )
    return transport


class GuardedTransport(httpx.AsyncBaseTransport):
    """An httpx transport for URLs a client named: under ``allow``, to safe addresses.

    Args:
        allow: the prefixes every request must be under.
        resolve: the resolver (tests give one that maps names to chosen addresses).
    """

    def __init__(self, allow: UrlAllowList, *, resolve: Resolver = resolve_system) -> None:
        import httpcore  # here: httpx imports it only for its first transport too

        self._allow = allow
        self._http: httpx.AsyncHTTPTransport = guarded_http_transport(httpx, httpcore, resolve)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        refused = refusal(self._allow, str(request.url))
        if refused is not None:
            raise httpx.ConnectError(refused, request=request)
        return await self._http.handle_async_request(request)

    async def aclose(self) -> None:
        await self._http.aclose()


def guarded_mounts(
    allow: UrlAllowList, transport: httpx.AsyncBaseTransport | None = None
) -> dict[str, httpx.AsyncBaseTransport]:
    """httpx ``mounts`` sending every request to an allowed origin through one
    :class:`GuardedTransport` (``transport``, else a new one): more specific than a
    proxy mount, so an environment proxy does not bypass the guard."""
    if not allow:
        return {}
    guarded = transport if transport is not None else GuardedTransport(allow)
    return {origin: guarded for origin in allow.origins()}
