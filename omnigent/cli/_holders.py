"""Who holds a store, and where a command that runs turns runs them.

A SQLite store is held by one runtime at a time; its lock says who
(:class:`~omnigent.stores.LockHolder`; a server adds the address it answers on). The
commands that run turns here (``serve``, ``run``, ``chat``, ``stdio``) ask this module
first: a store another process holds is refused before anything starts, naming the
holder, and a store an ``omnigent serve`` holds makes ``run``, ``chat`` and ``stdio``
work through that server (:func:`server_for_turns`).

It imports no runtime and no client: ``omnigent serve`` reads it before its first
request, and pays only for the store's lock file (``benchmarks/startup.py``).
"""

from __future__ import annotations

import argparse
import logging
import os

import attrs

from .._config import default_db_url
from ..errors import BadRequest, Conflict
from ..stores import LockHolder, local_runner_token, store_holder

__all__ = [
    "TurnServer",
    "busy_message",
    "held_by",
    "local_token",
    "server_for_turns",
    "store_for_turns",
]

log = logging.getLogger("omnigent.cli")


def held_by(db: str) -> LockHolder | None:
    """Who holds the store ``db`` now (``None``: nobody, or not a SQLite file)."""
    return store_holder(db)


def local_token(db: str) -> str | None:
    """The runner token the server holding the store ``db`` left for this user
    (``<file>.runner-token``, ``0600``), or ``None``."""
    return local_runner_token(db)


def busy_message(db: str, holder: LockHolder, doing: str) -> str:
    """Why ``doing`` (``omnigent run``) cannot have the store ``db`` that ``holder`` has."""
    if holder.url:
        return (
            f"the store {db} is held by the omnigent server at {holder.url} "
            f"({holder.who()}); {doing} runs its turns in this process and needs the "
            "store to itself: stop the server, or give it a store of its own with "
            "--db FILE (the server's sessions: omnigent sessions list)"
        )
    return (
        f"the store {db} is in use by {holder.describe()}; {doing} needs it to itself: "
        "wait for that to end, or give it a store of its own with --db FILE"
    )


def store_for_turns(args: argparse.Namespace, doing: str) -> str:
    """The store a command that runs turns here will own.

    Raises:
        Conflict: another process holds it (a server, with its address), said before
            anything starts.
    """
    db: str = getattr(args, "db", None) or default_db_url()
    holder = held_by(db)
    if holder is not None:
        raise Conflict(busy_message(db, holder, doing))
    return db


@attrs.frozen
class TurnServer:
    """The server a command's turns run on, its work here: ``url``, and the runner
    ``token`` this command's runner connects with. ``local``: found through the
    store's lock (the server is this user's own, and so is the token)."""

    url: str
    token: str
    local: bool


def server_for_turns(args: argparse.Namespace, doing: str) -> TurnServer | None:
    """Where a command that runs turns (``run``, ``stdio``) runs them: ``None`` for
    this process (the store is free), else a server.

    ``--server URL`` names one outright (the token: ``--token``, else
    ``$OMNIGENT_RUNNER_TOKEN``, else the local one when that server holds the store).
    Without it, a store held by an ``omnigent serve`` that left a local runner token is
    worked on through that server.

    Raises:
        Conflict: another process holds the store, and it is no server this user's
            runner can join (its message names the holder).
        BadRequest: ``--server`` with no token to connect a runner with.
    """
    from ..link import TOKEN_VARIABLE

    db: str = getattr(args, "db", None) or default_db_url()
    server: str | None = getattr(args, "server", None)
    token: str | None = getattr(args, "token", None) or os.environ.get(TOKEN_VARIABLE)
    if server is not None:
        if token is None:
            holder = held_by(db)
            if holder is not None and holder.url == server.rstrip("/"):
                token = local_token(db)
        if not token:
            raise BadRequest(
                f"{doing} --server needs a runner token: --token TOKEN or ${TOKEN_VARIABLE}"
            )
        return TurnServer(server, token, local=False)
    holder = held_by(db)
    if holder is None:
        return None
    own = local_token(db) if holder.url else None
    if holder.url is None or own is None:
        raise Conflict(busy_message(db, holder, doing))
    log.info("the store %s is held by the server at %s: the turn runs there", db, holder.url)
    return TurnServer(holder.url, own, local=True)
