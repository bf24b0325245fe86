"""Stores: the database behind a runtime, chosen by URL in one place.

:func:`open_store` opens the store a URL names: ``sqlite:///PATH`` (or a bare path) is
the embedded SQLite store, ``None`` a private in-memory one, ``postgresql://…`` the
PostgreSQL store several servers can share (``pip install 'omnigent[postgres]'``).
The core is typed against the :class:`Store` protocol and the row types here — and,
for a shared store, :class:`ClusterStore` — and no module outside this package
imports a concrete store.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from .. import errors
from . import _lock
from ._cluster import (
    COMMANDS_CHANNEL,
    EVENTS_CHANNEL,
    Claim,
    ClusterStore,
    CommandRow,
    LeaseLost,
    Notification,
    RunnerLinkRow,
    ServerRow,
)
from ._lock import LockHolder
from ._protocol import DEFAULT_TIMEOUT, Store
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
    TurnStart,
    WorkRow,
)

__all__ = [
    "COMMANDS_CHANNEL",
    "DEFAULT_TIMEOUT",
    "EVENTS_CHANNEL",
    "WORK_OPEN",
    "WORK_TERMINAL",
    "AgentRow",
    "Claim",
    "ClusterStore",
    "CommandRow",
    "FileRow",
    "LeaseLost",
    "LockHolder",
    "Notification",
    "Page",
    "PendingItem",
    "ProcessGroupRow",
    "RunnerLinkRow",
    "RunningTask",
    "ServerRow",
    "SessionRow",
    "Store",
    "StoredEvent",
    "TurnStart",
    "WorkRow",
    "announce_server",
    "cluster_of",
    "forget_runner_token",
    "is_postgres_url",
    "local_runner_token",
    "open_store",
    "parse_sqlite_url",
    "publish_runner_token",
    "store_holder",
]

_POSTGRES_SCHEMES = ("postgresql://", "postgres://")


def cluster_of(store: Store) -> ClusterStore | None:
    """``store`` as a cluster store, if it is one opened as a cluster member.

    PostgreSQL opened with an ``instance`` key is; SQLite (and memory) never is.
    """
    if getattr(store, "instance", None) is None or not hasattr(store, "claim"):
        return None
    return store  # type: ignore[return-value]


def store_holder(url: str | None) -> LockHolder | None:
    """Who holds the SQLite store ``url`` names now (see :class:`LockHolder`), or
    ``None``: nobody does, or it is not a SQLite file (memory, PostgreSQL — a database
    several servers share, which nobody holds).

    Blocking file I/O, but brief.

    Raises:
        BadRequest: an unsupported URL.
    """
    if is_postgres_url(url):
        return None
    path = parse_sqlite_url(url)
    return None if path is None else _lock.lock_holder(path)


def announce_server(url: str | None, address: str) -> bool:
    """Write ``address`` (``http://HOST:PORT``) into the record of the SQLite store
    ``url`` that this process holds, for the command line to find (``omnigent serve``
    calls it once it listens). Returns whether it did (not for memory or PostgreSQL,
    nor a store this process does not hold).

    Blocking file I/O, but brief.
    """
    if is_postgres_url(url):
        return False
    path = parse_sqlite_url(url)
    return path is not None and _lock.add_server_address(path, address)


def publish_runner_token(url: str | None, token: str) -> bool:
    """Write ``token`` beside the SQLite store ``url`` names (``0600``), for this
    user's command line to start runners with (``omnigent serve`` calls it once it
    listens; see :mod:`omnigent.stores._lock`). Returns whether it did (not for memory
    or PostgreSQL).

    Blocking file I/O, but brief.

    Raises:
        OSError: the file cannot be written.
    """
    if is_postgres_url(url):
        return False
    path = parse_sqlite_url(url)
    if path is None:
        return False
    _lock.write_local_token(path, token)
    return True


def local_runner_token(url: str | None) -> str | None:
    """The token the server holding the SQLite store ``url`` wrote for this user's
    runners (see :func:`publish_runner_token`), or ``None``.

    Blocking file I/O, but brief.
    """
    if is_postgres_url(url):
        return None
    path = parse_sqlite_url(url)
    return None if path is None else _lock.read_local_token(path)


def forget_runner_token(url: str | None, token: str) -> None:
    """Remove what :func:`publish_runner_token` wrote, if it is still ``token``."""
    if is_postgres_url(url):
        return
    path = parse_sqlite_url(url)
    if path is not None:
        _lock.forget_local_token(path, token)


def is_postgres_url(url: str | None) -> bool:
    """Whether ``url`` names a PostgreSQL database (``postgresql://`` or ``postgres://``)."""
    return url is not None and url.startswith(_POSTGRES_SCHEMES)


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
        raise errors.BadRequest(
            f"unsupported database URL scheme {scheme!r} (use sqlite:///PATH or postgresql://…)"
        )
    return Path(url).expanduser()


@asynccontextmanager
async def open_store(
    url: str | None,
    *,
    exclusive: bool = True,
    instance: str | None = None,
    timeout: float = DEFAULT_TIMEOUT,
) -> AsyncIterator[Store]:
    """Open the store ``url`` names, for as long as the block runs.

    Args:
        url: ``sqlite:///PATH``, a path, ``None`` (in memory), or ``postgresql://…``.
        exclusive: (SQLite) own the database (see :func:`.sqlite.open_sqlite_store`);
            ``False`` opens it beside a running owner, for records only. A PostgreSQL
            database is shared, never owned: there it changes nothing.
        instance: (PostgreSQL) this process's cluster instance key: its event writes
            are then fenced by its leases (see :class:`ClusterStore`).
        timeout: how long a store call is waited for at most, in seconds: a read is
            given up then, a write (which a cancel does not interrupt) too, and the
            caller gets ``StoreTimeout``. A lock another connection holds is waited
            for half of it. PostgreSQL also has the server end a statement then.

    Raises:
        BadRequest: an unsupported URL, or PostgreSQL without psycopg (or greenlet) installed.
        StoreBusy: (SQLite) ``exclusive`` and another process owns the database.
        StoreUnavailable: (PostgreSQL) the database cannot be reached.
    """
    if is_postgres_url(url):
        assert url is not None
        try:
            from .postgres import open_postgres_store
        except ImportError as exc:
            raise errors.BadRequest(
                "a PostgreSQL store needs psycopg and greenlet: "
                f"pip install 'omnigent[postgres]' ({exc})"
            ) from None
        async with open_postgres_store(url, instance=instance, timeout=timeout) as pg_store:
            yield pg_store
        return
    from .sqlite import open_sqlite_store

    async with open_sqlite_store(
        parse_sqlite_url(url), exclusive=exclusive, timeout=timeout
    ) as store:
        yield store
