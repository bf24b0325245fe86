"""The runner protocol, version 2: names, shapes and checks, with no I/O.

A runner dials ``GET /v1/runners/connect?name=NAME[&link=LINK]`` (a WebSocket, with
``Authorization: Bearer TOKEN``); every text frame is one JSON-RPC 2.0 message. The
first frame of each connection is the runner's ``initialize`` request and the server's
answer (:class:`Hello`, :class:`Welcome`); after it, messages belong to the *link*
(:mod:`._link`), which outlives a dropped connection. ``docs/runners.md`` is the
prose version of this module.

Both sides import this module (through :mod:`omnigent.link`): the runner
(:mod:`omnigent.runner`) and the server's side of the link
(:mod:`omnigent.transports.runner`). Every ``parse_*`` function takes
what the peer sent and returns a typed value or raises :class:`~omnigent.rpc.RpcError`
with ``-32602`` naming the field; nothing the peer sends makes them raise anything
else.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

import attrs

from .._ids import RUNNER_ID_PATTERN, runner_id_problem

if TYPE_CHECKING:
    from ..rpc import RpcError

__all__ = [
    "ACK",
    "CLOSE",
    "CONNECT_PATH",
    "DEFAULT_HEARTBEAT",
    "DEFAULT_TIMEOUT",
    "ERROR_CODE",
    "INITIALIZE",
    "MCP_FAILED",
    "NAME_PATTERN",
    "PANE_FAILED",
    "PROTOCOL_MISMATCH",
    "PROTOCOL_VERSION",
    "TOKEN_VARIABLE",
    "TURN_FAILED",
    "Hello",
    "Welcome",
    "check_name",
    "field",
    "mismatch",
    "optional_str",
    "parse_hello",
    "parse_welcome",
    "turn_failure",
]

PROTOCOL_VERSION: Final = 2
"""The version both sides must speak; a different one is refused in ``initialize``.

2: terminals (``panes/*``), stdio MCP servers (``mcp/*``), sandboxes (``tool/run``'s
``sandboxed``, the sandbox in the spec) and trace context (``turn/run``'s ``trace``).
A version-1 runner would run a sandboxed session's tools unconfined: it is refused."""

CONNECT_PATH: Final = "/v1/runners/connect"
TOKEN_VARIABLE: Final = "OMNIGENT_RUNNER_TOKEN"
"""The variable holding a runner token: the runner's ``--token``, and a token
``omnigent serve`` admits when it is given no ``--runner-token``."""
INITIALIZE: Final = "initialize"
ACK: Final = "$/ack"
"""The link's acknowledgement and heartbeat (``{received}``); never counted."""
CLOSE: Final = "$/close"
"""A side ends the link on purpose (a runner that stops): the other ends it at once."""

NAME_PATTERN: Final = RUNNER_ID_PATTERN
"""What a runner's name must be, whole."""
_LINK = re.compile("link_[0-9a-f]{24}")
_CODE = re.compile("[a-z][a-z0-9_]{0,63}")

DEFAULT_HEARTBEAT: Final = 2.0
"""Seconds between the acknowledgements each side sends while connected."""
DEFAULT_TIMEOUT: Final = 10.0
"""Seconds of silence after which a connection, and a link without one, is dead."""

# Error codes of the protocol, in the range JSON-RPC leaves to servers.
PROTOCOL_MISMATCH: Final = -32010
TURN_FAILED: Final = -32011
"""``turn/run`` ended in a failure; ``data.code`` is its slug (``harness_error``, …)."""
PANE_FAILED: Final = -32012
"""A ``panes/*`` call failed; ``data.code`` says how: ``tmux_failed`` (``data.gone``:
the pane, its session or the server no longer exist), ``tmux_unavailable`` (no tmux
there) or ``tool_error`` (a start directory that cannot be used)."""
MCP_FAILED: Final = -32013
"""An ``mcp/*`` call failed; ``data.code``: ``mcp_server_failed`` (a server did not
start: its name and stderr tail in the message), ``mcp_not_started`` (no servers of
that session run on this link), or the slug of the spec's refusal."""

ERROR_CODE: Final = "code"
"""The key of ``error.data`` that carries an omnigent error slug."""


def check_name(name: str) -> str | None:
    """Why ``name`` cannot be a runner's name, or ``None`` if it can."""
    return runner_id_problem(name)


def _invalid(loc: str, msg: str) -> RpcError:
    # JSON-RPC is imported by the first error, not with the protocol's names: a server
    # that no runner reaches never loads it before its first answer (issue 32).
    from ..rpc import INVALID_PARAMS, RpcError

    return RpcError(INVALID_PARAMS, f"Invalid params: {loc} {msg}", {"loc": loc})


def field(params: Any, name: str, kind: type | tuple[type, ...]) -> Any:
    """``params[name]``, which must be of ``kind`` (``bool`` is never an ``int``).

    Raises:
        RpcError: -32602 naming the field.
    """
    if not isinstance(params, Mapping):
        raise _invalid("params", "must be an object")
    value = params.get(name)
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if isinstance(value, bool) and bool not in kinds:
        raise _invalid(name, f"must be {_kind_name(kinds)}")
    if not isinstance(value, kinds):
        raise _invalid(name, f"must be {_kind_name(kinds)}")
    return value


def optional_str(params: Any, name: str) -> str | None:
    """``params[name]``: a string or absent/null.

    Raises:
        RpcError: -32602 naming the field.
    """
    if isinstance(params, Mapping) and params.get(name) is None:
        return None
    value: str = field(params, name, str)
    return value


def _kind_name(kinds: tuple[type, ...]) -> str:
    names = {str: "a string", int: "an integer", float: "a number", bool: "a boolean"}
    names |= {dict: "an object", list: "an array", type(None): "null"}
    return " or ".join(names.get(k, k.__name__) for k in kinds)


def _count(params: Any, name: str) -> int:
    value: int = field(params, name, int)
    if value < 0:
        raise _invalid(name, "must be >= 0")
    return value


@attrs.frozen
class Hello:
    """The runner's ``initialize``: who it is, and where a resumed link stands.

    Attributes:
        link: the link this connection continues (``None``: a new one).
        received: how many messages of that link the runner has received.
    """

    name: str
    protocol_version: int = PROTOCOL_VERSION
    link: str | None = None
    received: int = 0
    runner_version: str = ""

    def to_params(self) -> dict[str, Any]:
        return {
            "protocolVersion": self.protocol_version,
            "name": self.name,
            "link": self.link,
            "received": self.received,
            "runnerVersion": self.runner_version,
        }


@attrs.frozen
class Welcome:
    """The server's answer to ``initialize``.

    Attributes:
        resumed: whether ``link`` is the link the runner asked to continue (else the
            runner drops everything of its old link).
        received: how many of the runner's messages on ``link`` the server has.
        heartbeat, timeout: the link's timing, which both sides then use.
    """

    runner_id: str
    link: str
    resumed: bool
    received: int
    heartbeat: float = DEFAULT_HEARTBEAT
    timeout: float = DEFAULT_TIMEOUT
    protocol_version: int = PROTOCOL_VERSION

    def to_result(self) -> dict[str, Any]:
        return {
            "protocolVersion": self.protocol_version,
            "runnerId": self.runner_id,
            "link": self.link,
            "resumed": self.resumed,
            "received": self.received,
            "heartbeat": self.heartbeat,
            "timeout": self.timeout,
        }


def mismatch(theirs: object) -> RpcError:
    """The error for a peer that speaks another protocol version."""
    from ..rpc import RpcError

    return RpcError(
        PROTOCOL_MISMATCH,
        f"runner protocol {theirs!r} is not spoken here (this side speaks "
        f"{PROTOCOL_VERSION}): upgrade the runner or the server so they match",
        {ERROR_CODE: "protocol_mismatch", "supported": [PROTOCOL_VERSION]},
    )


def parse_hello(params: Any) -> Hello:
    """The runner's ``initialize`` params, checked.

    Raises:
        RpcError: -32010 for another protocol version (checked first, so a future
            runner is told about the version, not about fields it renamed);
            -32602 naming a bad field.
    """
    version = params.get("protocolVersion") if isinstance(params, Mapping) else None
    if version != PROTOCOL_VERSION or isinstance(version, bool):
        raise mismatch(version)
    name: str = field(params, "name", str)
    if (problem := check_name(name)) is not None:
        raise _invalid("name", problem)
    link = optional_str(params, "link")
    if link is not None and _LINK.fullmatch(link) is None:
        raise _invalid("link", "must be a link id (link_ and 24 hex digits)")
    runner_version = optional_str(params, "runnerVersion") or ""
    return Hello(name, PROTOCOL_VERSION, link, _count(params, "received"), runner_version[:64])


def parse_welcome(result: Any) -> Welcome:
    """The server's answer to ``initialize``, checked.

    Raises:
        RpcError: -32010 for another protocol version; -32602 naming a bad field.
    """
    version = result.get("protocolVersion") if isinstance(result, Mapping) else None
    if version != PROTOCOL_VERSION or isinstance(version, bool):
        raise mismatch(version)
    heartbeat = float(field(result, "heartbeat", (int, float)))
    timeout = float(field(result, "timeout", (int, float)))
    if not 0 < heartbeat < timeout <= 3600:
        raise _invalid("timeout", "must exceed heartbeat (both positive, at most 3600)")
    link: str = field(result, "link", str)
    if _LINK.fullmatch(link) is None:
        raise _invalid("link", "must be a link id")
    return Welcome(
        runner_id=field(result, "runnerId", str),
        link=link,
        resumed=field(result, "resumed", bool),
        received=_count(result, "received"),
        heartbeat=heartbeat,
        timeout=timeout,
    )


def turn_failure(error: RpcError) -> tuple[str, str]:
    """``(code, message)`` of a failed ``turn/run``: the slug the runner sent if it is
    one (``[a-z][a-z0-9_]*``), else ``harness_error``; the message as sent."""
    data = error.data if isinstance(error.data, Mapping) else {}
    code = data.get(ERROR_CODE)
    if not isinstance(code, str) or _CODE.fullmatch(code) is None:
        code = "harness_error"
    return code, error.message[:2000]
