"""MCP both ways: a session's ``mcp_servers`` as tools, and a session's tools as an MCP server.

* :mod:`omnigent.mcp._client` connects a spec's ``mcp_servers`` (stdio ``command`` or
  streamable-HTTP ``url``) with the ``mcp`` SDK — the ``mcp`` extra,
  ``pip install 'omnigent[mcp]'``. Without it, an agent naming ``mcp_servers`` is
  refused when it is created (:func:`require_mcp`).
* :mod:`omnigent.transports.mcp._server` is the protocol behind ``POST /v1/sessions/{id}/mcp``:
  the session's tools served as an MCP server, with no SDK needed.

``docs/mcp.md`` is the user's guide.
"""

from __future__ import annotations

import importlib.util
from typing import TYPE_CHECKING, Any

from ..errors import ErrorDetail, SpecError
from ..spec import AgentSpec

if TYPE_CHECKING:
    from ._client import McpServers

__all__ = ["INSTALL_HINT", "McpServers", "mcp_installed", "require_mcp"]

INSTALL_HINT = "pip install 'omnigent[mcp]'"


def mcp_installed() -> bool:
    """Whether the ``mcp`` SDK (the ``mcp`` extra) can be imported."""
    return importlib.util.find_spec("mcp") is not None


def require_mcp(spec: AgentSpec, *, where: str = "") -> None:
    """Refuse a spec (or one of its sub-agents) naming ``mcp_servers`` without the SDK.

    Raises:
        SpecError: at ``mcp_servers`` (``sub_agents[i].mcp_servers`` for a sub-agent).
    """
    if mcp_installed():
        return
    if spec.mcp_servers:
        loc = f"{where}mcp_servers"
        msg = f"MCP servers need the mcp extra, which is not installed: {INSTALL_HINT}"
        raise SpecError(f"invalid AgentSpec: {msg} @ {loc}", [ErrorDetail(loc, msg)])
    for index, sub in enumerate(spec.sub_agents):
        require_mcp(sub, where=f"{where}sub_agents[{index}].")


def __getattr__(name: str) -> Any:
    """The client (:class:`McpServers`) is imported on first use: it needs the SDK."""
    if name == "McpServers":
        from ._client import McpServers

        return McpServers
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
