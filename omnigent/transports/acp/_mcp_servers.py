"""The ``mcpServers`` of ``session/new`` and ``session/load``: read, bounded, named.

ACP v1 lets the client pass MCP servers for the session (editors pass every server
their user configured): stdio ones (``{name, command, args, env}``, no ``type``) which
an agent MUST support, and ``{type: "http" | "sse", name, url, headers}`` ones it
advertises in ``mcpCapabilities``. :func:`read_mcp_servers` checks every entry (a
malformed one is a ``-32602`` naming its path, ``mcpServers[1].env[0].value``) and
turns the ones omnigent connects — stdio and HTTP — into
:class:`~omnigent.spec.McpServerSpec`; the others (``sse``, and ``acp`` or any type
not known yet) are kept by name only, to be reported as ignored.

An editor's server names are free text (``GitHub``, ``my tools``); the tools of a
server are offered as ``mcp__<slug>__<tool>`` where the slug is the name in lowercase
with every run of other characters made one ``_`` (``github``, ``my_tools``), made
unique with ``_2``, ``_3``… Policies name the tools that way (``mcp__github__*``).

Which are run (:func:`offered_servers`, by the connection's :data:`ClientMcpMode`):

``operator``
    ``omnigent stdio``: the editor started omnigent and is its operator, so its stdio
    servers run and its HTTP servers are reached.
``client``
    ``/v1/ws``: a remote client may not make the server run programs or fetch URLs of
    its choosing. The servers go to the runtime with ``from_client=True``: a stdio
    server runs only if the operator allowed its program (``serve --allow-command``),
    an HTTP one only under an ``serve --allow-mcp-url`` prefix.
``off``
    ``omnigent stdio --no-client-mcp``: none; the entries are not even checked.

Whatever is not connected is not an error — editors send every server — but is named
in the answer's ``_meta.omnigent.ignoredMcpServers`` (and one that failed to start in
``failedMcpServers``, with its message) by :func:`mcp_notice`.

Pure: no I/O.
"""

from __future__ import annotations

import logging
import re
from typing import Any, Literal

import attrs

from ...core import ClientMcpReport
from ...errors import SpecError
from ...mcp import INSTALL_HINT, mcp_installed
from ...spec import McpServerSpec
from ._params import MAX_PATH, Params, invalid

__all__ = [
    "MAX_MCP_SERVERS",
    "ClientMcpMode",
    "McpOffer",
    "mcp_notice",
    "offered_servers",
    "read_mcp_servers",
    "server_names",
    "slug",
]

log = logging.getLogger("omnigent.transports.acp")

ClientMcpMode = Literal["operator", "client", "off"]

MAX_MCP_SERVERS = 32
_MAX_NAME = 128
_MAX_SLUG = 40
_MAX_ARGS = 256
_MAX_ARG = 16 * 1024
_MAX_ENV = 256
_MAX_ENV_NAME = 256
_MAX_ENV_VALUE = 32 * 1024
_MAX_HEADERS = 64
_MAX_HEADER_VALUE = 8 * 1024
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_NOT_SLUG = re.compile(r"[^a-z0-9]+")


@attrs.frozen
class McpOffer:
    """What a client offered: servers to connect (by slug) and the rest by name.

    Attributes:
        servers: stdio and HTTP servers, each named by its slug.
        names: slug -> the name the client gave.
        unsupported: names of servers of a transport omnigent does not connect.
    """

    servers: tuple[McpServerSpec, ...] = ()
    names: dict[str, str] = attrs.field(factory=dict)
    unsupported: tuple[str, ...] = ()

    def original(self, slug: str) -> str:
        return self.names.get(slug, slug)


def offered_servers(params: Params, mode: ClientMcpMode) -> McpOffer:
    """The ``mcpServers`` of a ``session/new`` or ``session/load``, as ``mode`` reads them.

    Raises:
        RpcError: ``-32602`` for a malformed entry (not in ``off`` mode).
    """
    if mode == "off":
        names = server_names(params)
        if names:
            log.info("client MCP servers are off here; ignoring %s", ", ".join(names))
        return McpOffer(unsupported=tuple(names))
    offer = read_mcp_servers(params)
    if offer.servers and not mcp_installed():
        log.warning(
            "the client passed MCP servers, which need the mcp extra (%s); ignoring %s",
            INSTALL_HINT,
            ", ".join(offer.names.values()),
        )
        return McpOffer(unsupported=(*offer.names.values(), *offer.unsupported))
    if offer.unsupported:
        log.info(
            "ignoring client MCP servers of transports omnigent does not connect: %s",
            ", ".join(offer.unsupported),
        )
    return offer


def mcp_notice(offer: McpOffer, report: ClientMcpReport | None) -> dict[str, Any]:
    """The ``_meta`` of an answer: the servers not connected (nothing if all were).

    ``report`` is what the runtime did with ``offer.servers``; ``None`` when they were
    not passed on (the session was open on this connection already), so all of them
    count as ignored.
    """
    ignored = list(offer.unsupported)
    failed: list[dict[str, str]] = []
    if report is None:
        ignored += [offer.original(s.name) for s in offer.servers]
    else:
        for name, why in report.refused:
            log.info("ignoring the client's MCP server %r: %s", offer.original(name), why)
            ignored.append(offer.original(name))
        failed = [{"name": offer.original(n), "message": m} for n, m in report.failed]
    meta: dict[str, Any] = {}
    if ignored:
        meta["ignoredMcpServers"] = ignored
    if failed:
        meta["failedMcpServers"] = failed
    return {"_meta": {"omnigent": meta}} if meta else {}


def slug(name: str) -> str:
    """A server name as a tool-name prefix: ``My Tools`` -> ``my_tools``."""
    return _NOT_SLUG.sub("_", name.lower()).strip("_")[:_MAX_SLUG].strip("_") or "server"


def server_names(params: Params) -> list[str]:
    """The names of the servers offered, read leniently (for ``--no-client-mcp``)."""
    servers = params.array("mcpServers", required=False, max_len=100)
    return [str(s.get("name", "?"))[:_MAX_NAME] if isinstance(s, dict) else "?" for s in servers]


def read_mcp_servers(params: Params) -> McpOffer:
    """Every entry of ``mcpServers`` checked; see the module docstring.

    Raises:
        RpcError: ``-32602`` at the first malformed entry's path.
    """
    entries = params.array("mcpServers", required=False, max_len=MAX_MCP_SERVERS)
    servers: list[McpServerSpec] = []
    names: dict[str, str] = {}
    unsupported: list[str] = []
    for index, entry in enumerate(entries):
        loc = f"{params.loc('mcpServers')}[{index}]"
        if not isinstance(entry, dict):
            raise invalid(loc, "expected an object")
        server = Params(entry, loc)
        name = server.string("name", max_len=_MAX_NAME)
        if not name.strip():
            raise invalid(server.loc("name"), "must not be empty")
        kind = server.optional_string("type", max_len=_MAX_NAME) or "stdio"
        if kind not in ("stdio", "http"):
            unsupported.append(name)
            continue
        key = _unique(slug(name), names)
        names[key] = name
        servers.append(_stdio(server, key) if kind == "stdio" else _http(server, key))
    return McpOffer(tuple(servers), names, tuple(unsupported))


def _unique(base: str, taken: dict[str, str]) -> str:
    key, n = base, 1
    while key in taken:
        n += 1
        key = f"{base}_{n}"
    return key


def _stdio(server: Params, key: str) -> McpServerSpec:
    command = server.string("command", max_len=MAX_PATH)
    if not command or "\x00" in command:
        raise invalid(server.loc("command"), "must be a program name or path")
    args = [
        _text(arg, f"{server.loc('args')}[{i}]", _MAX_ARG)
        for i, arg in enumerate(server.array("args", required=False, max_len=_MAX_ARGS))
    ]
    for i, arg in enumerate(args):
        if not arg:
            raise invalid(f"{server.loc('args')}[{i}]", "must not be empty")
    env: dict[str, str] = {}
    for i, var in enumerate(server.array("env", required=False, max_len=_MAX_ENV)):
        name, value = _pair(var, f"{server.loc('env')}[{i}]", _MAX_ENV_NAME, _MAX_ENV_VALUE)
        if not name or "=" in name:
            raise invalid(f"{server.loc('env')}[{i}].name", "not an environment variable name")
        env[name] = value
    return _spec(server, key, command=(command, *args), env=env)


def _http(server: Params, key: str) -> McpServerSpec:
    url = server.string("url", max_len=MAX_PATH)
    if not url.startswith(("http://", "https://")) or any(c in url for c in "\x00\r\n "):
        raise invalid(server.loc("url"), "must be an http:// or https:// URL")
    headers: dict[str, str] = {}
    for i, header in enumerate(server.array("headers", required=False, max_len=_MAX_HEADERS)):
        name, value = _pair(header, f"{server.loc('headers')}[{i}]", 256, _MAX_HEADER_VALUE)
        if not _HEADER_NAME.fullmatch(name):
            raise invalid(f"{server.loc('headers')}[{i}].name", "not an HTTP header name")
        if "\r" in value or "\n" in value:
            raise invalid(f"{server.loc('headers')}[{i}].value", "must be one line")
        headers[name] = value
    return _spec(server, key, url=url, headers=headers)


def _spec(server: Params, key: str, **fields: Any) -> McpServerSpec:
    try:
        return McpServerSpec(name=key, **fields)
    except SpecError as exc:
        detail = exc.details[0] if exc.details else None
        where = server.loc(detail.loc) if detail is not None else server.loc("name")
        raise invalid(where, detail.msg if detail is not None else exc.message) from exc


def _text(value: Any, loc: str, limit: int) -> str:
    if not isinstance(value, str):
        raise invalid(loc, "expected a string")
    if len(value) > limit:
        raise invalid(loc, f"longer than {limit} characters")
    if "\x00" in value:
        raise invalid(loc, "must not contain NUL")
    return value


def _pair(value: Any, loc: str, name_limit: int, value_limit: int) -> tuple[str, str]:
    if not isinstance(value, dict):
        raise invalid(loc, "expected an object with name and value")
    pair = Params(value, loc)
    name = _text(pair.raw("name"), pair.loc("name"), name_limit)
    return name, _text(pair.raw("value"), pair.loc("value"), value_limit)
