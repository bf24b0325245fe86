"""The runner: ``omnigent runner``, the side of a remote session that does the work.

A runner dials a server (``GET /v1/runners/connect``), keeps one *link* to it across
dropped connections (:class:`Link`), and runs what the server's runner-bound sessions
need done on this machine: their harnesses, OS tools, shells, terminals and stdio MCP
servers. ``docs/runners.md`` describes the protocol and the trust model; the protocol
and the link are :mod:`omnigent.link`'s, re-exported here. The server's side of the
link is :mod:`omnigent.transports.runner`.
"""

from ..link import (
    ACK_EVERY,
    CONNECT_PATH,
    DEFAULT_HEARTBEAT,
    DEFAULT_TIMEOUT,
    ERROR_CODE,
    INITIALIZE,
    MAX_UNACKED_BYTES,
    MAX_UNACKED_MESSAGES,
    MCP_FAILED,
    NAME_PATTERN,
    PANE_FAILED,
    PROTOCOL_MISMATCH,
    PROTOCOL_VERSION,
    TOKEN_VARIABLE,
    TURN_FAILED,
    Hello,
    Link,
    LinkState,
    Outbox,
    ResumeRefused,
    Transport,
    Welcome,
    check_name,
    field,
    mismatch,
    optional_str,
    parse_hello,
    parse_welcome,
    turn_failure,
)
from ._cli import add_runner_arguments, default_runner_name, run_runner
from ._place import RunnerPlace, open_runner_place
from ._runner import RunnerOptions, connect_url, serve_runner
from ._service import RunnerService

__all__ = [
    "ACK_EVERY",
    "CONNECT_PATH",
    "DEFAULT_HEARTBEAT",
    "DEFAULT_TIMEOUT",
    "ERROR_CODE",
    "INITIALIZE",
    "MAX_UNACKED_BYTES",
    "MAX_UNACKED_MESSAGES",
    "MCP_FAILED",
    "NAME_PATTERN",
    "PANE_FAILED",
    "PROTOCOL_MISMATCH",
    "PROTOCOL_VERSION",
    "TOKEN_VARIABLE",
    "TURN_FAILED",
    "Hello",
    "Link",
    "LinkState",
    "Outbox",
    "ResumeRefused",
    "RunnerOptions",
    "RunnerPlace",
    "RunnerService",
    "Transport",
    "Welcome",
    "add_runner_arguments",
    "check_name",
    "connect_url",
    "default_runner_name",
    "field",
    "mismatch",
    "open_runner_place",
    "optional_str",
    "parse_hello",
    "parse_welcome",
    "run_runner",
    "serve_runner",
    "turn_failure",
]
