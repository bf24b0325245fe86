"""A small Trio client for omnigent servers: HTTP, resumable SSE, and ACP.

* :class:`OmnigentClient` — the HTTP API of ``omnigent serve`` with typed answers;
  :meth:`OmnigentClient.events` is a session's event stream that reconnects by itself
  after a dropped connection and resumes from the last event id it saw.
* :func:`open_acp_websocket` — the Agent Client Protocol over ``GET /v1/ws``;
  :func:`open_acp_process` — over the stdin/stdout of ``omnigent stdio`` (or any ACP
  agent). Both yield an :class:`AcpClient`.

Errors are one tree under :class:`ClientError` (see :mod:`omnigent.client._errors`),
never an exception group. See ``docs/client.md``.
"""

from ._acp import (
    AcpClient,
    PermissionHandler,
    PromptResult,
    UpdateHandler,
    open_acp_process,
    open_acp_websocket,
)
from ._errors import (
    ApiError,
    ClientError,
    ConnectionClosed,
    RpcError,
    ServerUnreachable,
    StreamError,
)
from ._http import AgentInfo, MessageAccepted, OmnigentClient, SessionInfo
from ._sse import EventStream

__all__ = [
    "AcpClient",
    "AgentInfo",
    "ApiError",
    "ClientError",
    "ConnectionClosed",
    "EventStream",
    "MessageAccepted",
    "OmnigentClient",
    "PermissionHandler",
    "PromptResult",
    "RpcError",
    "ServerUnreachable",
    "SessionInfo",
    "StreamError",
    "UpdateHandler",
    "open_acp_process",
    "open_acp_websocket",
]
