"""The runner: ``omnigent runner``, the side of a remote session that does the work.

A runner dials a server (``GET /v1/runners/connect``), keeps one *link* to it across
dropped connections (:class:`Link`), and runs what the server's runner-bound sessions
need done on this machine: their harnesses, OS tools, shells, terminals and stdio MCP
servers. ``docs/runners.md`` describes the protocol (:mod:`._protocol`) and the trust
model. The server's side of the link is :mod:`omnigent.transports.runner`.
"""

from ._link import ACK_EVERY, Link, LinkState, Transport
from ._protocol import (
    CONNECT_PATH,
    DEFAULT_HEARTBEAT,
    DEFAULT_TIMEOUT,
    NAME_PATTERN,
    PROTOCOL_VERSION,
    Hello,
    Welcome,
    check_name,
)
from ._resume import MAX_UNACKED_BYTES, MAX_UNACKED_MESSAGES, Outbox, ResumeRefused

__all__ = [
    "ACK_EVERY",
    "CONNECT_PATH",
    "DEFAULT_HEARTBEAT",
    "DEFAULT_TIMEOUT",
    "MAX_UNACKED_BYTES",
    "MAX_UNACKED_MESSAGES",
    "NAME_PATTERN",
    "PROTOCOL_VERSION",
    "Hello",
    "Link",
    "LinkState",
    "Outbox",
    "ResumeRefused",
    "Transport",
    "Welcome",
    "check_name",
]
