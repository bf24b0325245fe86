"""Outbound HTTP a client can steer: URL allow-lists and the guarded transport.

A client of a server names URLs the server then fetches (a spec's model endpoint and
MCP servers, an ACP client's MCP servers). Such a URL is admitted only under an
operator's allow-list (:class:`UrlAllowList`), and fetched only through
:class:`GuardedTransport`, which checks every request against the list (redirects
included) and every connection's address after DNS (:func:`address_refusal`: no
link-local or metadata address ever, loopback and private ones only when the operator
named the address itself). See ``docs/security.md``, "Outbound requests".
:class:`DeferredTransport` makes a client's transport on its first request (a
runtime's model client costs nothing until a turn calls a model).

It imports nothing of omnigent's: the spec checks, the harnesses, the MCP client and
the runtime all build on it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._addresses import address_refusal, is_loopback_name
from ._deferred import DeferredTransport
from ._transport import (
    REFUSED,
    GuardedBackend,
    GuardedTransport,
    Resolver,
    guarded_mounts,
    resolve_system,
)
from ._urls import DEFAULT_PORTS, UrlAllowList, url_prefix_problem

if TYPE_CHECKING:
    import httpx2


def guarded_mcp_client(
    allow: UrlAllowList, headers: Any = None, **options: Any
) -> httpx2.AsyncClient:
    """The MCP SDK's HTTP client (``httpx2``) with the same guard (see :mod:`._httpx2`;
    imported on first use: it needs the ``mcp`` extra)."""
    from ._httpx2 import guarded_mcp_client as build

    return build(allow, headers, **options)


__all__ = [
    "DEFAULT_PORTS",
    "REFUSED",
    "DeferredTransport",
    "GuardedBackend",
    "GuardedTransport",
    "Resolver",
    "UrlAllowList",
    "address_refusal",
    "guarded_mcp_client",
    "guarded_mounts",
    "is_loopback_name",
    "resolve_system",
    "url_prefix_problem",
]
