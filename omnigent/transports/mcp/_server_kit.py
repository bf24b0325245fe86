"""What the ``/mcp`` protocol modules share: the backend they act through, their error,
and the multi-round-trip pieces (an elicitation as an input request, its answer).

:mod:`._server` (the methods of both MCP eras) and :mod:`._tasks` (the tasks
extension) are both pure protocol over a :class:`Backend` — the HTTP route's view of
the runtime.
"""

from __future__ import annotations

from typing import Any, Protocol

from ...core import HeldToolCall, ToolTask
from ...harnesses.base import ToolSchema
from ...model import ElicitationRequest

__all__ = [
    "INTERNAL_ERROR",
    "INVALID_PARAMS",
    "INVALID_REQUEST",
    "METHOD_NOT_FOUND",
    "PARSE_ERROR",
    "Backend",
    "Failure",
    "apply_responses",
    "input_requests",
    "tool_result",
]

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603


class Backend(Protocol):
    """What the protocol needs: the session's tools, calls, approvals and tasks."""

    server_version: str

    async def tools(self) -> tuple[ToolSchema, ...]: ...

    async def start_call(self, name: str, arguments: dict[str, Any]) -> HeldToolCall: ...

    def held_call(self, call_id: str) -> HeldToolCall | None: ...

    async def answer(self, elicitation_id: str, action: str, content: Any) -> bool: ...

    async def settle(
        self,
        call: HeldToolCall,
        *,
        done: bool,
        answered: str | None,
        timeout: float | None = None,
    ) -> bool:
        """Wait until ``call`` is done (``done``) or settled — done or asking past
        ``answered``; ended early (RuntimeClosed) if the server stops. ``False``:
        ``timeout`` seconds passed first."""
        ...

    def approval_url(self, request: ElicitationRequest) -> str | None: ...

    async def keep(self, call: HeldToolCall) -> ToolTask:
        """Keep ``call`` as a durable task (:meth:`Runtime.keep_tool_call`)."""
        ...

    async def task(self, task_id: str) -> ToolTask | None:
        """A kept call, live or from the log (:meth:`Runtime.tool_task`)."""
        ...

    def cancel(self, task_id: str) -> bool: ...


class Failure(Exception):
    """A JSON-RPC error to answer: ``code``, ``message``, optional ``data``."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data


def tool_result(output: str) -> dict[str, Any]:
    """A ``CallToolResult`` for one output string (``isError`` for ``Error: …``)."""
    return {
        "content": [{"type": "text", "text": output}],
        "isError": output.startswith("Error:"),
    }


async def apply_responses(backend: Backend, call: HeldToolCall, responses: Any) -> str | None:
    """Answer the call's pending elicitation from ``inputResponses``; its id if answered."""
    if responses is None:
        return None
    if not isinstance(responses, dict):
        raise Failure(INVALID_PARAMS, "params.inputResponses must be an object")
    asking = call.asking
    for key, response in responses.items():
        if asking is None or key != asking.elicitation_id:
            continue  # answered already (on the approval page), or not ours: ignored
        action = response.get("action") if isinstance(response, dict) else None
        if action not in ("accept", "decline", "cancel"):
            raise Failure(INVALID_PARAMS, f"inputResponses[{key!r}].action must be an action")
        content = response.get("content")
        if await backend.answer(key, action, content if isinstance(content, dict) else None):
            return asking.elicitation_id
    return None


def input_requests(backend: Backend, asking: ElicitationRequest) -> dict[str, Any]:
    """The ``inputRequests`` asking ``asking``: one ``elicitation/create`` under its id."""
    params = asking.params
    url = backend.approval_url(asking)
    prompt: dict[str, Any]
    if params.mode == "url" and url is not None:
        prompt = {"mode": "url", "message": params.message, "url": url}
    else:
        schema = params.requestedSchema or {"type": "object", "properties": {}}
        prompt = {"mode": "form", "message": params.message, "requestedSchema": schema}
    return {asking.elicitation_id: {"method": "elicitation/create", "params": prompt}}
