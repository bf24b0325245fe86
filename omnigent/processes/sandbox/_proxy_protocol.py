"""The egress proxy's HTTP half, without I/O: requests in, decisions and bytes out.

:mod:`._proxy` reads a request head from the sandbox, and this module says what it
is (:func:`parse_request`), whether the rules admit it (:func:`decide`), which
resolved addresses may be dialled (:func:`permitted_address`), and what to send
(:func:`origin_request`, :func:`refusal`).
"""

from __future__ import annotations

import ipaddress
import re
from urllib.parse import urlsplit

import attrs

from ...spec import EgressRules, normalise_host, unsafe_path

__all__ = [
    "MAX_HEAD",
    "Decision",
    "ProxyRequest",
    "RequestError",
    "decide",
    "origin_request",
    "parse_request",
    "permitted_address",
    "refusal",
]

MAX_HEAD = 32 * 1024
"""The most a request head (request line and headers) may take, in bytes."""

_TOKEN = re.compile(rb"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_HOP_BY_HOP = {b"connection", b"keep-alive", b"proxy-connection", b"proxy-authorization", b"te"}
# Addresses that look global but are reachable only inside a cloud tenant.
_CLOUD_TRAPS = (ipaddress.ip_network("168.63.129.16/32"),)


class RequestError(ValueError):
    """A request the proxy cannot serve; ``status`` is the answer's HTTP status."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


@attrs.frozen
class ProxyRequest:
    """One request from the sandbox: a ``CONNECT`` tunnel or a plain-HTTP request.

    ``path`` is the origin-form target (``/a/b?q``) for plain HTTP, empty for a
    tunnel; ``headers`` keep their order and spelling; ``length`` is the body's
    ``Content-Length`` (0 when absent).
    """

    method: str
    host: str
    port: int
    path: str
    headers: tuple[tuple[bytes, bytes], ...] = ()
    length: int = 0

    @property
    def tunnel(self) -> bool:
        return self.method == "CONNECT"


def _split_authority(authority: str, default_port: int | None) -> tuple[str, int]:
    if authority.startswith("["):
        host, _, rest = authority[1:].partition("]")
        port_text = rest[1:] if rest.startswith(":") else ""
    else:
        host, _, port_text = authority.partition(":")
    if not host.isascii() or not host:
        raise RequestError(400, f"not a host name: {authority!r}")
    if not port_text:
        if default_port is None:
            raise RequestError(400, "CONNECT needs host:port")
        return normalise_host(host), default_port
    if not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise RequestError(400, f"bad port in {authority!r}")
    return normalise_host(host), int(port_text)


def _headers(lines: list[bytes]) -> tuple[tuple[bytes, bytes], ...]:
    out = []
    for line in lines:
        name, colon, value = line.partition(b":")
        if not colon or not _TOKEN.fullmatch(name):
            raise RequestError(400, "malformed header line")
        out.append((name, value.strip()))
    return tuple(out)


def _content_length(headers: tuple[tuple[bytes, bytes], ...]) -> int:
    lengths = {v for n, v in headers if n.lower() == b"content-length"}
    if any(n.lower() == b"transfer-encoding" for n, _ in headers):
        raise RequestError(
            411, "the egress proxy takes request bodies with a Content-Length only (no chunked)"
        )
    if not lengths:
        return 0
    if len(lengths) > 1 or not all(v.isdigit() for v in lengths):
        raise RequestError(400, "bad Content-Length")
    return int(lengths.pop())


def parse_request(head: bytes) -> ProxyRequest:
    """Parse a request head (everything before the blank line).

    Raises:
        RequestError: not a proxy request this proxy serves (the status says why).
    """
    lines = head.split(b"\r\n")
    parts = lines[0].split(b" ")
    if len(parts) != 3 or not parts[2].startswith(b"HTTP/1.") or not _TOKEN.fullmatch(parts[0]):
        raise RequestError(400, "not an HTTP/1.x request line")
    method = parts[0].decode("ascii").upper()
    target = parts[1].decode("latin-1")
    headers = _headers([line for line in lines[1:] if line])
    if method == "CONNECT":
        host, port = _split_authority(target, None)
        return ProxyRequest(method, host, port, "", headers)
    url = urlsplit(target)
    if url.scheme == "https":
        raise RequestError(400, "send HTTPS through CONNECT (an https_proxy), not as a URL")
    if url.scheme != "http" or not url.netloc:
        raise RequestError(400, "a proxy request names an absolute http:// URL")
    if "@" in url.netloc:
        raise RequestError(400, "credentials in the URL are not forwarded")
    host, port = _split_authority(url.netloc, 80)
    path = (url.path or "/") + (f"?{url.query}" if url.query else "")
    return ProxyRequest(method, host, port, path, headers, _content_length(headers))


@attrs.frozen
class Decision:
    """Whether the rules admit a request, and if not why (shown to the sandbox).

    ``trusted``: the admitting rule is omnigent's own, which may reach private
    addresses (:meth:`EgressRule.endpoint`).
    """

    allowed: bool
    reason: str
    trusted: bool = False


def decide(request: ProxyRequest, rules: EgressRules) -> Decision:
    """The rules' verdict: host-level for a tunnel, method and path for plain HTTP."""
    where = f"{request.host}:{request.port}"
    if request.tunnel:
        rule = rules.tunnel(request.host, request.port)
        if rule is None:
            return Decision(False, f"no egress rule admits {where}")
        return Decision(True, rule.text, rule.trusted)
    path = request.path.partition("?")[0]
    if unsafe_path(path):
        return Decision(False, f"the path {path!r} has '.', '..' or encoded separators")
    rule = rules.request(request.method, request.host, request.port, path)
    if rule is None:
        return Decision(False, f"no egress rule admits {request.method} {where}{path}")
    return Decision(True, rule.text, rule.trusted)


def permitted_address(address: str, *, allow_private: bool) -> bool:
    """Whether the proxy may dial ``address`` (a resolved IP).

    Only globally routable unicast addresses, unless ``allow_private``: never
    loopback, RFC 1918, link-local (cloud metadata, ``169.254.169.254``), CGNAT,
    unique-local, reserved or multicast — nor IPv4 hidden in an IPv6 address.
    """
    if allow_private:
        return True
    ip = ipaddress.ip_address(address.partition("%")[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    if not ip.is_global or ip.is_multicast:
        return False
    return not any(ip in net for net in _CLOUD_TRAPS)


def origin_request(request: ProxyRequest) -> bytes:
    """The request head sent upstream: origin-form target, ``Host`` set to the URL's
    authority, hop-by-hop and proxy headers dropped, ``Connection: close`` (one
    request per connection: every request is checked against the rules)."""
    authority = request.host if ":" not in request.host else f"[{request.host}]"
    if request.port != 80:
        authority += f":{request.port}"
    lines = [f"{request.method} {request.path} HTTP/1.1".encode("latin-1")]
    lines.append(b"Host: " + authority.encode("ascii"))
    for name, value in request.headers:
        if name.lower() in _HOP_BY_HOP or name.lower() == b"host":
            continue
        lines.append(name + b": " + value)
    lines.append(b"Connection: close")
    return b"\r\n".join(lines) + b"\r\n\r\n"


_REASONS = {400: "Bad Request", 403: "Forbidden", 411: "Length Required", 502: "Bad Gateway"}


def refusal(status: int, reason: str) -> bytes:
    """An answer that refuses the request, saying why in its body."""
    body = f"omnigent sandbox: {reason}\n".encode()
    head = (
        f"HTTP/1.1 {status} {_REASONS.get(status, 'Error')}\r\n"
        "Content-Type: text/plain; charset=utf-8\r\n"
        f"Content-Length: {len(body)}\r\n"
        "X-Omnigent-Egress: refused\r\n"
        "Connection: close\r\n\r\n"
    )
    return head.encode("ascii") + body
