"""The cross-site fence: which ``Host``, ``Origin`` and ``Content-Type`` a request may carry.

With ``--auth none`` on 127.0.0.1 the server trusts whoever can reach it, and a web page
the user visits can reach it: the browser sends "simple" cross-site requests
(``text/plain`` or form bodies) without asking, and a DNS-rebinding page makes the
browser treat the server as same-origin. The fence refuses each of those before a route
runs (see ``docs/security.md``):

* **Host** (``421 misdirected_request``, every request): the ``Host`` header must name
  this server — the address the connection reached (the bound address), a loopback
  address or ``localhost`` (names a page cannot rebind), or a name passed with
  ``--allowed-host`` (``*`` admits any). The port is not compared: proxies rewrite it.
* **Origin** (``403 cross_site_request``, every state-changing method): a request
  whose ``Origin`` is neither the server's own (its host and port are the ``Host``
  header's, its scheme the one the request came by — ``X-Forwarded-Proto`` behind a
  TLS proxy) nor one passed with ``--allowed-origin`` is refused; so is one without
  ``Origin`` whose ``Sec-Fetch-Site`` says ``cross-site`` or ``same-site``. Requests
  from programs (no ``Origin``, no ``Sec-Fetch-Site``) pass.
* **CORS**: a request from an allowed origin gets ``Access-Control-Allow-Origin`` (with
  credentials); a preflight (``OPTIONS`` with ``Access-Control-Request-Method``) from
  one gets ``204`` with the methods and headers the API uses; from anyone else, ``403``.
* **Content-Type** (``415 unsupported_media_type``, ``POST``/``PUT``/``PATCH``): a
  route reads only the media types it declares with :func:`accepts` —
  ``application/json`` unless it says otherwise — and refuses any other before a byte
  of the body is parsed.

Sharing: :class:`Fence` is pure (no Quart): ``check_host`` and ``check_origin`` take
plain header values, so another transport sharing the port applies the same rules —
the WebSocket upgrade (``GET /v1/ws``) calls ``fence.check_host(...)`` and
``fence.check_origin(...)`` with ``state_changing=True`` on the handshake's headers
(a page must not drive an agent over a socket either). :func:`install_fence` is the
Quart glue for the HTTP app (and :func:`install_media_types`, which runs after the
identity check); the app's fence is ``AppState.fence``.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Iterable
from typing import Any, Final, Protocol, TypeVar
from urllib.parse import urlsplit

import attrs
from quart import Quart, Response, current_app, g, request

from ...errors import CrossSiteRequest, MisdirectedRequest, UnsupportedMediaType

__all__ = [
    "JSON",
    "STATE_CHANGING",
    "Fence",
    "HeaderLookup",
    "accepts",
    "install_fence",
    "install_media_types",
    "normalise_origin",
    "own_scheme",
]

F = TypeVar("F", bound=Callable[..., Any])

JSON: Final = ("application/json",)
STATE_CHANGING: Final = frozenset({"POST", "PUT", "PATCH", "DELETE"})
_WITH_BODY: Final = frozenset({"POST", "PUT", "PATCH"})
_DEFAULT_PORTS: Final = {"http": 80, "https": 443, "ws": 80, "wss": 443}
_LOCAL_NAMES: Final = ("localhost",)
_CORS_METHODS: Final = "GET, POST, PUT, PATCH, DELETE"
_CORS_HEADERS: Final = "Content-Type, Last-Event-ID, Authorization"
_ACCEPTS_ATTR: Final = "_omnigent_accepts"


class HeaderLookup(Protocol):
    """Request headers, looked up case-insensitively (a Quart/Werkzeug ``Headers``)."""

    def get(self, key: str) -> str | None: ...


def normalise_origin(value: str) -> str | None:
    """``scheme://host[:port]`` in lower case without a default port, or ``None``.

    ``None`` for anything that is not an origin (``null``, a path, no host).
    """
    try:
        parts = urlsplit(value.strip())
        port = parts.port
    except ValueError:
        return None
    scheme, host = parts.scheme.lower(), parts.hostname
    if scheme not in _DEFAULT_PORTS or not host or parts.path not in ("", "/"):
        return None
    if parts.query or parts.fragment or parts.username or parts.password:
        return None
    shown = f"[{host}]" if ":" in host else host
    if port is not None and port != _DEFAULT_PORTS[scheme]:
        shown = f"{shown}:{port}"
    return f"{scheme}://{shown}"


def _split_host(value: str) -> tuple[str, int | None] | None:
    """``(hostname, port)`` of a ``Host`` header value, or ``None`` if malformed."""
    try:
        parts = urlsplit(f"//{value.strip()}")
        port = parts.port
    except ValueError:
        return None
    if not parts.hostname or parts.path or parts.username or parts.password:
        return None
    return parts.hostname.lower(), port


def _is_loopback(host: str) -> bool:
    if host in _LOCAL_NAMES or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@attrs.frozen
class Fence:
    """The allowed origins and hosts of one server, and the checks that use them.

    Build it with :meth:`of`, which validates what the command line gave.
    """

    allowed_origins: frozenset[str] = frozenset()
    allowed_hosts: frozenset[str] = frozenset()

    @classmethod
    def of(cls, origins: Iterable[str] = (), hosts: Iterable[str] = ()) -> Fence:
        """A fence admitting ``origins`` (URLs) and ``hosts`` (names, or ``*``).

        Raises:
            ValueError: naming an origin that is not ``scheme://host[:port]``, or an
                empty host name.
        """
        normalised: set[str] = set()
        for origin in origins:
            found = normalise_origin(origin)
            if found is None:
                raise ValueError(f"--allowed-origin {origin!r} is not scheme://host[:port]")
            normalised.add(found)
        names: set[str] = set()
        for host in hosts:
            name = host.strip().lower()
            if not name:
                raise ValueError("--allowed-host needs a host name")
            names.add(name)
        return cls(frozenset(normalised), frozenset(names))

    def check_host(self, host: str | None, server_address: str | None) -> None:
        """Refuse a ``Host`` that names neither this server nor an allowed host.

        Args:
            host: the ``Host`` header (``None`` if missing).
            server_address: the local address the connection reached (ASGI
                ``scope["server"][0]``), if known.

        Raises:
            MisdirectedRequest: naming the host refused.
        """
        if "*" in self.allowed_hosts:
            return
        parts = _split_host(host) if host is not None else None
        if parts is None:
            raise MisdirectedRequest("the request has no valid Host header")
        name, port = parts
        if name in self.allowed_hosts or (
            port is not None and f"{name}:{port}" in self.allowed_hosts
        ):
            return
        bound = (server_address or "").strip("[]").lower()
        if name == bound or _is_loopback(name):
            return
        raise MisdirectedRequest(
            f"this server does not answer for host {name!r}; start it with "
            f"--allowed-host {name} if that name is meant to reach it"
        )

    def check_origin(
        self,
        headers: HeaderLookup,
        *,
        host: str | None,
        state_changing: bool,
        scheme: str | None = None,
    ) -> str | None:
        """Refuse a state-changing request another site's page sent.

        Args:
            headers: the request headers (``Origin``, ``Sec-Fetch-Site`` are read;
                case-insensitive lookups, as Quart's and Werkzeug's headers are).
            host: the ``Host`` header, the server's own origin.
            scheme: the server's own scheme as the browser sees it
                (:func:`own_scheme`); an ``Origin`` of another scheme is foreign
                (``http://`` and ``https://`` are different origins). ``None``
                compares host and port only.
            state_changing: whether the request can change anything; only then is a
                foreign origin refused.

        Returns:
            The request's origin when it is an allowed foreign one (the response
            should carry CORS headers for it), else ``None``.

        Raises:
            CrossSiteRequest: a foreign ``Origin``, or ``Sec-Fetch-Site`` saying
                another site sent it, on a state-changing request.
        """
        raw_origin = headers.get("Origin")
        if raw_origin is not None:
            origin = normalise_origin(raw_origin)
            if origin is not None and origin in self.allowed_origins:
                return origin
            if origin is not None and _same_origin(origin, host, scheme):
                return None
            if state_changing:
                raise CrossSiteRequest(
                    f"requests from origin {raw_origin!r} are refused: the server admits "
                    "its own pages, programs, and origins given with --allowed-origin"
                )
            return None
        site = (headers.get("Sec-Fetch-Site") or "").lower()
        if state_changing and site in ("cross-site", "same-site"):
            raise CrossSiteRequest(
                "a request another site sent (Sec-Fetch-Site: "
                f"{site}) is refused; allow its origin with --allowed-origin"
            )
        return None


def own_scheme(headers: HeaderLookup, connection_scheme: str) -> str:
    """The scheme the browser used to reach this server: ``http`` or ``https``.

    A TLS-terminating proxy says so with ``X-Forwarded-Proto`` (its first value); else
    the connection's own (``ws``/``wss`` count as ``http``/``https``). A page cannot
    set ``X-Forwarded-Proto`` on a cross-site request without a preflight, so trusting
    it here cannot make a foreign page's origin look like the server's own.
    """
    forwarded = (headers.get("X-Forwarded-Proto") or "").split(",")[0].strip().lower()
    if forwarded in _DEFAULT_PORTS:
        return forwarded
    return "https" if connection_scheme.lower() in ("https", "wss") else "http"


def _same_origin(origin: str, host: str | None, own: str | None = None) -> bool:
    """Whether ``origin`` (normalised) is the server's own, as ``host`` (and the
    server's scheme ``own``, when known) name it."""
    if host is None:
        return False
    parts = _split_host(host)
    if parts is None:
        return False
    scheme, _, netloc = origin.partition("://")
    if own is not None and scheme != own:
        return False
    origin_parts = _split_host(netloc)
    if origin_parts is None:
        return False
    default = _DEFAULT_PORTS[scheme]
    name, port = parts
    origin_name, origin_port = origin_parts
    return name == origin_name and (port or default) == (origin_port or default)


def accepts(*media_types: str) -> Callable[[F], F]:
    """Declare the ``Content-Type`` values a route reads (``application/json`` if not).

    Put it under the route decorator::

        @blueprint.post("/files")
        @accepts("multipart/form-data")
        async def upload_file() -> ...: ...
    """

    def mark(view: F) -> F:
        setattr(view, _ACCEPTS_ATTR, tuple(t.lower() for t in media_types))
        return view

    return mark


def _accepted_types() -> tuple[str, ...] | None:
    """What the matched route reads; ``None`` when no route matched (404/405)."""
    if request.endpoint is None:
        return None
    view = current_app.view_functions.get(request.endpoint)
    found: tuple[str, ...] = getattr(view, _ACCEPTS_ATTR, JSON)
    return found


def install_fence(app: Quart, fence: Callable[[], Fence]) -> None:
    """Check every request's ``Host`` and ``Origin``, and add CORS headers for it.

    ``fence`` returns the app's fence (read at request time from the app's state).
    Install it first, so the checks run before identity and before any route.
    """

    @app.before_request
    async def guard() -> Response | None:
        current = fence()
        server = request.scope.get("server")
        current.check_host(request.headers.get("Host"), server[0] if server else None)
        if request.method == "OPTIONS" and "Access-Control-Request-Method" in request.headers:
            return _preflight(current)
        origin = current.check_origin(
            request.headers,
            host=request.headers.get("Host"),
            state_changing=request.method in STATE_CHANGING,
            scheme=own_scheme(request.headers, request.scheme),
        )
        g.omnigent_cors_origin = origin
        return None

    @app.after_request
    async def cors(response: Response) -> Response:
        origin = g.get("omnigent_cors_origin")
        if origin is not None:
            _cors_headers(response, origin)
        return response


def install_media_types(app: Quart) -> None:
    """Refuse a body whose ``Content-Type`` the matched route does not read (``415``).

    Install it after the identity check (a caller without one is ``401`` first) and
    before any route: nothing of the body has been read when it refuses.
    """

    @app.before_request
    async def media_type() -> None:
        if request.method not in _WITH_BODY:
            return
        accepted = _accepted_types()
        if accepted is None:
            return
        if request.mimetype not in accepted:
            given = request.mimetype or "none"
            raise UnsupportedMediaType(
                f"this route reads {' or '.join(accepted)}, not {given}; "
                "set the Content-Type header"
            )


def _cors_headers(response: Response, origin: str) -> None:
    response.headers["Access-Control-Allow-Origin"] = origin
    response.headers["Access-Control-Allow-Credentials"] = "true"
    response.vary.add("Origin")


def _preflight(fence: Fence) -> Response:
    """The answer to a CORS preflight: ``204`` for an allowed origin, else ``403``."""
    origin = normalise_origin(request.headers.get("Origin", ""))
    if origin is None or origin not in fence.allowed_origins:
        raise CrossSiteRequest(
            f"origin {request.headers.get('Origin')!r} is not allowed; start the server "
            "with --allowed-origin for a web app that should reach it"
        )
    response = Response(b"", status=204)
    _cors_headers(response, origin)
    response.headers["Access-Control-Allow-Methods"] = _CORS_METHODS
    response.headers["Access-Control-Allow-Headers"] = _CORS_HEADERS
    response.headers["Access-Control-Max-Age"] = "600"
    return response
