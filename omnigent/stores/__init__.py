"""Stores: the database behind a runtime, chosen by URL in one place.

:func:`open_store` opens the store a URL names: ``sqlite:///PATH`` (or a bare path) is
the embedded SQLite store, ``None`` a private in-memory one. The core is typed
against the :class:`Store` protocol and the row types here; no module outside this
package imports a concrete store.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from .. import errors
from ._protocol import Store
from ._rows import (
    WORK_OPEN,
    WORK_TERMINAL,
    AgentRow,
    FileRow,
    Page,
    PendingItem,
    ProcessGroupRow,
    RunningTask,
    SessionRow,
    StoredEvent,
    WorkRow,
)

__all__ = [
    "WORK_OPEN",
    "WORK_TERMINAL",
    "AgentRow",
    "FileRow",
    "Page",
    "PendingItem",
    "ProcessGroupRow",
    "RunningTask",
    "SessionRow",
    "Store",
    "StoredEvent",
    "WorkRow",
    "open_store",
    "parse_sqlite_url",
]


def parse_sqlite_url(url: str | None) -> Path | None:
    """Where a SQLite database lives; ``None`` means in memory.

    Accepts ``sqlite:///relative.db``, ``sqlite:////abs/path.db``, ``sqlite://:memory:``
    and a bare file path.

    Raises:
        BadRequest: for a URL of another scheme.
    """
    if url is None or url in ("", ":memory:", "sqlite://", "sqlite://:memory:"):
        return None
    if url.startswith("sqlite:///"):
        return Path(url.removeprefix("sqlite:///")).expanduser()
    if "://" in url:
        scheme = url.split("://", 1)[0]
        raise errors.BadRequest(f"unsupported database URL scheme {scheme!r} (use sqlite:///PATH)")
    return Path(url).expanduser()


@asynccontextmanager
async def open_store(url: str | None, *, exclusive: bool = True) -> AsyncIterator[Store]:
    """Open the store ``url`` names, for as long as the block runs.

    Args:
        url: ``sqlite:///PATH``, a path, or ``None`` (in memory).
        exclusive: own the database (see :func:`.sqlite.open_sqlite_store`); ``False``
            opens it beside a running owner, for records only.

    Raises:
        BadRequest: an unsupported URL. StoreBusy: ``exclusive`` and another process
        owns the database.
    """
    from .sqlite import open_sqlite_store

    async with open_sqlite_store(parse_sqlite_url(url), exclusive=exclusive) as store:
        yield store
