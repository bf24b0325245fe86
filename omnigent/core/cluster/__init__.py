"""Where a session's live work runs: ownership, leases and routing between servers.

:class:`Ownership` is the seam: :class:`SoloOwnership` when this process owns every
session (SQLite, memory); :class:`SharedOwnership` when several servers share a
PostgreSQL database, each session tree leased to one of them. :class:`Router` runs a
call where its tree is held or forwards it; :class:`RemoteFeed` brings other servers'
events to this server's subscribers.
"""

from ._ownership import Elsewhere, Moved, Ownership, SoloOwnership, Tenure
from ._remote_feed import RemoteFeed
from ._routing import Router
from ._shared import (
    DEFAULT_LEASE_TTL,
    SharedOwnership,
    SharedStore,
    default_server_name,
    open_shared_ownership,
)

__all__ = [
    "DEFAULT_LEASE_TTL",
    "Elsewhere",
    "Moved",
    "Ownership",
    "RemoteFeed",
    "Router",
    "SharedOwnership",
    "SharedStore",
    "SoloOwnership",
    "Tenure",
    "default_server_name",
    "open_shared_ownership",
]
