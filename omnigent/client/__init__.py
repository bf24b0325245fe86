"""A small Trio client for omnigent servers: HTTP, resumable SSE, and ACP.

* :class:`OmnigentClient` — the HTTP API of ``omnigent serve`` with typed answers;
  :meth:`OmnigentClient.events` is a session's event stream that reconnects by itself
  after a dropped connection and resumes from the last event id it saw.
* :func:`open_acp_websocket` — the Agent Client Protocol over ``GET /v1/ws``;
  :func:`open_acp_process` — over the stdin/stdout of ``omnigent stdio`` (or any ACP
  agent). Both yield an :class:`AcpClient`.

See ``docs/client.md``.
"""

from ..rpc import ConnectionClosed, RpcError
from ._acp import (
    AcpClient,
    PermissionHandler,
    PromptResult,
    UpdateHandler,
    open_acp_process,
    open_acp_websocket,
)
from ._errors import ApiError, StreamError
from ._http import AgentInfo, MessageAccepted, OmnigentClient, SessionInfo
from ._sse import EventStream

__all__ = [
    "AcpClient",
    "AgentInfo",
    "ApiError",
    "ConnectionClosed",
    "EventStream",
    "MessageAccepted",
    "OmnigentClient",
    "PermissionHandler",
    "PromptResult",
    "RpcError",
    "SessionInfo",
    "StreamError",
    "UpdateHandler",
    "open_acp_process",
    "open_acp_websocket",
]
