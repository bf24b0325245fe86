"""The HTTP + SSE transport: a Quart-Trio app over a :class:`~omnigent.Runtime`.

:func:`create_app` builds the app; it keeps no state of its own beyond the runtime,
the auth mode and the ``stopping`` event the server runner sets before shutting
Hypercorn down (open SSE streams end on it). Routes live in small modules:
``_agents_files`` (agents, files), ``_session_routes`` (sessions, items, children),
``_stream_routes`` (events in, SSE out), ``_permission_routes`` (sharing),
``_mcp_routes`` (the session's tools as an MCP server), ``_resource_routes`` (live
terminals and their screens), ``_server_routes`` (``/health``, the servers sharing the
database), ``_feed_routes`` (the sessions feed), ``_console`` (the web console at ``/``,
a client of all of the above: ``docs/console.md``); ``_access``
checks who may touch what; ``_http_errors`` puts every failure into the
``{"error": {...}}`` envelope; ``_openapi`` is the OpenAPI 3.1 document served at
``/v1/openapi.json``. The wire contract is in ``docs/http.md``. :mod:`._websocket` adds
the ACP WebSocket (``GET /v1/ws``) to the same app.

Before any route, every request passes the cross-site fence (:mod:`._fence`: ``Host``,
``Origin``, ``Content-Type``; the WebSocket upgrade checks the same ``Host`` and
``Origin`` rules), then the identity check. Around the app,
:class:`._keepalive.SettleBodies` keeps connections usable after an early answer. The
threat model and what each defence covers are in ``docs/security.md``.
"""

from __future__ import annotations

import logging
from collections.abc import Collection
from typing import Any

import trio
from quart import request
from quart.routing import QuartRule
from quart.wrappers import Request
from quart_trio import QuartTrio

from ...core import MAX_FILE_BYTES, Runtime
from ..runner import RunnerHub
from . import (
    _agent_file_routes,
    _approval_page,
    _elicitation_routes,
    _feed_routes,
    _hook_routes,
    _mcp_routes,
    _permission_routes,
    _resource_routes,
    _runner_routes,
    _server_routes,
    _session_routes,
    _stream_routes,
)
from ._console import console_blueprint, load_assets
from ._errors import install_error_handlers, internal_error_response
from ._fence import Fence, install_fence, install_media_types
from ._keepalive import SettleBodies
from ._params import AppState, AuthMode, owner, state
from ._request_log import RequestLog
from ._websocket import install_websocket
from ._ws_slots import MAX_WEBSOCKETS, MAX_WEBSOCKETS_PER_USER, WebSocketSlots

__all__ = ["API_PREFIX", "create_app"]

API_PREFIX = "/v1"
_OPEN_PATHS = ("/health",)

log = logging.getLogger("omnigent.transports.http")


class _LazyBuilderRule(QuartRule):
    """A route whose URL builders are compiled when a URL is first built from it.

    Werkzeug compiles two builder functions per rule as it is added (an AST each:
    what ``url_for`` and redirects use) — 10 ms of a server's start for its forty-odd
    rules (``benchmarks/startup.py``), for builders nothing here calls (omnigent
    builds no URL from its routes). Matching a request is not affected: only the
    builders wait, each compiled by the first URL built from its rule.
    """

    def _compile_builder(self, *args: Any, **kwargs: Any) -> Any:
        compile_builder = super()._compile_builder
        built: list[Any] = []

        def build(rule: QuartRule, /, **values: Any) -> Any:
            if not built:
                built.append(compile_builder(*args, **kwargs).__get__(rule, None))
            return built[0](**values)

        return build


class _App(QuartTrio):
    """QuartTrio whose every answer is an envelope, even for a non-``Exception``.

    Quart's handlers see ``Exception`` (and groups of them); a ``SystemExit`` raised by
    code a route calls would pass them and reach Hypercorn, which answers an empty
    ``500`` (or, unhandled, would stop the server). It is logged and answered with the
    ``internal_error`` envelope here. Cancellation, ``KeyboardInterrupt`` and
    ``GeneratorExit`` keep propagating.
    """

    url_rule_class = _LazyBuilderRule  # type: ignore[assignment]  # a QuartRule, as ever

    async def handle_request(self, request: Request) -> Any:
        try:
            return await super().handle_request(request)
        except (trio.Cancelled, KeyboardInterrupt, GeneratorExit):
            raise
        except BaseExceptionGroup as group:
            if group.subgroup((trio.Cancelled, KeyboardInterrupt, GeneratorExit)) is not None:
                raise
            log.exception("an HTTP route raised an exception group")
            return internal_error_response()
        except BaseException:  # see the class docstring
            log.exception("an HTTP route raised a BaseException")
            return internal_error_response()


def create_app(
    runtime: Runtime,
    *,
    auth: AuthMode = "none",
    stopping: trio.Event | None = None,
    ping_interval: float = 15.0,
    allowed_origins: Collection[str] = (),
    allowed_hosts: Collection[str] = (),
    console: bool = True,
    max_websockets: int = MAX_WEBSOCKETS,
    runners: RunnerHub | None = None,
) -> QuartTrio:
    """The HTTP app serving ``runtime``.

    Args:
        runtime: the open runtime every route calls.
        auth: ``"none"`` (everyone is ``local``) or ``"header"`` (the caller is the
            ``X-Forwarded-Email`` header; a request without it is ``401``, except
            ``/health``).
        console: serve the web console at ``/`` (its files under ``/console/``).
        runners: the runners' hub (``GET /v1/runners/connect`` admits runners into it);
            ``None``: every runner is refused ``401``.
        stopping: set by the server runner before it shuts Hypercorn down; every open
            SSE stream ends when it is set. A new event by default.
        ping_interval: seconds of silence before an SSE stream sends ``: ping``.
        allowed_origins: web app origins (``https://app.example``) admitted on
            state-changing routes and the ACP WebSocket (``GET /v1/ws``), with CORS
            headers (``serve --allowed-origin``).
        allowed_hosts: ``Host`` names answered besides the server's own address,
            loopback and ``localhost`` (``serve --allowed-host``; ``*``: any).
        max_websockets: ACP WebSockets held open at once (one caller may hold at most
            :data:`MAX_WEBSOCKETS_PER_USER` of them); past it an upgrade is ``503``.

    Raises:
        ValueError: an unknown ``auth``, or a malformed origin or host.

    Resource handling: the app owns nothing; each SSE response owns its own relay
    task, which ends with the response.
    """
    if auth not in ("none", "header"):
        raise ValueError(f"auth must be 'none' or 'header', not {auth!r}")
    fence = Fence.of(allowed_origins, allowed_hosts)
    # No static folder: Quart would add a ``/static/<path>`` route serving files.
    app = _App("omnigent", static_folder=None)
    # ``/v1//agents`` would otherwise be a 308 redirect with an HTML page: every answer
    # is JSON (a path that is not a route is the 404 envelope). Set before any route
    # is added: rules take the map's setting when they are bound.
    app.url_map.merge_slashes = False
    app.url_map.strict_slashes = False
    app.config["MAX_CONTENT_LENGTH"] = MAX_FILE_BYTES + (1 << 20)
    app.json.sort_keys = False  # type: ignore[attr-defined]  # keep the wire's field order
    app.extensions["omnigent"] = AppState(
        runtime,
        auth,
        trio.Event() if stopping is None else stopping,
        ping_interval=ping_interval,
        fence=fence,
        websockets=WebSocketSlots(max_websockets, min(max_websockets, MAX_WEBSOCKETS_PER_USER)),
        runners=runners,
    )
    install_error_handlers(app)
    app.asgi_app = SettleBodies(app.asgi_app)  # type: ignore[method-assign, assignment]
    # Outermost: one log line per request, whatever answered it (docs/observability.md).
    app.asgi_app = RequestLog(app.asgi_app)  # type: ignore[method-assign]
    install_fence(app, lambda: state().fence)

    @app.before_request
    async def require_identity() -> None:
        # Trailing slashes reach the same route (``/health/``): compare without them.
        if request.path.rstrip("/") not in _OPEN_PATHS:
            owner()  # raises Unauthorized when --auth header and no identity

    install_media_types(app)

    @app.get(f"{API_PREFIX}/openapi.json")
    async def openapi() -> dict[str, Any]:
        # Imported (and the document built, once) by the first request for it: a
        # server's start does not pay for describing every route.
        from ._openapi import openapi_document

        return openapi_document()

    app.register_blueprint(_server_routes.health_blueprint)
    modules = (
        _feed_routes,
        _agent_file_routes,
        _session_routes,
        _stream_routes,
        _permission_routes,
    )
    for module in modules:
        app.register_blueprint(module.blueprint, url_prefix=API_PREFIX)
    # The servers sharing the database (one process on SQLite).
    app.register_blueprint(_server_routes.blueprint, url_prefix=API_PREFIX)
    # The runners (docs/runners.md): their list and status, and their WebSocket.
    app.register_blueprint(_runner_routes.blueprint, url_prefix=API_PREFIX)
    _runner_routes.install_runner_socket(app)
    # A session's live resources (terminals) and a terminal's screen.
    app.register_blueprint(_resource_routes.blueprint, url_prefix=API_PREFIX)
    # Elicitations (resolve, look up), coding-agent hooks, policy evaluation.
    for module in (_elicitation_routes, _hook_routes, _mcp_routes):
        app.register_blueprint(module.blueprint, url_prefix=API_PREFIX)
    # The HTML approval page is for people, at the path params.url names: no /v1.
    app.register_blueprint(_approval_page.blueprint)
    # ACP over WebSocket (GET /v1/ws): the same runtime, port and identity.
    install_websocket(app)  # the fence's Host and Origin rules, on the upgrade
    if console:
        # The web console (docs/console.md): a client of the routes above.
        app.register_blueprint(console_blueprint(load_assets))
    return app
