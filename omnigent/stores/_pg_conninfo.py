"""libpq connection strings: a PostgreSQL URL with omnigent's defaults for what it leaves out.

Every connection the PostgreSQL store makes — the pool's, the first one that migrates,
the listener's — is made from :func:`connection_info`, so all of them notice a
database gone silent in bounded time. The URL's own parameters always win (an operator
may set ``?keepalives_idle=60`` or ``?connect_timeout=20``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from psycopg.conninfo import conninfo_to_dict, make_conninfo

__all__ = ["CONNECTION_DEFAULTS", "CONNECT_TIMEOUT", "connection_info"]

CONNECT_TIMEOUT = 5
"""Seconds a new connection may take (libpq's ``connect_timeout``)."""

CONNECTION_DEFAULTS: Final[Mapping[str, str]] = {
    "connect_timeout": str(CONNECT_TIMEOUT),
    "keepalives": "1",
    "keepalives_idle": "10",
    "keepalives_interval": "5",
    "keepalives_count": "3",
    "tcp_user_timeout": "25000",
}
"""libpq parameters every connection gets unless the URL sets them itself.

The keepalives notice a database gone silent (a partition, a host lost without a
reset) within about 25 s: without them a call would learn it only at the store's
deadline (30 s by default, where its connection is given up), an idle pooled
connection would be lent dead, and the listener's ping, in its worker thread, would
wait on the dead socket for the system's default of two hours and more.
``tcp_user_timeout`` does the same for data sent and never acknowledged.
"""


def connection_info(url: str) -> str:
    """``url`` as a libpq connection string, with :data:`CONNECTION_DEFAULTS` for what
    it does not set (what it sets wins).

    Raises:
        psycopg.ProgrammingError: ``url`` is not a valid connection URL.
    """
    given = conninfo_to_dict(url)
    return make_conninfo(url, **{k: v for k, v in CONNECTION_DEFAULTS.items() if k not in given})
