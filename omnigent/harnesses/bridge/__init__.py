"""The tool bridge: how a native CLI reaches omnigent's tools and policies mid-turn.

A native coding agent (Claude Code, Codex, pi) is its own process with its own tool
loop; omnigent's tools — sub-agents, background calls, terminals, the spec's MCP
servers — run in the runtime, inside the session's turn. The bridge joins the two
without any HTTP server (so it works the same in ``omnigent run`` and the library as
under ``omnigent serve``):

* Each CLI process gets a :class:`BridgeAddress` when it is spawned: a Unix socket
  path in the runtime's private (``0700``) socket directory, and a random bearer
  token given only to that process.
* While a turn runs, the harness serves it there (:func:`serve_bridge` with a
  :class:`TurnTools`): every exchange runs in the turn's nursery and goes through the
  turn's context — the session's policies and elicitations, the recorded
  ``function_call`` / ``function_call_output`` items — and is cancelled with the turn.
* Claude Code and Codex are handed an MCP server named ``omnigent``
  (:data:`SERVER_NAME`) whose command is the stdio shim (:func:`shim_command`): it
  answers the MCP handshake itself and relays ``tools/list`` and ``tools/call`` to
  the socket, one connection per request. pi's extension speaks the same protocol
  to the same kind of socket directly, and also asks it whether pi may run its own
  tools (``check``).

The wire is in :mod:`._protocol`, the runtime's side in :mod:`._server`, the shim in
:mod:`._shim` (a standalone script: the standard library only).
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

from ._protocol import SERVER_NAME, BridgeAddress, CallTool, CheckTool, offered
from ._server import BridgeTurn, TurnTools, serve_bridge

__all__ = [
    "SERVER_NAME",
    "SHIM",
    "TOKEN_VARIABLE",
    "BridgeAddress",
    "BridgeTurn",
    "CallTool",
    "CheckTool",
    "TurnTools",
    "bridge_socket_name",
    "offered",
    "serve_bridge",
    "shim_command",
]

SHIM = Path(__file__).with_name("_shim.py")
"""The stdio MCP shim, run as a file by the CLI's Python."""

TOKEN_VARIABLE = "OMNIGENT_BRIDGE_TOKEN"
"""The environment variable that carries a process's bridge token to its shim."""


def bridge_socket_name(key: str) -> str:
    """A short socket file name for the process ``key`` (Unix socket paths are
    limited to about 107 bytes)."""
    return f"bridge-{hashlib.sha256(key.encode()).hexdigest()[:20]}.sock"


def shim_command(address: BridgeAddress, version: str) -> tuple[str, ...]:
    """The command that runs the shim for ``address`` (its token goes in the
    environment, :data:`TOKEN_VARIABLE`, never on a command line others can read).

    ``-I -S``: isolated from the environment's Python settings and without
    ``site``: the shim needs the standard library only, and starts in milliseconds.
    """
    return (sys.executable, "-I", "-S", str(SHIM), str(address.path), version)
