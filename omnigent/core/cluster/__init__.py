"""Where a session's live work runs: ownership, leases and routing between servers.

:class:`Ownership` is the seam: :class:`SoloOwnership` when this process owns every
session (SQLite, memory); :class:`~.shared.SharedOwnership` when several servers share
a PostgreSQL database, each session tree leased to one of them (:mod:`.shared`, with
the :class:`~.shared.RemoteFeed` that brings other servers' events to this server's
subscribers: imported when a runtime opens on such a database, never on SQLite).
:class:`Router` runs a typed :class:`Call` where its tree is held or forwards it;
:class:`CallWire` is the one place a call and its answer become JSON to cross processes.
"""

from ._calls import FORWARD_TIMEOUT, WIRE_VERSION, Call, CallWire
from ._ownership import (
    DEFAULT_LEASE_TTL,
    Elsewhere,
    Moved,
    Ownership,
    SoloOwnership,
    Tenure,
    default_server_name,
)
from ._routing import Router
from ._runner_directory import Placement, RunnerDirectory, RunnerLink, RunnerLinks

__all__ = [
    "DEFAULT_LEASE_TTL",
    "FORWARD_TIMEOUT",
    "WIRE_VERSION",
    "Call",
    "CallWire",
    "Elsewhere",
    "Moved",
    "Ownership",
    "Placement",
    "Router",
    "RunnerDirectory",
    "RunnerLink",
    "RunnerLinks",
    "SoloOwnership",
    "Tenure",
    "default_server_name",
]
