"""A transport made on its first request.

httpx's own transport loads the system's CA certificates when it is made (an SSL
context: ≈ 20 ms, and the first one imports ``httpcore`` and ``certifi`` too). A
runtime owns a client for the model endpoints from the moment it opens, whether or not
a turn ever calls a model: ``omnigent serve`` paid for it before its first request
(``benchmarks/startup.py``). :class:`DeferredTransport` makes the real one when the
first request goes out.

Resource handling: ``aclose`` closes the transport if it was made (and nothing
otherwise); a client that owns this transport closes it with itself.
"""

from __future__ import annotations

from collections.abc import Callable

import httpx

__all__ = ["DeferredTransport"]


class DeferredTransport(httpx.AsyncBaseTransport):
    """An httpx transport that calls ``make()`` on its first request and sends every
    request through what it returned.

    Args:
        make: builds the real transport (``httpx.AsyncHTTPTransport``, with options).
    """

    def __init__(self, make: Callable[[], httpx.AsyncBaseTransport]) -> None:
        self._make = make
        self._transport: httpx.AsyncBaseTransport | None = None

    @property
    def made(self) -> bool:
        """Whether the real transport has been made (a request went out)."""
        return self._transport is not None

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if self._transport is None:
            # Synchronous and without a checkpoint: no two requests can both make one.
            self._transport = self._make()
        return await self._transport.handle_async_request(request)

    async def aclose(self) -> None:
        if self._transport is not None:
            await self._transport.aclose()
