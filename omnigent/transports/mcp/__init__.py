"""A session's tools as an MCP server: the protocol behind ``POST /v1/sessions/{id}/mcp``.

:func:`handle` answers one MCP request against a session (no SDK needed); the HTTP
route that carries it is in :mod:`omnigent.transports.http`.
"""

from ._server import Answer, handle

__all__ = ["Answer", "handle"]
