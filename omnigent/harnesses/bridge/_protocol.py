"""The tool bridge's wire, without I/O: requests, answers, and which tools cross it.

A native CLI reaches the turn that runs it through a private Unix socket (see
:mod:`omnigent.harnesses.bridge`). Each connection carries one exchange: one JSON line
in, one JSON line out. Every request names the bridge's bearer token::

    {"token": T, "op": "list"}
        -> {"tools": [{"name", "description", "inputSchema"}, ...]}
    {"token": T, "op": "call", "name": N, "arguments": {...}, "call_id"?: ID}
        -> {"output": "..."}            (an omnigent tool, run through the turn)
    {"token": T, "op": "check", "tool_name": N, "tool_input": {...}, "call_id"?: ID}
        -> {"allow": true|false, "reason": "..."}   (a CLI's own tool, before it runs)

and anything wrong is ``{"error": "..."}``. ``call_id`` is the id the model gave the
call (Claude Code's ``tool_use`` id, Codex's call id, pi's ``toolCallId``), so the
items omnigent records carry the ids the CLI's own stream shows.
"""

from __future__ import annotations

import hmac
import json
import secrets
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from ..base import ToolSchema

__all__ = [
    "MAX_REQUEST",
    "SERVER_NAME",
    "BridgeAddress",
    "CallTool",
    "CheckTool",
    "ListTools",
    "Request",
    "encode",
    "listing",
    "offered",
    "parse_request",
]

SERVER_NAME = "omnigent"
"""The MCP server name a CLI is given: Claude Code calls the tools
``mcp__omnigent__<tool>``, Codex puts them in the namespace ``mcp__omnigent``."""

MAX_REQUEST = 4 * 1024 * 1024
"""The longest request line the bridge reads (a tool's arguments included)."""

_OWN_TOOLS = ("sys_os_read", "sys_os_write", "sys_os_edit", "sys_os_shell")
"""omnigent's OS tools: a native CLI brings its own, so these are not bridged."""


@attrs.frozen
class BridgeAddress:
    """Where a CLI process finds its session's bridge, and the token it must show.

    One per CLI process: it is written into the process's MCP configuration (the
    path) and environment (the token) when it is spawned, and every turn that process
    serves listens on the same path.
    """

    path: Path
    token: str = attrs.field(repr=False)

    @classmethod
    def new(cls, path: Path) -> BridgeAddress:
        """An address at ``path`` with a fresh random token."""
        return cls(path, secrets.token_urlsafe(32))


@attrs.frozen
class ListTools:
    """The omnigent tools this turn offers the CLI."""


@attrs.frozen
class CallTool:
    """Run omnigent tool ``name`` in the turn."""

    name: str
    arguments: dict[str, Any]
    call_id: str | None = None


@attrs.frozen
class CheckTool:
    """May the CLI run its own tool ``tool_name`` with ``tool_input``?"""

    tool_name: str
    tool_input: dict[str, Any]
    call_id: str | None = None


Request = ListTools | CallTool | CheckTool


def offered(tools: Sequence[ToolSchema]) -> tuple[ToolSchema, ...]:
    """The tools bridged to a native CLI: the turn's, without omnigent's OS tools (the
    CLI reads, writes, edits and runs commands with its own)."""
    return tuple(tool for tool in tools if tool.name not in _OWN_TOOLS)


def listing(tools: Sequence[ToolSchema]) -> list[dict[str, Any]]:
    """``tools`` as MCP ``tools/list`` entries."""
    out = []
    for tool in tools:
        schema = dict(tool.parameters)
        schema.setdefault("type", "object")
        out.append({"name": tool.name, "description": tool.description, "inputSchema": schema})
    return out


def parse_request(line: bytes, token: str) -> Request | str:
    """The request on one line, or why it is refused (a bad token among the reasons).

    The token is compared in constant time.
    """
    try:
        message = json.loads(line)
    except ValueError:
        return "the request is not JSON"
    if not isinstance(message, dict):
        return "the request must be a JSON object"
    shown = message.get("token")
    if not isinstance(shown, str) or not hmac.compare_digest(shown.encode(), token.encode()):
        return "unauthorized"
    op = message.get("op")
    call_id = message.get("call_id")
    if call_id is not None and (not isinstance(call_id, str) or not call_id):
        return "call_id must be a non-empty string"
    if op == "list":
        return ListTools()
    if op == "call":
        name, arguments = message.get("name"), message.get("arguments", {})
        if not isinstance(name, str) or not name:
            return "name must be a tool name"
        if not isinstance(arguments, dict):
            return "arguments must be an object"
        return CallTool(name, arguments, call_id)
    if op == "check":
        name, tool_input = message.get("tool_name"), message.get("tool_input", {})
        if not isinstance(name, str) or not name:
            return "tool_name must be a tool name"
        if not isinstance(tool_input, dict):
            return "tool_input must be an object"
        return CheckTool(name, tool_input, call_id)
    return f"unknown op {op!r} (expected list, call or check)"


def encode(answer: Mapping[str, Any]) -> bytes:
    """One answer line."""
    return json.dumps(answer, separators=(",", ":")).encode() + b"\n"
