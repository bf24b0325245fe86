"""Where a session's live work runs: ownership, leases and routing between servers.

:class:`Ownership` is the seam: :class:`SoloOwnership` when this process owns every
session (SQLite, memory); :class:`SharedOwnership` when several servers share a
PostgreSQL database, each session tree leased to one of them. :class:`Router` runs a
typed :class:`Call` where its tree is held or forwards it; :class:`CallWire` is the one
place a call and its answer become JSON to cross processes; :class:`RemoteFeed` brings
other servers' events to this server's subscribers.
"""

from ._calls import FORWARD_TIMEOUT, WIRE_VERSION, Call, CallWire
from ._ownership import Elsewhere, Moved, Ownership, SoloOwnership, Tenure
from ._remote_feed import RemoteFeed
from ._routing import Router
from ._runner_directory import Placement, RunnerDirectory, RunnerLink, RunnerLinks
from ._shared import (
    DEFAULT_LEASE_TTL,
    Member,
    SharedOwnership,
    SharedStore,
    default_server_name,
    open_shared_ownership,
)

__all__ = [
    "DEFAULT_LEASE_TTL",
    "FORWARD_TIMEOUT",
    "WIRE_VERSION",
    "Call",
    "CallWire",
    "Elsewhere",
    "Member",
    "Moved",
    "Ownership",
    "Placement",
    "RemoteFeed",
    "Router",
    "RunnerDirectory",
    "RunnerLink",
    "RunnerLinks",
    "SharedOwnership",
    "SharedStore",
    "SoloOwnership",
    "Tenure",
    "default_server_name",
    "open_shared_ownership",
]
