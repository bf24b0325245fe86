"""ACP's ``initialize``: what the client says it can do, and what omnigent answers.

``initialize`` is the one request a connection must send first, and the one whose
answer is fixed by the agent rather than by a session. :func:`read_client` reads the
client's side (``protocolVersion``, and the ``fs`` and ``terminal`` capabilities that
decide which of the session's tools the editor runs, :mod:`._client_tools`);
:func:`initialize_answer` builds omnigent's (``protocolVersion``, ``agentCapabilities``,
``agentInfo``, no ``authMethods``), with the ``_omnigent/...`` extension methods listed
under ``_meta.omnigent.methods``. Both are pure; :func:`mcp_http` says whether the
``mcpCapabilities.http`` advertised is true, which depends on the connection's
:data:`~._mcp_servers.ClientMcpMode`, the runtime's allowlist and the ``mcp`` extra.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..._version import __version__
from ...core import Runtime
from ...mcp import mcp_installed
from ._client_tools import ClientCapabilities
from ._mcp_servers import ClientMcpMode
from ._params import Params, invalid

__all__ = ["PROTOCOL_VERSION", "initialize_answer", "mcp_http", "read_client"]

PROTOCOL_VERSION = 1


def read_client(params: Params) -> ClientCapabilities:
    """The client's capabilities from ``initialize``'s params.

    Raises:
        RpcError: ``-32602`` at ``protocolVersion`` when it is missing or not an
            integer in ``0..65535``, or at a capability of the wrong type.
    """
    version = params.integer("protocolVersion", low=0, high=65535)
    if version is None:
        raise invalid("protocolVersion", "expected an integer")
    caps = params.object("clientCapabilities")
    fs = caps.object("fs")
    return ClientCapabilities(
        read=fs.flag("readTextFile"),
        write=fs.flag("writeTextFile"),
        terminal=caps.flag("terminal"),
    )


def initialize_answer(extensions: Iterable[str], *, mcp_http: bool) -> dict[str, Any]:
    """omnigent's answer to ``initialize``.

    Args:
        extensions: the ``_omnigent/...`` methods the connection answers.
        mcp_http: whether HTTP MCP servers the client passes can be connected.
    """
    return {
        "protocolVersion": PROTOCOL_VERSION,
        "agentCapabilities": {
            "loadSession": True,
            "promptCapabilities": {"image": True, "audio": False, "embeddedContext": True},
            "mcpCapabilities": {"http": mcp_http, "sse": False},
            "sessionCapabilities": {"list": {}},
            "_meta": {"omnigent": {"methods": sorted(extensions)}},
        },
        "agentInfo": {"name": "omnigent", "title": "omnigent", "version": __version__},
        "authMethods": [],
    }


def mcp_http(mode: ClientMcpMode, runtime: Runtime) -> bool:
    """Whether HTTP MCP servers the client passes can be connected at all."""
    if mode == "operator":
        return mcp_installed()
    if mode == "client":
        return mcp_installed() and bool(runtime.allowed_mcp_urls)
    return False
