"""LISTEN on a dedicated connection, in Trio, across reconnections.

:func:`open_listener` keeps one connection of its own (not from the pool) in
``LISTEN`` on the given channels, and forwards every notification into a bounded
memory channel. It waits for the socket with ``trio.lowlevel.wait_readable`` and
drains with psycopg's non-blocking ``notifies(timeout=0)``, so a notification costs no
thread hop. Only connecting and the keep-alive ping (a quiet connection is probed every
:data:`PING_INTERVAL` seconds) run in a worker thread.

A lost connection is reopened with backoff. Notifications sent while it was down are
lost, so after every (re)connection the listener first sends ``Notification("")``: the
consumer then re-reads whatever it follows.

Resource handling: the connection and the reader task live exactly as long as the
block; leaving it closes both.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager

import psycopg
import trio
from psycopg import sql

from ._cluster import Notification
from ._pg_conninfo import connection_info

__all__ = ["PING_INTERVAL", "open_listener"]

log = logging.getLogger(__name__)

PING_INTERVAL = 5.0
_BUFFER = 1024
_FIRST_DELAY = 0.05
_MAX_DELAY = 1.0


@asynccontextmanager
async def open_listener(
    url: str, channels: Sequence[str]
) -> AsyncIterator[trio.MemoryReceiveChannel[Notification]]:
    """Notifications on ``channels`` while the block runs (see the module docstring).

    The first connection is made before the block starts; the first item received is
    the ``Notification("")`` of that connection.

    Raises:
        psycopg.OperationalError: the first connection failed.
    """
    send, receive = trio.open_memory_channel[Notification](_BUFFER)
    conninfo = connection_info(url)
    first = await _connect(conninfo, channels)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_listen, conninfo, channels, first, send)
        try:
            yield receive
        finally:
            nursery.cancel_scope.cancel()


async def _connect(conninfo: str, channels: Sequence[str]) -> psycopg.Connection[object]:
    def connect() -> psycopg.Connection[object]:
        conn: psycopg.Connection[object] = psycopg.connect(conninfo, autocommit=True)
        try:
            for channel in channels:
                conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(channel)))
        except BaseException:
            conn.close()
            raise
        return conn

    return await trio.to_thread.run_sync(connect)


async def _listen(
    conninfo: str,
    channels: Sequence[str],
    conn: psycopg.Connection[object] | None,
    send: trio.MemorySendChannel[Notification],
) -> None:
    delay = _FIRST_DELAY
    async with send:
        while True:
            try:
                if conn is None:
                    conn = await _connect(conninfo, channels)
                    log.info("listening again on %s", ", ".join(channels))
                delay = _FIRST_DELAY
                await send.send(Notification(""))
                await _pump(conn, send)
            except psycopg.OperationalError as exc:
                log.warning("notification connection lost (%s); reconnecting", exc)
            finally:
                if conn is not None:
                    conn.close()
                    conn = None
            await trio.sleep(delay)
            delay = min(delay * 2, _MAX_DELAY)


async def _pump(
    conn: psycopg.Connection[object], send: trio.MemorySendChannel[Notification]
) -> None:
    """Forward notifications until the connection fails (raises OperationalError)."""
    while True:
        with trio.move_on_after(PING_INTERVAL) as quiet:
            await trio.lowlevel.wait_readable(conn.fileno())
        if quiet.cancelled_caught:
            # Nothing for a while: make sure the connection is still there.
            await trio.to_thread.run_sync(lambda: conn.execute("SELECT 1"))
        for note in conn.notifies(timeout=0):
            await send.send(Notification(note.channel, note.payload))
        if conn.closed or conn.broken:
            raise psycopg.OperationalError("the notification connection closed")
