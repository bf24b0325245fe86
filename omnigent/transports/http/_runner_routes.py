"""Runners on the HTTP port: ``GET /v1/runners/connect`` (the runner's WebSocket),
``GET /v1/runners`` and ``GET /v1/runners/{runner_id}/status``.

The upgrade is checked before it is accepted, each refusal an HTTP answer with the
usual envelope: the fence's ``Host`` and ``Origin`` rules (a web page must not pose as
a runner), then the token (``Authorization: Bearer TOKEN`` must be one the operator set
with ``serve --runner-token``: else ``401``), then the name (``422`` if malformed,
``409 runner_name_taken`` if a runner of that name is connected on another link). The
first frame must then be ``initialize`` (:mod:`omnigent.link`); the
connection then carries the runner's link until it drops (:meth:`~omnigent.transports.
runner.RunnerHub.attach`). Runners are not users: ``--auth header``'s identity is not
asked of them, the token is what admits them.

``GET /v1/runners`` lists every runner connected here and every runner sessions are
bound to, with how many of the caller's sessions each has; ``/status`` answers the
original's ``{"runner_id", "online"}`` for any name.
"""

from __future__ import annotations

import contextlib
import logging
from typing import TYPE_CHECKING, Any, cast

import trio
from quart import Blueprint, Quart, current_app, websocket

from ...errors import InvalidInput, RunnerNameTaken, Unauthorized
from ...link import CONNECT_PATH, ERROR_CODE, INITIALIZE, Welcome, check_name, parse_hello
from ..runner import RunnerHub
from ._params import AppState, owner, state
from ._websocket import QuartWebSocketStream

if TYPE_CHECKING:
    from ...rpc import RpcError

__all__ = ["blueprint", "install_runner_socket"]

log = logging.getLogger("omnigent.transports.http")

blueprint = Blueprint("omnigent_runners", __name__)

_HANDSHAKE_TIMEOUT = 15.0


@blueprint.get("/runners")
async def list_runners() -> dict[str, Any]:
    from ._answers import RunnerInfo, RunnerList  # imported by the first answer: see _answers

    caller = owner()
    app = state()
    viewer = caller if app.auth == "header" else None
    counts = await app.runtime.runner_session_counts(viewer=viewer)
    connected = {link.runner_id: link for link in await app.runtime.list_runners()}
    names = sorted(set(counts) | set(connected))
    rows = [
        RunnerInfo(
            runner_id=name,
            online=name in connected,
            connected_at=connected[name].connected_at if name in connected else None,
            sessions=counts.get(name, 0),
        )
        for name in names
    ]
    return RunnerList(tuple(rows)).to_dict()


@blueprint.get("/runners/<runner_id>/status")
async def runner_status(runner_id: str) -> dict[str, Any]:
    from ._answers import RunnerStatus  # imported by the first answer: see _answers

    owner()
    if (problem := check_name(runner_id)) is not None:
        raise InvalidInput.at("runner_id", problem)
    link = await state().runtime.find_runner(runner_id)
    return RunnerStatus(runner_id, link is not None).to_dict()


class _Transport:
    """The accepted WebSocket as a link's transport."""

    def __init__(self, ws: Any) -> None:
        self._stream = QuartWebSocketStream(ws)
        self._ws = ws

    async def receive(self) -> str | bytes | None:
        try:
            message = await self._stream.receive()
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            return None
        return message if isinstance(message, str | bytes) else None

    async def send(self, text: str) -> None:
        await self._stream.send(text)

    async def aclose(self) -> None:
        with contextlib.suppress(
            trio.BrokenResourceError, trio.ClosedResourceError, OSError, RuntimeError
        ):
            await self._ws.close(1000)


def _bearer(header: str | None) -> str | None:
    if header is None:
        return None
    scheme, _, token = header.partition(" ")
    return token.strip() or None if scheme.lower() == "bearer" else None


def install_runner_socket(app: Quart) -> None:
    """Add ``GET /v1/runners/connect`` to ``app`` (the runner's WebSocket)."""

    @app.websocket(CONNECT_PATH)
    async def runner_socket() -> Any:
        app_state: AppState = current_app.extensions["omnigent"]
        headers = websocket.headers
        server = websocket.scope.get("server")
        app_state.fence.check_host(headers.get("Host"), server[0] if server else None)
        app_state.fence.check_origin(headers, host=headers.get("Host"), state_changing=True)
        hub = app_state.runners
        if hub is None:
            raise Unauthorized("this server accepts no runners: start it with --runner-token")
        if not hub.accepts(_bearer(headers.get("Authorization"))):
            if not hub.enabled:
                raise Unauthorized("this server accepts no runners: start it with --runner-token")
            raise Unauthorized("the runner token is missing or wrong")
        name = websocket.args.get("name", "")
        if (problem := check_name(name)) is not None:
            raise InvalidInput.at("name", problem)
        link = websocket.args.get("link") or None
        hub.check_name(name, link)  # 409 before the upgrade …
        elsewhere = await app_state.runtime.find_runner(name)
        if elsewhere is not None and not elsewhere.here:
            raise RunnerNameTaken(  # … also when another server has it
                name,
                f"a runner named {name!r} is connected to server {elsewhere.server!r}; "
                "stop it, or start this one with another --name",
            )
        await websocket.accept()
        ws = cast(Any, websocket)._get_current_object()
        transport = _Transport(ws)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_close_when_stopping, app_state.stopping, nursery.cancel_scope)
            await _serve(hub, name, transport)
            nursery.cancel_scope.cancel()
        return None


async def _serve(hub: RunnerHub, name: str, transport: _Transport) -> None:
    """Read ``initialize``, answer it, and carry the runner's link until the socket drops."""
    # JSON-RPC is imported by the first runner that connects: a server no runner
    # reaches answers without it (issue 32).
    from ...rpc import (
        INVALID_REQUEST,
        ConnectionClosed,
        Request,
        RpcError,
        decode,
        encode,
        response,
    )

    with trio.move_on_after(_HANDSHAKE_TIMEOUT):
        first = await transport.receive()
    message = decode(first) if first is not None else None
    if not isinstance(message, Request) or message.method != INITIALIZE:
        await _refuse(
            transport, None, RpcError(INVALID_REQUEST, "Invalid Request: say initialize first")
        )
        return
    try:
        hello = parse_hello(message.params)
    except RpcError as error:
        await _refuse(transport, message.id, error)
        return
    if hello.name != name:
        mismatch = RpcError(INVALID_REQUEST, f"initialize names {hello.name!r}, the URL {name!r}")
        await _refuse(transport, message.id, mismatch)
        return

    async def reply(welcome: Welcome) -> None:
        await transport.send(encode(response(message.id, welcome.to_result())))

    try:
        await hub.attach(hello, transport, reply)
    except RunnerNameTaken as exc:
        data = {ERROR_CODE: exc.code}
        await _refuse(transport, message.id, RpcError(INVALID_REQUEST, exc.message, data))
    except ConnectionClosed:
        pass  # the link ended (the server stops, or a newer process took the name)


async def _refuse(transport: _Transport, request_id: Any, error: RpcError) -> None:
    from ...rpc import ConnectionClosed, encode, error_response

    answer = error_response(request_id, error.code, error.message, error.data)
    with contextlib.suppress(ConnectionClosed):
        await transport.send(encode(answer))
    await transport.aclose()


async def _close_when_stopping(stopping: trio.Event, scope: trio.CancelScope) -> None:
    await stopping.wait()
    scope.cancel()
