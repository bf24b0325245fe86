"""An ACP client: drive any ACP agent — ``omnigent stdio`` or ``GET /v1/ws`` — from Trio.

:class:`AcpClient` speaks the client side of the Agent Client Protocol over a
JSON-RPC message stream (the same :class:`~omnigent.rpc._connection.RpcConnection`
the agent side uses). :func:`open_acp_websocket` connects it to an omnigent server's
``/v1/ws``; :func:`open_acp_process` starts an agent process (``omnigent stdio``, or
any ACP agent) and speaks to it over its stdin/stdout.

What the agent asks of the client is answered by callbacks:

* ``on_permission(params) -> option id | None`` answers
  ``session/request_permission`` (``None`` is the ``cancelled`` outcome). Without one,
  every request is rejected (``reject_once``): fail closed.
* ``on_update(session_id, update)`` sees every ``session/update``, in order (a
  prompt's result also collects the updates that arrived while it ran).

The client advertises no ``fs`` or ``terminal`` capability: the agent works on its
own files.

Resource handling: each ``open_*`` owns a nursery that lives as long as the block;
leaving it closes the connection (and, for a process, ends it: stdin closed, then
SIGTERM, then SIGKILL after a grace).

Error handling: what comes out of a block is one exception, never a group — the
client's own (:class:`~._errors.RpcError`, :class:`~._errors.ConnectionClosed`,
:class:`~._errors.ServerUnreachable`, :class:`~._errors.ApiError` for an upgrade the
server refused), or the body's own error as it raised it.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import attrs
import trio
import trio_websocket

from .. import rpc
from ..rpc import NdjsonStream, RpcConnection
from ._errors import ApiError, ConnectionClosed, RpcError, ServerUnreachable, single_error

__all__ = [
    "AcpClient",
    "PermissionHandler",
    "PromptResult",
    "UpdateHandler",
    "open_acp_process",
    "open_acp_websocket",
]

PermissionHandler = Callable[[dict[str, Any]], Awaitable[str | None]]
UpdateHandler = Callable[[str, dict[str, Any]], Awaitable[None] | None]

_PROCESS_GRACE = 5.0


@attrs.frozen
class PromptResult:
    """How a prompt ended, and the ``session/update`` payloads sent while it ran."""

    stop_reason: str
    updates: tuple[dict[str, Any], ...]

    @property
    def text(self) -> str:
        """The agent's answer: the text of its ``agent_message_chunk`` updates."""
        return "".join(
            u["content"].get("text", "")
            for u in self.updates
            if u.get("sessionUpdate") == "agent_message_chunk"
            and isinstance(u.get("content"), dict)
        )


async def _reject(params: dict[str, Any]) -> str | None:
    return "reject_once"


class _ClientSide:
    """The methods the agent may call on the client."""

    methods = frozenset({"session/request_permission"})
    notifications = frozenset({"session/update"})
    # Each permission request stands alone: none waits for another's answer.
    ordered: frozenset[str] = frozenset()

    def __init__(self, on_permission: PermissionHandler, on_update: UpdateHandler | None) -> None:
        self.on_permission = on_permission
        self.on_update = on_update
        # Session id -> the updates collected for the prompt running on it.
        self.collecting: dict[str, list[dict[str, Any]]] = {}

    async def handle_request(self, method: str, params: Any, admit: Callable[[], None]) -> Any:
        option = await self.on_permission(params if isinstance(params, dict) else {})
        if option is None:
            return {"outcome": {"outcome": "cancelled"}}
        return {"outcome": {"outcome": "selected", "optionId": option}}

    async def input_ended(self) -> None:
        """The agent closed its side: nothing of ours waits on it (prompts fail)."""

    async def handle_notification(self, method: str, params: Any) -> None:
        if not isinstance(params, dict) or not isinstance(params.get("update"), dict):
            return
        session_id = str(params.get("sessionId", ""))
        update: dict[str, Any] = params["update"]
        collected = self.collecting.get(session_id)
        if collected is not None:
            collected.append(update)
        if self.on_update is not None:
            answer = self.on_update(session_id, update)
            if answer is not None:
                await answer


class AcpClient:
    """The client side of one ACP connection. Made by the ``open_*`` functions."""

    def __init__(self, connection: RpcConnection, side: _ClientSide) -> None:
        self._connection = connection
        self._side = side
        self.agent_info: dict[str, Any] = {}
        self.agent_capabilities: dict[str, Any] = {}

    async def call(self, method: str, params: dict[str, Any] | None = None) -> Any:
        """Any request (``_omnigent/session/info``, say); its result.

        Raises:
            RpcError: the agent answered an error. ConnectionClosed: it went away.
        """
        try:
            return await self._connection.request(method, params or {})
        except (rpc.RpcError, rpc.ConnectionClosed) as exc:
            raise _translated(exc) from exc

    async def initialize(self) -> dict[str, Any]:
        """Negotiate the protocol (the ``open_*`` functions call this for you)."""
        result: dict[str, Any] = await self.call(
            "initialize",
            {
                "protocolVersion": 1,
                "clientCapabilities": {
                    "fs": {"readTextFile": False, "writeTextFile": False},
                    "terminal": False,
                },
                "clientInfo": {"name": "omnigent.client", "version": "1"},
            },
        )
        self.agent_info = result.get("agentInfo") or {}
        self.agent_capabilities = result.get("agentCapabilities") or {}
        return result

    async def new_session(self, cwd: str) -> str:
        """A new session working in ``cwd`` (an absolute path); its id."""
        result = await self.call("session/new", {"cwd": cwd, "mcpServers": []})
        session_id: str = result["sessionId"]
        return session_id

    async def load_session(self, session_id: str, cwd: str) -> list[dict[str, Any]]:
        """Open an existing session; the updates that replayed its history."""
        collected = self._side.collecting.setdefault(session_id, [])
        try:
            await self.call("session/load", {"sessionId": session_id, "cwd": cwd, "mcpServers": []})
        finally:
            self._side.collecting.pop(session_id, None)
        return collected

    async def list_sessions(
        self, cwd: str | None = None, cursor: str | None = None
    ) -> dict[str, Any]:
        """``{sessions: [...], nextCursor?}``."""
        params = {k: v for k, v in (("cwd", cwd), ("cursor", cursor)) if v is not None}
        result: dict[str, Any] = await self.call("session/list", params)
        return result

    async def prompt(self, session_id: str, prompt: str | Sequence[dict[str, Any]]) -> PromptResult:
        """Send a prompt and wait for its turn to end.

        ``prompt`` is text, or ACP content blocks.

        Cancellation: sends ``session/cancel`` (the agent cancels the turn), then stops
        waiting.
        """
        blocks = [{"type": "text", "text": prompt}] if isinstance(prompt, str) else list(prompt)
        if session_id in self._side.collecting:
            raise RuntimeError(f"a prompt is already running on {session_id}")
        collected = self._side.collecting.setdefault(session_id, [])
        try:
            result = await self.call("session/prompt", {"sessionId": session_id, "prompt": blocks})
        except trio.Cancelled:
            with trio.move_on_after(1, shield=True), contextlib.suppress(ConnectionClosed):
                await self.cancel(session_id)
            raise
        finally:
            self._side.collecting.pop(session_id, None)
        return PromptResult(str(result.get("stopReason")), tuple(collected))

    async def cancel(self, session_id: str) -> None:
        """Ask the agent to cancel the session's running prompt (``session/cancel``).

        Raises:
            ConnectionClosed: the agent went away.
        """
        try:
            await self._connection.notify("session/cancel", {"sessionId": session_id})
        except rpc.ConnectionClosed as exc:
            raise _translated(exc) from exc

    async def set_model(self, session_id: str, model: str) -> list[dict[str, Any]]:
        """Pick the session's model; the session's config options after the change."""
        result = await self.call(
            "session/set_config_option",
            {"sessionId": session_id, "configId": "model", "value": model},
        )
        options: list[dict[str, Any]] = result["configOptions"]
        return options


@asynccontextmanager
async def _serving(
    stream: Any, on_permission: PermissionHandler | None, on_update: UpdateHandler | None
) -> AsyncIterator[AcpClient]:
    side = _ClientSide(on_permission or _reject, on_update)
    connection = RpcConnection(stream, side)
    with _one_error():
        async with trio.open_nursery() as nursery:
            await nursery.start(connection.run)
            client = AcpClient(connection, side)
            await client.initialize()
            yield client
            nursery.cancel_scope.cancel()


def _translated(exc: BaseException) -> BaseException:
    """The client's own type for an error of the connection underneath."""
    if isinstance(exc, rpc.RpcError) and not isinstance(exc, RpcError):
        return RpcError(exc.code, exc.message, exc.data)
    if isinstance(exc, rpc.ConnectionClosed) and not isinstance(exc, ConnectionClosed):
        return ConnectionClosed(str(exc) or "the connection went away")
    return exc


@contextlib.contextmanager
def _one_error() -> Iterator[None]:
    """Let one exception out of a nursery, never its group (see :func:`single_error`)."""
    try:
        yield
    except BaseExceptionGroup as group:
        error = single_error(group)
        if error is group:
            raise  # only cancellation: the scope that cancelled takes it
        translated = _translated(error)
        if translated is error:
            raise error from error.__cause__
        raise translated from error


class _WebSocketStream:
    def __init__(self, ws: trio_websocket.WebSocketConnection) -> None:
        self._ws = ws

    async def receive(self) -> str | bytes | None:
        try:
            message: str | bytes = await self._ws.get_message()
        except trio_websocket.ConnectionClosed:
            return None
        return message

    async def send(self, text: str) -> None:
        try:
            await self._ws.send_message(text)
        except trio_websocket.ConnectionClosed as exc:
            raise ConnectionClosed("the server closed the socket") from exc


@asynccontextmanager
async def open_acp_websocket(
    url: str,
    *,
    headers: dict[str, str] | None = None,
    on_permission: PermissionHandler | None = None,
    on_update: UpdateHandler | None = None,
) -> AsyncIterator[AcpClient]:
    """An initialized ACP client on an omnigent server's WebSocket.

    Args:
        url: ``ws://HOST:PORT/v1/ws`` (``?agent=NAME`` picks the agent), or the
            server's ``http://`` URL (``/v1/ws`` is appended).
        headers: extra upgrade headers (``X-Forwarded-Email`` behind an auth proxy).
    """
    if url.startswith(("http://", "https://")):
        url = "ws" + url.removeprefix("http").rstrip("/") + "/v1/ws"
    extra = [(k.encode(), v.encode()) for k, v in (headers or {}).items()]
    connected = False
    try:
        with _one_error():
            async with trio_websocket.open_websocket_url(
                url, extra_headers=extra, max_message_size=64 * 1024 * 1024
            ) as ws:
                connected = True
                try:
                    async with _serving(_WebSocketStream(ws), on_permission, on_update) as client:
                        yield client
                finally:
                    # trio-websocket 0.12 leaves a client's TCP stream open when the server
                    # started the close (its reader stops at EOF without closing it).
                    stream = getattr(ws, "_stream", None)
                    if stream is not None:
                        with trio.CancelScope(shield=True):
                            await stream.aclose()
    except trio_websocket.ConnectionRejected as exc:
        if connected:
            raise
        raise _rejected(url, exc) from exc
    except (OSError, trio_websocket.HandshakeError) as exc:
        if connected:
            raise
        raise ServerUnreachable(url, _unreachable_reason(exc)) from exc


def _unreachable_reason(exc: BaseException) -> str:
    """Why a WebSocket could not be opened: the socket error under trio-websocket's own."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, OSError):
            return seen.strerror or str(seen) or "the connection failed"
        seen = seen.__cause__ or seen.__context__
    return str(exc) or "the WebSocket handshake failed"


def _rejected(url: str, exc: trio_websocket.ConnectionRejected) -> ApiError:
    """The server's answer to an upgrade it refused, as the HTTP API's error."""
    body = exc.body or b""
    try:
        error = json.loads(body)["error"]
        return ApiError(exc.status_code, error["code"], error["message"], error.get("details", ()))
    except (ValueError, KeyError, TypeError):
        text = body[:500].decode(errors="replace") or f"the upgrade to {url} was refused"
        return ApiError(exc.status_code, "http_error", text)


@asynccontextmanager
async def open_acp_process(
    command: Sequence[str],
    *,
    on_permission: PermissionHandler | None = None,
    on_update: UpdateHandler | None = None,
    env: dict[str, str] | None = None,
    cwd: str | None = None,
) -> AsyncIterator[AcpClient]:
    """Start an ACP agent process (``["omnigent", "stdio", "--agent", PATH]``) and talk to it.

    The process's stderr is inherited. Leaving the block closes its stdin, waits up to
    five seconds, then sends SIGTERM (and SIGKILL after another five).
    """
    process = await trio.lowlevel.open_process(
        list(command), stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, cwd=cwd
    )
    try:
        assert process.stdin is not None and process.stdout is not None
        stream = NdjsonStream(process.stdout, process.stdin)
        async with _serving(stream, on_permission, on_update) as client:
            yield client
    finally:
        with trio.CancelScope(shield=True):
            await _end(process)


async def _end(process: trio.Process) -> None:
    if process.stdin is not None:
        await process.stdin.aclose()
    with trio.move_on_after(_PROCESS_GRACE):
        await process.wait()
        return
    process.terminate()
    with trio.move_on_after(_PROCESS_GRACE):
        await process.wait()
        return
    process.kill()
    await process.wait()
