"""MCP's tasks extension (``io.modelcontextprotocol/tasks``) on the session's ``/mcp``.

The 2026-07-28 revision moved tasks out of the core protocol into an official extension
(``modelcontextprotocol/ext-tasks``): a server may answer a ``tools/call`` with a task
handle (``resultType: "task"``) instead of its result, and the client polls
``tasks/get``, answers the task's questions with ``tasks/update`` and may ``tasks/cancel``
it. A server must offer a task only to a client that declares the extension in the
request's ``_meta`` (``io.modelcontextprotocol/clientCapabilities.extensions``), and
must not answer with one until a ``tasks/get`` would find it.

Here a task is a held tool call (:meth:`Runtime.start_tool_call`) that did not settle
within :data:`TASK_AFTER` seconds: the call is *kept* (:meth:`Runtime.keep_tool_call`),
which writes its start to the session's event log before the handle is returned, and
its end when it ends. The task id is the call's id (random, bound to the session the
``/mcp`` route serves). So a task is found after its request is gone — and after the
server restarted: MCP itself only promises the client may poll again, omnigent keeps
the outcome in the log. A call that was running when its server went away is
``failed`` (its work is gone with the process). While the call waits on an approval
the task is ``input_required``, its ``inputRequests`` the elicitation (as the
multi-round-trip result shows it, keyed by the elicitation id), answered by
``tasks/update``. Questions before the call runs (a policy's ASK on the call) are asked
by multi-round-trip first, as the extension recommends.

Pure protocol: the I/O is the :class:`~._server_kit.Backend`'s.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

from ...core import ToolTask
from ._server_kit import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    Backend,
    Failure,
    apply_responses,
    input_requests,
    tool_result,
)

__all__ = [
    "CLIENT_CAPABILITIES_META",
    "MISSING_CAPABILITY",
    "POLL_INTERVAL_MS",
    "TASKS_EXTENSION",
    "TASK_AFTER",
    "declares_tasks",
    "task_created",
    "task_methods",
]

TASKS_EXTENSION = "io.modelcontextprotocol/tasks"
CLIENT_CAPABILITIES_META = "io.modelcontextprotocol/clientCapabilities"
# MCP's "missing required client capability" (2026-07-28 numbering).
MISSING_CAPABILITY = -32021
# A call that has neither ended nor asked within this many seconds becomes a task.
TASK_AFTER = 1.0
POLL_INTERVAL_MS = 500


def declares_tasks(params: dict[str, Any]) -> bool:
    """Whether the request's ``_meta`` declares the tasks extension."""
    meta = params.get("_meta")
    caps = meta.get(CLIENT_CAPABILITIES_META) if isinstance(meta, dict) else None
    extensions = caps.get("extensions") if isinstance(caps, dict) else None
    return isinstance(extensions, dict) and isinstance(extensions.get(TASKS_EXTENSION), dict)


def _iso(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp, tz=UTC).isoformat().replace("+00:00", "Z")


def _task(task: ToolTask) -> dict[str, Any]:
    """The ``Task`` fields of ``task``."""
    out: dict[str, Any] = {
        "taskId": task.call_id,
        "status": task.status,
        "createdAt": _iso(task.started_at),
        "lastUpdatedAt": _iso(task.updated_at),
        # The log keeps it as long as its session: no deadline to discard it.
        "ttlMs": None,
        "pollIntervalMs": POLL_INTERVAL_MS,
    }
    return out


def task_created(task: ToolTask) -> dict[str, Any]:
    """The ``CreateTaskResult`` answering a ``tools/call``."""
    return {"resultType": "task", **_task(task), "statusMessage": f"{task.name} is running"}


def _detailed(task: ToolTask, backend: Backend) -> dict[str, Any]:
    """``tasks/get``'s answer: the task and what its status carries."""
    out = {"resultType": "complete", **_task(task)}
    if task.status in ("completed", "cancelled") and task.output is not None:
        out["statusMessage"] = f"{task.name} ended"
        if task.status == "completed":
            out["result"] = {**tool_result(task.output), "resultType": "complete"}
    elif task.status == "failed":
        out["statusMessage"] = task.error or "failed"
        out["error"] = {"code": INTERNAL_ERROR, "message": task.error or "the task failed"}
    elif task.status == "input_required" and task.asking is not None:
        out["inputRequests"] = input_requests(backend, task.asking)
    return out


async def _found(backend: Backend, params: dict[str, Any]) -> ToolTask:
    if not declares_tasks(params):
        raise Failure(
            MISSING_CAPABILITY,
            "Missing required client capability",
            {"requiredCapabilities": {"extensions": {TASKS_EXTENSION: {}}}},
        )
    task_id = params.get("taskId")
    task = await backend.task(task_id) if isinstance(task_id, str) and task_id else None
    if task is None:
        raise Failure(INVALID_PARAMS, "Failed to retrieve task: Task not found")
    return task


async def _get(params: dict[str, Any], backend: Backend) -> dict[str, Any]:
    return _detailed(await _found(backend, params), backend)


async def _update(params: dict[str, Any], backend: Backend) -> dict[str, Any]:
    """Answer what the task asks (``inputResponses``); unknown or answered keys are ignored."""
    task = await _found(backend, params)
    call = backend.held_call(task.call_id)
    if call is not None and task.status == "input_required":
        await apply_responses(backend, call, params.get("inputResponses"))
    return {"resultType": "complete"}


async def _cancel(params: dict[str, Any], backend: Backend) -> dict[str, Any]:
    """Cancel a running task (one that ended already stays as it ended)."""
    task = await _found(backend, params)
    backend.cancel(task.call_id)
    return {"resultType": "complete"}


TaskMethod = Callable[[dict[str, Any], Backend], Awaitable[dict[str, Any]]]


def task_methods() -> dict[str, TaskMethod]:
    """``tasks/get``, ``tasks/update``, ``tasks/cancel`` (2026-era requests only)."""
    return {"tasks/get": _get, "tasks/update": _update, "tasks/cancel": _cancel}
