"""Egress rules: which HTTP(S) requests a sandboxed process may make (pure, no I/O).

They are part of the spec language (``os_env.sandbox.egress_rules``), checked when a
spec is read; :mod:`omnigent.processes.sandbox`'s egress proxy applies them.

A rule is one string, ``"METHODS host[:port][/path-glob]"``, as the original omnigent
writes them (``os_env.sandbox.egress_rules``)::

    GET api.github.com/repos/databricks/*/**     GET only, one organisation's repos
    GET,HEAD pypi.org/simple/**                   two methods
    * *.github.com                                any method, any path, any subdomain
    POST 10.0.0.5:8080/v1/**                      one port

* ``METHODS``: ``*`` or verbs joined by ``,`` (case-insensitive).
* ``host``: a name (``pypi.org``), ``*.domain`` (every subdomain, not the domain
  itself), ``*`` (any host), or an IP literal (``[::1]`` for IPv6). Without ``:port``
  a rule admits ports 80 and 443 only, so an allowed host is not a tunnel to its SSH
  port.
* ``path-glob`` (default ``/**``): ``*`` matches within one segment, ``**`` any number
  of segments; the query string is not part of what is matched.

What a rule can see depends on the request (see ``docs/sandbox.md``): a plain-HTTP
request shows its method and path, so both are checked; an HTTPS request is a
``CONNECT host:port`` tunnel whose content is encrypted, so only the host and port
are — a rule naming ``GET`` and a path admits the whole host over HTTPS.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable

import attrs

__all__ = [
    "DEFAULT_PORTS",
    "EgressRule",
    "EgressRules",
    "normalise_host",
    "parse_egress_rule",
    "unsafe_path",
]

DEFAULT_PORTS = frozenset({80, 443})
_VERB = re.compile(r"[A-Z]+")
_LABEL = re.compile(r"[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?")
_MAX_RULE = 1000
# Encodings that would let a path say something other than what it seems to:
# percent-encoded separators and dots, and backslashes some servers treat as "/".
_SNEAKY = re.compile(r"%2[fF]|%5[cC]|%2[eE]|\\")


def normalise_host(host: str) -> str:
    """``host`` as rules compare it: lowercase, without a trailing dot or brackets."""
    host = host.strip().lower().rstrip(".")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host


def _valid_host(host: str) -> bool:
    if host == "*":
        return True
    try:
        ipaddress.ip_address(host)
        return True
    except ValueError:
        pass
    name = host[2:] if host.startswith("*.") else host
    labels = name.split(".")
    return len(name) <= 253 and all(_LABEL.fullmatch(label) for label in labels)


def _glob_regex(glob: str) -> re.Pattern[str]:
    """A path glob (``/a/*/**``) as an anchored regular expression."""
    parts = ["^"]
    for segment in glob.split("/")[1:]:
        if segment == "**":
            parts.append("(?:/.*)?")
            continue
        text = "".join(
            "[^/]*" if ch == "*" else "[^/]" if ch == "?" else re.escape(ch) for ch in segment
        )
        parts.append("/" + text)
    parts.append("$")
    return re.compile("".join(parts), re.DOTALL)


@attrs.frozen
class EgressRule:
    """One parsed rule. ``methods`` is None for ``*``; ``port`` None for 80 and 443.

    ``trusted`` rules are omnigent's own (a native agent's model endpoint, see
    :meth:`SandboxPolicy.for_process`): they may reach a private address even when
    ``egress_allow_private_destinations`` is off — a local model server is one.
    """

    text: str
    methods: frozenset[str] | None
    host: str
    port: int | None
    path: re.Pattern[str] = attrs.field(eq=False, repr=False)
    trusted: bool = False

    @classmethod
    def endpoint(cls, host: str, port: int) -> EgressRule:
        """A trusted rule admitting everything to ``host:port`` (a model endpoint)."""
        host = normalise_host(host)
        shown = f"[{host}]" if ":" in host else host
        return cls(f"* {shown}:{port} (model endpoint)", None, host, port, _glob_regex("/**"), True)

    def admits_host(self, host: str, port: int) -> bool:
        """Whether this rule's host and port match (``host`` already normalised)."""
        ports = DEFAULT_PORTS if self.port is None else {self.port}
        if port not in ports:
            return False
        if self.host == "*":
            return True
        if self.host.startswith("*."):
            return host.endswith(self.host[1:])
        return host == self.host

    def admits(self, method: str, host: str, port: int, path: str) -> bool:
        """Whether a plain-HTTP request matches: method, host, port and path."""
        if self.methods is not None and method.upper() not in self.methods:
            return False
        return self.admits_host(host, port) and self.path.match(path) is not None


def parse_egress_rule(text: str) -> EgressRule:
    """Parse one rule.

    Raises:
        ValueError: the rule is malformed; the message says how, in words a spec
            author can act on.
    """
    if len(text) > _MAX_RULE:
        raise ValueError(f"a rule is at most {_MAX_RULE} characters")
    fields = text.split()
    if len(fields) != 2:
        raise ValueError(
            f"expected 'METHODS host/path' (e.g. 'GET api.github.com/repos/**'), got {text!r}"
        )
    verbs, target = fields
    methods: frozenset[str] | None = None
    if verbs != "*":
        names = [v.upper() for v in verbs.split(",")]
        if not all(_VERB.fullmatch(v) for v in names):
            raise ValueError(f"methods must be '*' or verbs joined by ',', got {verbs!r}")
        methods = frozenset(names)
    hostport, slash, rest = target.partition("/")
    path = slash + rest if slash else "/**"
    host, port = _split_port(hostport)
    host = normalise_host(host)
    if not host or not _valid_host(host):
        raise ValueError(f"not a host name, '*.domain', '*' or an IP address: {hostport!r}")
    if "//" in path or unsafe_path(path.replace("*", "x")):
        raise ValueError(f"a path glob may not hold '//', '.' or '..' segments: {path!r}")
    return EgressRule(text, methods, host, port, _glob_regex(path))


def _split_port(hostport: str) -> tuple[str, int | None]:
    if hostport.startswith("["):
        host, bracket, rest = hostport.partition("]")
        if not bracket:
            raise ValueError(f"an IPv6 address needs a closing ']': {hostport!r}")
        host += "]"
        if not rest:
            return host, None
        if not rest.startswith(":"):
            raise ValueError(f"unexpected text after the address: {hostport!r}")
        port_text = rest[1:]
    else:
        host, colon, port_text = hostport.rpartition(":")
        if not colon:
            return hostport, None
    if not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise ValueError(f"a port is a number from 1 to 65535, got {port_text!r}")
    return host, int(port_text)


def unsafe_path(path: str) -> bool:
    """Whether a request path could mean something other than it seems to a server.

    ``.`` and ``..`` segments (also percent-encoded), encoded ``/`` and ``\\``: a
    server normalising them would serve a path the rules never saw.
    """
    if _SNEAKY.search(path):
        return True
    return any(segment in (".", "..") for segment in path.split("/"))


@attrs.frozen
class EgressRules:
    """An allow-list of rules; anything no rule matches is refused."""

    rules: tuple[EgressRule, ...]

    @classmethod
    def parse(cls, texts: Iterable[str]) -> EgressRules:
        """Parse every rule.

        Raises:
            ValueError: at the first malformed rule (its index in the message).
        """
        parsed = []
        for index, text in enumerate(texts):
            try:
                parsed.append(parse_egress_rule(text))
            except ValueError as exc:
                raise ValueError(f"rule {index}: {exc}") from None
        return cls(tuple(parsed))

    def tunnel(self, host: str, port: int) -> EgressRule | None:
        """The first rule admitting a ``CONNECT host:port`` (host-level), if any."""
        host = normalise_host(host)
        return next((r for r in self.rules if r.admits_host(host, port)), None)

    def request(self, method: str, host: str, port: int, path: str) -> EgressRule | None:
        """The first rule admitting a plain-HTTP request, if any (``path`` without
        its query; an :func:`unsafe_path` is admitted by none)."""
        if unsafe_path(path):
            return None
        host = normalise_host(host)
        return next((r for r in self.rules if r.admits(method, host, port, path)), None)
