"""The runner link: what both ends of a runner's connection speak.

A runner (:mod:`omnigent.runner`) dials a server, whose side of the link is
:mod:`omnigent.transports.runner`; both import the protocol from here: the names,
shapes and checks of version 2 (:mod:`._protocol`, pure), and the link itself — a
message stream that outlives a dropped connection (:mod:`._link`, over the resend
buffer of :mod:`._resume`). ``docs/runners.md`` is the prose version.

A package of its own so that a server imports the wire and not the runner (its
command line, its WebSocket client, its harness service): ``omnigent serve``'s start
does not pay for a runner it never is (``benchmarks/startup.py``).
"""

from ._link import ACK_EVERY, Link, LinkState, Transport
from ._protocol import (
    ACK,
    CLOSE,
    CONNECT_PATH,
    DEFAULT_HEARTBEAT,
    DEFAULT_TIMEOUT,
    ERROR_CODE,
    INITIALIZE,
    MCP_FAILED,
    NAME_PATTERN,
    PANE_FAILED,
    PROTOCOL_MISMATCH,
    PROTOCOL_VERSION,
    TOKEN_VARIABLE,
    TURN_FAILED,
    Hello,
    Welcome,
    check_name,
    field,
    mismatch,
    optional_str,
    parse_hello,
    parse_welcome,
    turn_failure,
)
from ._resume import MAX_UNACKED_BYTES, MAX_UNACKED_MESSAGES, Outbox, ResumeRefused

__all__ = [
    "ACK",
    "ACK_EVERY",
    "CLOSE",
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
    "Transport",
    "Welcome",
    "check_name",
    "field",
    "mismatch",
    "optional_str",
    "parse_hello",
    "parse_welcome",
    "turn_failure",
]
