"""The guarded transport for the MCP SDK's HTTP client (``httpx2``, the ``mcp`` extra).

The same guard as :class:`~._transport.GuardedTransport` — every request under the
allow-list, every connection to an address the rules accept — on ``httpx2`` and
``httpcore2``, the forks the MCP SDK is built on. Imported only when an MCP server a
client named is connected (the ``mcp`` extra is then installed).
"""

from __future__ import annotations

from collections.abc import Mapping

import httpcore2
import httpx2

from ._transport import Resolver, guarded_http_transport, refusal, resolve_system
from ._urls import UrlAllowList

__all__ = ["guarded_mcp_client"]

# The MCP SDK's own defaults (mcp.shared._httpx_utils): a server may hold a stream open.
_TIMEOUT = httpx2.Timeout(30.0, read=300.0)


class _GuardedTransport2(httpx2.AsyncBaseTransport):
    def __init__(self, allow: UrlAllowList, resolve: Resolver) -> None:
        self._allow = allow
        self._http: httpx2.AsyncHTTPTransport = guarded_http_transport(httpx2, httpcore2, resolve)

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        refused = refusal(self._allow, str(request.url))
        if refused is not None:
            raise httpx2.ConnectError(refused, request=request)
        return await self._http.handle_async_request(request)

    async def aclose(self) -> None:
        await self._http.aclose()


def guarded_mcp_client(
    allow: UrlAllowList,
    headers: Mapping[str, str] | None = None,
    *,
    resolve: Resolver = resolve_system,
) -> httpx2.AsyncClient:
    """An ``httpx2`` client for an MCP server a client named: guarded, no environment
    proxy (it would connect for us, unchecked), the SDK's timeouts."""
    return httpx2.AsyncClient(
        headers=dict(headers) if headers else None,
        timeout=_TIMEOUT,
        transport=_GuardedTransport2(allow, resolve),
        trust_env=False,
    )
