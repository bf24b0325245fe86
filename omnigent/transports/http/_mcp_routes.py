"""``POST /v1/sessions/{id}/mcp``: the session's tools as an MCP server.

The protocol is :mod:`omnigent.transports.mcp._server`; this module is its HTTP shell: it checks
the caller (edit level: calling tools changes things), decodes the body strictly
(bounded depth; a bad one is JSON-RPC ``-32700``), and gives the protocol a view of
the runtime through its public methods. A call waiting on an approval holds its
request until the server starts stopping (then ``-32603`` "the server is shutting
down"), as the hook routes do. ``GET`` and ``DELETE`` (a server stream, ending a
session) are not offered: ``405``, as streamable HTTP allows.
"""

from __future__ import annotations

import math
from typing import Any

import trio
from quart import Blueprint, Response, jsonify, request

from ..._version import __version__
from ...core import HeldToolCall, ToolTask
from ...errors import InvalidInput
from ...harnesses.base import ToolSchema
from ...model import ElicitationRequest, loads
from ._access import EDIT, session_access
from ._hook_routes import _until_stopping
from ._params import state

__all__ = ["blueprint"]

blueprint = Blueprint("omnigent_mcp", __name__)


class _Backend:
    """The protocol's view of one session, through the runtime's public methods."""

    server_version = __version__

    def __init__(self, session_id: str) -> None:
        self._session_id = session_id
        self._runtime = state().runtime

    async def tools(self) -> tuple[ToolSchema, ...]:
        return await self._runtime.session_tools(self._session_id)

    async def start_call(self, name: str, arguments: dict[str, Any]) -> HeldToolCall:
        return await self._runtime.start_tool_call(self._session_id, name, arguments)

    def held_call(self, call_id: str) -> HeldToolCall | None:
        return self._runtime.held_tool_call(self._session_id, call_id)

    async def answer(self, elicitation_id: str, action: str, content: Any) -> bool:
        return await self._runtime.resolve_elicitation(
            self._session_id, elicitation_id, action, content
        )

    async def settle(
        self,
        call: HeldToolCall,
        *,
        done: bool,
        answered: str | None,
        timeout: float | None = None,
    ) -> bool:
        with trio.move_on_after(math.inf if timeout is None else timeout) as waited:
            if done:
                await _until_stopping(call.wait_done)
            else:
                await _until_stopping(lambda: call.wait_settled(answered=answered))
        return not waited.cancelled_caught

    async def keep(self, call: HeldToolCall) -> ToolTask:
        return await self._runtime.keep_tool_call(self._session_id, call.call_id)

    async def task(self, task_id: str) -> ToolTask | None:
        return await self._runtime.tool_task(self._session_id, task_id)

    def cancel(self, task_id: str) -> bool:
        return self._runtime.cancel_tool_call(self._session_id, task_id)

    def approval_url(self, asking: ElicitationRequest) -> str | None:
        # As the elicitation carries it, relative (``/approve/{sid}/{eid}``), as the
        # original omnigent answers it: the client resolves it against the server it
        # called (issue 28).
        return asking.params.url


@blueprint.post("/sessions/<session_id>/mcp")
async def mcp(session_id: str) -> Response:
    # The MCP protocol module, imported by the first MCP request (a native agent's
    # tools), not by a server's start.
    from ..mcp import Answer, handle

    await session_access(session_id, EDIT)
    try:
        message = loads(await request.get_data(), loc="body")
    except InvalidInput:
        message = None
    answer: Answer = await handle(
        message,
        _Backend(session_id),
        header_version=request.headers.get("Mcp-Protocol-Version"),
    )
    if answer.body is None:
        return Response(b"", status=answer.status)
    response: Response = jsonify(answer.body)
    response.status_code = answer.status
    return response


@blueprint.route("/sessions/<session_id>/mcp", methods=["GET", "DELETE"])
async def mcp_other(session_id: str) -> Response:
    await session_access(session_id, EDIT)
    response: Response = jsonify(
        {"error": {"code": "method_not_allowed", "message": "POST one JSON-RPC message"}}
    )
    response.status_code = 405
    response.headers["Allow"] = "POST"
    return response
