"""The runtime's side of the tool bridge: a turn served on a private Unix socket.

:func:`serve_bridge` listens on a CLI process's :class:`~._protocol.BridgeAddress`
for as long as one turn runs, in a nursery of that turn: every exchange — a tool
call the CLI's MCP shim relays, a policy check pi's extension asks — runs inside the
turn and is cancelled with it. Between turns nobody listens, and a CLI that tries
is told no turn is running.

:class:`TurnTools` is what the bridge serves: the omnigent tools offered to the CLI
(:func:`~._protocol.offered`), each call run by the turn's
:meth:`~omnigent.harnesses.base.TurnContext.call_tool` — through the session's
policies and elicitations, recorded in its items like any tool call — and checks of
the CLI's own tools answered by the session's policies.

Bounded: one request line of at most :data:`~._protocol.MAX_REQUEST` bytes per
connection, read within :data:`READ_TIMEOUT`; at most :data:`MAX_EXCHANGES` at once
(more are answered with an error at once). A connection closed while its exchange is
in flight (the CLI gave the call up) cancels that exchange.
"""

from __future__ import annotations

import errno
import logging
import os
import stat
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager, suppress
from pathlib import Path
from typing import Any, Protocol

import trio

from ...errors import HarnessError, OmnigentError
from ..base import ToolSchema, TurnContext
from ._protocol import (
    MAX_REQUEST,
    BridgeAddress,
    CallTool,
    CheckTool,
    ListTools,
    encode,
    listing,
    offered,
    parse_request,
)

__all__ = ["MAX_EXCHANGES", "READ_TIMEOUT", "BridgeTurn", "TurnTools", "serve_bridge"]

log = logging.getLogger(__name__)

MAX_EXCHANGES = 64
"""Exchanges one bridge serves at once."""
READ_TIMEOUT = 10.0
"""Seconds a connection has to send its request line."""
_READ = 65536


class BridgeTurn(Protocol):
    """What a bridge serves: one turn's tools and policies."""

    @property
    def tools(self) -> tuple[ToolSchema, ...]: ...

    async def call(self, request: CallTool) -> str: ...

    async def check(self, request: CheckTool) -> tuple[bool, str]: ...


class TurnTools:
    """The bridge's view of one turn (see the module docstring).

    Args:
        ctx: the turn.
        tools: the turn's tools (``TurnRequest.tools``); omnigent's OS tools are left
            out, since the CLI has its own.
        harness: the harness's name, for the policy event's context.
        before_call: awaited before a call is recorded — the harness's relay ends the
            assistant message it is streaming, so the history keeps the model's order.
    """

    def __init__(
        self,
        ctx: TurnContext,
        tools: Sequence[ToolSchema],
        *,
        harness: str,
        before_call: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self._ctx = ctx
        self._harness = harness
        self._before_call = before_call
        self._tools = offered(tools)
        self._names = frozenset(tool.name for tool in self._tools)

    @property
    def tools(self) -> tuple[ToolSchema, ...]:
        return self._tools

    async def call(self, request: CallTool) -> str:
        """Run the tool through the turn; an ``Error: …`` string for one not offered."""
        if request.name not in self._names:
            known = ", ".join(sorted(self._names)) or "none"
            return f"Error: unknown tool {request.name!r} (available: {known})"
        if self._before_call is not None:
            await self._before_call()
        return await self._ctx.call_tool(request.name, request.arguments, call_id=request.call_id)

    async def check(self, request: CheckTool) -> tuple[bool, str]:
        """The session's policies on one of the CLI's own tool calls: DENY refuses,
        ALLOW and no opinion let it run, an ASK asks the person first."""
        event = {
            "type": "PHASE_TOOL_CALL",
            "data": {"tool_name": request.tool_name, "tool_input": request.tool_input},
            "context": {"harness": self._harness, "tool_use_id": request.call_id},
        }
        verdict = await self._ctx.evaluate_policy(event)
        reason = verdict.get("reason")
        if verdict.get("result") == "POLICY_ACTION_DENY":
            text = reason if isinstance(reason, str) and reason else "denied by omnigent's policies"
            return False, text
        return True, reason if isinstance(reason, str) else ""


@asynccontextmanager
async def serve_bridge(address: BridgeAddress, turn: BridgeTurn) -> AsyncIterator[None]:
    """Serve ``turn`` on ``address`` while the block runs.

    Raises:
        HarnessError: the socket cannot be made (its path holds something else).

    Cancellation: leaving the block, normally or not, cancels every exchange in
    flight (a tool call the CLI waits on is cancelled with the turn) and removes the
    socket file.
    """
    listener = await _listen(address.path)
    try:
        async with trio.open_nursery() as nursery:
            limit = trio.CapacityLimiter(MAX_EXCHANGES)
            nursery.start_soon(_accept, listener, address.token, turn, limit, nursery)
            try:
                yield
            finally:
                nursery.cancel_scope.cancel()
    finally:
        with trio.CancelScope(shield=True):
            await listener.aclose()
        _unlink(address.path)


async def _listen(path: Path) -> trio.SocketListener:
    _unlink(path)  # an earlier turn's, or a crashed runtime's
    sock = trio.socket.socket(trio.socket.AF_UNIX, trio.socket.SOCK_STREAM)
    try:
        await sock.bind(str(path))
        os.chmod(path, 0o600)
        sock.listen(MAX_EXCHANGES)
    except OSError as exc:
        sock.close()
        raise HarnessError(f"cannot listen for the tool bridge at {path}: {exc}") from exc
    return trio.SocketListener(sock)


def _unlink(path: Path) -> None:
    """Remove a socket left at ``path``; anything else there is refused."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(mode):
        raise HarnessError(f"the tool bridge's path {path} holds something that is not a socket")
    with suppress(FileNotFoundError):
        os.unlink(path)


async def _accept(
    listener: trio.SocketListener,
    token: str,
    turn: BridgeTurn,
    limit: trio.CapacityLimiter,
    nursery: trio.Nursery,
) -> None:
    while True:
        try:
            stream = await listener.accept()
        except OSError as exc:
            if exc.errno in (errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.ENOBUFS):
                log.warning("tool bridge: cannot accept (%s); retrying", exc)
                await trio.sleep(0.1)
                continue
            raise
        nursery.start_soon(_exchange, stream, token, turn, limit)


async def _exchange(
    stream: trio.SocketStream, token: str, turn: BridgeTurn, limit: trio.CapacityLimiter
) -> None:
    async with stream:
        try:
            limit.acquire_nowait()
        except trio.WouldBlock:
            await _send(stream, {"error": "too many requests at once"})
            return
        try:
            line = await _read_line(stream)
            if line is None:
                return
            request = parse_request(line, token)
            if isinstance(request, str):
                await _send(stream, {"error": request})
                return
            answer = await _answer_unless_abandoned(stream, turn, request)
            if answer is not None:
                await _send(stream, answer)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass  # the CLI went away: nothing to answer
        finally:
            limit.release()


async def _read_line(stream: trio.SocketStream) -> bytes | None:
    """The request line, or ``None`` (answered already) if it is missing or too long."""
    buffer = bytearray()
    with trio.move_on_after(READ_TIMEOUT):
        while b"\n" not in buffer:
            if len(buffer) > MAX_REQUEST:
                await _send(stream, {"error": f"the request is over {MAX_REQUEST} bytes"})
                return None
            chunk = await stream.receive_some(_READ)
            if not chunk:
                return None  # closed before asking anything
            buffer += chunk
        return bytes(buffer[: buffer.index(b"\n")])
    await _send(stream, {"error": f"no request within {READ_TIMEOUT:g} s"})
    return None


async def _answer_unless_abandoned(
    stream: trio.SocketStream, turn: BridgeTurn, request: ListTools | CallTool | CheckTool
) -> dict[str, Any] | None:
    """The answer, or ``None`` if the CLI closed the connection first (then the
    exchange was cancelled: a tool call the CLI gave up does not go on)."""
    answer: dict[str, Any] | None = None
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_cancel_on_close, stream, nursery.cancel_scope)
        try:
            answer = await _answer(turn, request)
        except OmnigentError as exc:
            answer = {"error": exc.message}
        nursery.cancel_scope.cancel()
    return answer


async def _cancel_on_close(stream: trio.SocketStream, scope: trio.CancelScope) -> None:
    with suppress(trio.BrokenResourceError, trio.ClosedResourceError):
        await stream.receive_some(1)  # nothing more is sent: any return means it is over
    scope.cancel()


async def _answer(turn: BridgeTurn, request: ListTools | CallTool | CheckTool) -> dict[str, Any]:
    if isinstance(request, ListTools):
        return {"tools": listing(turn.tools)}
    if isinstance(request, CallTool):
        return {"output": await turn.call(request)}
    allow, reason = await turn.check(request)
    return {"allow": allow, "reason": reason}


async def _send(stream: trio.SocketStream, answer: Mapping[str, Any]) -> None:
    await stream.send_all(encode(answer))
