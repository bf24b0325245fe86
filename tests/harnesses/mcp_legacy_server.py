"""A handshake-era MCP server on stdio (protocol 2025-11-25), with the standard library only.

What a server built on an SDK before the 2026-07-28 revision speaks (``FastMCP`` of
``mcp<2``): no ``server/discover`` (``-32601``), an ``initialize`` handshake, and an
elicitation as a request *to the client* in the middle of a ``tools/call``. Tools:
``era()``, the version negotiated; ``confirm(what)``, which asks first.
"""

from __future__ import annotations

import itertools
import json
import sys
from typing import Any

VERSION = "2025-11-25"
TOOLS = [
    {"name": "era", "description": "The protocol version.", "inputSchema": {"type": "object"}},
    {
        "name": "confirm",
        "description": "Asks, then answers.",
        "inputSchema": {"type": "object", "properties": {"what": {"type": "string"}}},
    },
]
_ids = itertools.count(1000)
negotiated = "-"


def send(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def receive() -> dict[str, Any] | None:
    line = sys.stdin.readline()
    return json.loads(line) if line else None


def ask(what: str) -> dict[str, Any]:
    """Send ``elicitation/create`` and read until its answer (nothing else is expected)."""
    request_id = next(_ids)
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
    params = {"message": f"really {what}?", "requestedSchema": schema}
    send({"jsonrpc": "2.0", "id": request_id, "method": "elicitation/create", "params": params})
    while (message := receive()) is not None:
        if message.get("id") == request_id and "method" not in message:
            result: dict[str, Any] = message.get("result") or {}
            return result
    raise SystemExit(0)


def call(name: str, arguments: dict[str, Any]) -> str:
    if name == "era":
        return negotiated
    answer = ask(str(arguments.get("what")))
    content = answer.get("content") or {}
    return f"{answer.get('action')}: {arguments.get('what')} ({content.get('ok')})"


def main() -> None:
    global negotiated
    while (message := receive()) is not None:
        method, request_id = message.get("method"), message.get("id")
        if request_id is None:
            continue  # notifications/initialized and the like
        params = message.get("params") or {}
        if method == "initialize":
            negotiated = VERSION
            result: dict[str, Any] = {
                "protocolVersion": VERSION,
                "capabilities": {"tools": {"listChanged": False}},
                "serverInfo": {"name": "legacy-calc", "version": "1"},
            }
        elif method == "tools/list":
            result = {"tools": TOOLS}
        elif method == "tools/call":
            text = call(params.get("name", ""), params.get("arguments") or {})
            result = {"content": [{"type": "text", "text": text}], "isError": False}
        elif method == "ping":
            result = {}
        else:
            error = {"code": -32601, "message": f"Method not found: {method}"}
            send({"jsonrpc": "2.0", "id": request_id, "error": error})
            continue
        send({"jsonrpc": "2.0", "id": request_id, "result": result})


if __name__ == "__main__":
    main()
