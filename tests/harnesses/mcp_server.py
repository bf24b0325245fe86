"""A stdio MCP server for tests, built on the mcp SDK's MCPServer.

Tools: ``add(a, b)``; ``confirm(what)``, which asks the user (an elicitation) before
answering; ``boom()``, which fails; ``where(name)``, its working directory and the
value of one environment variable (``-`` if unset); ``era()``, the protocol version the
client negotiated; ``trace()``, the ``traceparent`` the call's ``_meta`` carried (``-``
without one). With ``--fail`` it writes to stderr and exits before speaking MCP.
``$MCP_PID_FILE`` (if set) gets the server's pid.
"""

from __future__ import annotations

import os
import sys
from typing import Annotated

from mcp.server.elicitation import ElicitationResult
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.resolve import Elicit, Resolve
from pydantic import BaseModel

app = MCPServer("calc")


class Ok(BaseModel):
    ok: bool


def ask(what: str) -> Elicit[Ok]:
    return Elicit(f"really {what}?", Ok)


@app.tool()
def add(a: int, b: int) -> str:
    """Add two integers."""
    return str(a + b)


@app.tool()
def confirm(what: str, answer: Annotated[ElicitationResult[Ok], Resolve(ask)]) -> str:
    """Do something after the user confirms it."""
    data = getattr(answer, "data", None)
    return f"{answer.action}: {what} ({data.ok if data else None})"


@app.tool()
def where(name: str) -> str:
    """Where the server runs: its working directory and one variable of its environment."""
    return f"{os.getcwd()} {os.environ.get(name, '-')}"


@app.tool()
def era(ctx: Context) -> str:
    """The MCP protocol version this connection speaks."""
    return str(ctx.protocol_version)


@app.tool()
def trace(ctx: Context) -> str:
    """The W3C traceparent this call's _meta carried (``-`` without one)."""
    meta = ctx.request_context.meta
    if meta is None:
        return "-"
    found = meta.get("traceparent") if isinstance(meta, dict) else None
    if found is None:
        found = (getattr(meta, "model_extra", None) or {}).get("traceparent")
    return str(found or "-")


@app.tool()
def boom() -> str:
    """Always fails."""
    raise ValueError("it blew up")


if __name__ == "__main__":
    if "--fail" in sys.argv:
        sys.stderr.write("calc: cannot open the abacus\n")
        sys.exit(4)
    if path := os.environ.get("MCP_PID_FILE"):
        with open(path, "w") as handle:
            handle.write(str(os.getpid()))
    app.run()
