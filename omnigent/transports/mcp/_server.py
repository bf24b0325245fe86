"""A session's tools as an MCP server: the protocol behind ``POST /v1/sessions/{id}/mcp``.

Streamable HTTP in its simplest form: each POST carries one JSON-RPC message and gets
one JSON answer (no server-sent stream, no ``Mcp-Session-Id``). Both eras of MCP are
served, so any client connects:

* **2026-07-28** (``server/discover``, then self-contained requests): a ``tools/call``
  that needs approval answers MCP's multi-round-trip ``input_required`` result —
  ``inputRequests`` keyed by the omnigent elicitation id, each an
  ``elicitation/create`` with ``params {mode: "url", message, url}`` (the approval
  page; ``{mode: "form", message, requestedSchema}`` when the runtime asks in form
  mode), and a ``requestState`` to echo back. Retried with ``inputResponses`` (the
  answer, keyed the same) and that ``requestState``, the call goes on: the answer
  resolves the elicitation, the tool runs, and the result comes back (or another
  ``input_required`` for a result-phase ASK). A retry without a response, after the
  person answered on the approval page, finds the call moved on.
* **Handshake era** (``initialize`` … ``2025-11-25``): there is no ``input_required``,
  so a call that needs approval holds its request open until the person answers
  (through the approval page, the API, or a client's ``session/request_permission``).

``requestState`` is the held call's id: random, bound to this session, tool and
arguments, and useless once the call is collected or expired (``-32602`` then). The
call itself runs in the session through its one tool path, policies included
(:meth:`omnigent.core.Runtime.start_tool_call`).

Nothing here does I/O of its own: :func:`handle` takes the decoded message and a
:class:`Backend` (the HTTP route's view of the runtime), and returns the answer.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import attrs

from ...core import HeldToolCall
from ...errors import OmnigentError
from ...harnesses.base import ToolSchema
from ._server_kit import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    Backend,
    Failure,
    apply_responses,
    input_requests,
    tool_result,
)
from ._tasks import (
    TASK_AFTER,
    TASKS_EXTENSION,
    declares_tasks,
    task_created,
    task_methods,
)

__all__ = [
    "HANDSHAKE_VERSIONS",
    "MODERN_VERSION",
    "Answer",
    "Backend",
    "handle",
    "is_modern",
]

MODERN_VERSION = "2026-07-28"
HANDSHAKE_VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
PROTOCOL_META = "io.modelcontextprotocol/protocolVersion"
SERVER_INFO_META = "io.modelcontextprotocol/serverInfo"


@attrs.frozen
class Answer:
    """The HTTP answer: ``body`` is None for a notification (``202``, no body)."""

    status: int
    body: dict[str, Any] | None


def is_modern(message: Mapping[str, Any], header_version: str | None) -> bool:
    """Whether a request speaks the 2026 era (its ``_meta`` or its version header)."""
    params = message.get("params")
    meta = params.get("_meta") if isinstance(params, Mapping) else None
    version = meta.get(PROTOCOL_META) if isinstance(meta, Mapping) else None
    version = version if isinstance(version, str) else header_version
    return isinstance(version, str) and version >= MODERN_VERSION


async def handle(message: Any, backend: Backend, *, header_version: str | None = None) -> Answer:
    """Answer one decoded JSON-RPC message (``None`` if the body was not JSON)."""
    if message is None:
        return Answer(400, _error(None, PARSE_ERROR, "the body is not JSON"))
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
        return Answer(400, _error(None, INVALID_REQUEST, "expected one JSON-RPC 2.0 message"))
    request_id = message.get("id")
    method = message.get("method")
    if "id" not in message:
        return Answer(202, None)  # a notification (initialized, cancelled): nothing to say
    if isinstance(request_id, bool) or not isinstance(request_id, str | int):
        return Answer(400, _error(None, INVALID_REQUEST, "id must be a string or an integer"))
    if not isinstance(method, str):
        return Answer(400, _error(request_id, INVALID_REQUEST, "method must be a string"))
    params = message.get("params", {})
    if not isinstance(params, dict):
        return Answer(200, _error(request_id, INVALID_PARAMS, "params must be an object"))
    modern = is_modern(message, header_version)
    try:
        if method in _TASK_METHODS and modern:
            result = await _TASK_METHODS[method](params, backend)
        elif method in _METHODS:
            result = await _METHODS[method](params, backend, modern)
        else:
            return Answer(200, _error(request_id, METHOD_NOT_FOUND, f"unknown method {method!r}"))
    except Failure as failure:
        return Answer(200, _error(request_id, failure.code, failure.message, failure.data))
    except OmnigentError as exc:
        return Answer(200, _error(request_id, INTERNAL_ERROR, exc.message))
    return Answer(200, {"jsonrpc": "2.0", "id": request_id, "result": result})


def _error(request_id: Any, code: int, message: str, data: Any = None) -> dict[str, Any]:
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return {"jsonrpc": "2.0", "id": request_id, "error": error}


def _capabilities() -> dict[str, Any]:
    return {"tools": {"listChanged": False}}


async def _discover(params: dict[str, Any], backend: Backend, modern: bool) -> dict[str, Any]:
    return {
        "supportedVersions": [MODERN_VERSION],
        "capabilities": {**_capabilities(), "extensions": {TASKS_EXTENSION: {}}},
        "_meta": {SERVER_INFO_META: {"name": "omnigent", "version": backend.server_version}},
        "resultType": "complete",
        "ttlMs": 0,
        "cacheScope": "private",
    }


async def _initialize(params: dict[str, Any], backend: Backend, modern: bool) -> dict[str, Any]:
    asked = params.get("protocolVersion")
    version = asked if asked in HANDSHAKE_VERSIONS else HANDSHAKE_VERSIONS[0]
    return {
        "protocolVersion": version,
        "capabilities": _capabilities(),
        "serverInfo": {"name": "omnigent", "version": backend.server_version},
    }


async def _ping(params: dict[str, Any], backend: Backend, modern: bool) -> dict[str, Any]:
    return {}


async def _list_tools(params: dict[str, Any], backend: Backend, modern: bool) -> dict[str, Any]:
    tools = [
        {"name": t.name, "description": t.description, "inputSchema": _object_schema(t)}
        for t in await backend.tools()
    ]
    result: dict[str, Any] = {"tools": tools}
    if modern:
        result.update(resultType="complete", ttlMs=0, cacheScope="private")
    return result


def _object_schema(tool: ToolSchema) -> dict[str, Any]:
    schema = dict(tool.parameters)
    schema.setdefault("type", "object")
    return schema


async def _call_tool(params: dict[str, Any], backend: Backend, modern: bool) -> dict[str, Any]:
    name, arguments = params.get("name"), params.get("arguments", {})
    if not isinstance(name, str) or not name:
        raise Failure(INVALID_PARAMS, "params.name must be a tool name")
    if not isinstance(arguments, dict):
        raise Failure(INVALID_PARAMS, "params.arguments must be an object")
    state = params.get("requestState")
    answered = None
    if state is None:
        call = await backend.start_call(name, arguments)
    else:
        call = _resumed(backend, state, name, arguments)
        answered = await apply_responses(backend, call, params.get("inputResponses"))
    # Before 2026 there is no input_required: the request is held until the call is done.
    # A client that takes tasks gets one for a call still running after TASK_AFTER.
    tasks = modern and declares_tasks(params)
    timeout = TASK_AFTER if tasks else None
    if not await backend.settle(call, done=not modern, answered=answered, timeout=timeout):
        return task_created(await backend.keep(call))
    if call.asking is not None and call.output is None:
        return {
            "resultType": "input_required",
            "inputRequests": input_requests(backend, call.asking),
            "requestState": call.call_id,
        }
    result = tool_result(call.collect())
    if modern:
        result["resultType"] = "complete"
    return result


def _resumed(backend: Backend, state: Any, name: str, arguments: dict[str, Any]) -> HeldToolCall:
    call = backend.held_call(state) if isinstance(state, str) else None
    if call is None or call.kept or call.name != name or call.arguments != arguments:
        raise Failure(INVALID_PARAMS, "Invalid or expired requestState")
    return call


_Method = Callable[[dict[str, Any], Backend, bool], Awaitable[dict[str, Any]]]
_METHODS: dict[str, _Method] = {
    "server/discover": _discover,
    "initialize": _initialize,
    "ping": _ping,
    "tools/list": _list_tools,
    "tools/call": _call_tool,
}
# The tasks extension's methods: 2026-era requests only (they need its _meta).
_TASK_METHODS = task_methods()
