"""Shared ownership: several servers on one database (PostgreSQL), each session tree
leased to one of them.

:class:`SharedOwnership` is the :class:`~omnigent.core.cluster.Ownership` of a cluster
store (:func:`open_shared_ownership` owns its tasks); a runtime joins it with a
:class:`Member`, and :class:`RemoteFeed` brings other servers' events to this server's
subscribers. ``docs/architecture.md`` ("Several servers") is the prose version.

A package of its own, imported when a runtime opens on a cluster store: a server that
owns its database alone (SQLite) never loads it (``benchmarks/startup.py``).
"""

from ._remote_feed import RemoteFeed
from ._shared import Member, SharedOwnership, open_shared_ownership
from ._trees import SharedStore

__all__ = [
    "Member",
    "RemoteFeed",
    "SharedOwnership",
    "SharedStore",
    "open_shared_ownership",
]
