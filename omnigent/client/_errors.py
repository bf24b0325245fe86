"""The client's errors: one tree, never an exception group.

Everything the client raises on purpose is a :class:`ClientError`; a caller catches
that, or one branch of it, with a plain ``except`` (no ``except*``)::

    ClientError
    ├── ApiError             the server answered with an error: status, code, message, details
    │   └── StreamError      an event stream could not be opened, or ended with an error
    ├── ServerUnreachable    nothing answered (refused, timed out, cut off), also ConnectionError
    ├── RpcError             an ACP agent answered with a JSON-RPC error (also omnigent.rpc's)
    └── ConnectionClosed     the ACP connection went away (also omnigent.rpc's)

Foreign errors (httpx's, trio-websocket's, a nursery's group) are translated where they
enter, with the original on ``__cause__``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import httpx
import trio

from .. import rpc

__all__ = [
    "ApiError",
    "ClientError",
    "ConnectionClosed",
    "RpcError",
    "ServerUnreachable",
    "StreamError",
    "single_error",
    "transport_reason",
]


class ClientError(Exception):
    """Base of every error the client raises on purpose."""


class ApiError(ClientError):
    """The server answered an error: ``status``, ``code``, ``message``, ``details``."""

    def __init__(
        self, status: int, code: str, message: str, details: Sequence[dict[str, Any]] = ()
    ) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.details = tuple(details)


class StreamError(ApiError):
    """An event stream could not be opened, or ended with an ``event: error`` frame."""


class ServerUnreachable(ClientError, ConnectionError):
    """Nothing answered at ``url``: the connection was refused, timed out or was cut."""

    def __init__(self, url: str, reason: str) -> None:
        super().__init__(f"no answer from {url}: {reason}")
        self.url = url
        self.reason = reason


class RpcError(ClientError, rpc.RpcError):
    """An ACP agent answered with an error: ``code``, ``message``, ``data``."""


class ConnectionClosed(ClientError, rpc.ConnectionClosed):
    """The ACP connection ended before (or while) a request could be answered."""


def single_error(group: BaseExceptionGroup[Any]) -> BaseException:
    """What a nursery's group means to the client's caller: the one error in it.

    A body's error comes out of the nursery beside the ``Cancelled`` of the tasks it
    stopped; those are left out. ``KeyboardInterrupt`` wins over everything. Several
    real errors at once are one :class:`ClientError` naming the first, with the group
    as its cause.
    """
    interrupts, _ = group.split(KeyboardInterrupt)
    if interrupts is not None:
        return KeyboardInterrupt()
    leaves = [leaf for leaf in _leaves(group) if not _is_cancelled(leaf)]
    if not leaves:
        return group
    if len(leaves) == 1:
        return leaves[0]
    first = leaves[0]
    return ClientError(f"{len(leaves)} errors at once; the first: {first!r}")


def _is_cancelled(exc: BaseException) -> bool:
    return isinstance(exc, trio.Cancelled)


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in _leaves(inner)]
    return [exc]


def transport_reason(exc: httpx.TransportError) -> str:
    """A transport failure in a few words (httpx's own message can be empty)."""
    kind = {
        httpx.ConnectError: "the connection was refused or failed",
        httpx.TimeoutException: "timed out",
        httpx.RemoteProtocolError: "the connection was cut off",
    }
    for cls, words in kind.items():
        if isinstance(exc, cls):
            return f"{words} ({exc})" if str(exc) else words
    return str(exc) or type(exc).__name__
