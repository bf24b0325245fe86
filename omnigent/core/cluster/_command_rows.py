"""Calls between servers: a command row and ``NOTIFY`` there, a reply row back.

:class:`CommandChannel` belongs to a :class:`~._shared.SharedOwnership`. Its
:meth:`~CommandChannel.forward` posts a command to the server holding a session's
tree and waits for the reply (or for the holder to lose the tree: ``Moved``); its
:meth:`~CommandChannel.run` loop takes the commands addressed here — woken by a
notification, and every lease time in any case — and runs each call in its own task
(at most :data:`_HANDLERS` at once; more wait in the table), answering with a reply
row. A forwarding caller that is cancelled posts a ``cancel`` command, which cancels
that call's task on the holder.

How calls and answers are encoded is :mod:`._commands`.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import attrs
import trio

from ..._ids import new_id
from ...errors import Conflict, InternalError, OmnigentError, OwnerUnavailable
from ...stores import ClusterStore, CommandRow
from ._commands import decode_reply, encode_error, encode_moved, encode_value
from ._ownership import Elsewhere, Moved

__all__ = ["FORWARD_TIMEOUT", "CommandChannel", "Handler"]

log = logging.getLogger("omnigent.core.cluster")

FORWARD_TIMEOUT = 30.0
_COMMAND_BATCH = 100
_HANDLERS = 256

Handler = Callable[[str, dict[str, Any]], Awaitable[Any]]


@attrs.define(eq=False)
class _Waiter:
    done: trio.Event = attrs.field(factory=trio.Event)
    reply: str = ""


class CommandChannel:
    """Forwarded calls, both ways, for one cluster member."""

    def __init__(
        self,
        store: ClusterStore,
        instance: str,
        nursery: trio.Nursery,
        ttl: float,
        handlers: Callable[[], dict[str, Handler]],
        closing: Callable[[], bool],
    ) -> None:
        self._store = store
        self._instance = instance
        self._nursery = nursery
        self._ttl = ttl
        self._handlers = handlers
        self._closing = closing
        self._waiting: dict[str, _Waiter] = {}  # forwarded calls awaiting their reply
        self._running: dict[str, trio.CancelScope] = {}  # calls run here, by command id
        self._slots = trio.CapacityLimiter(_HANDLERS)
        self._ready = trio.Event()

    def wake(self) -> None:
        """A command for this instance was posted (or notifications may have been lost)."""
        self._ready.set()

    async def forward(
        self,
        where: Elsewhere,
        kind: str,
        payload: dict[str, Any],
        *,
        timeout: float | None = FORWARD_TIMEOUT,
    ) -> Any:
        """Run ``kind`` on the holder ``where`` names; its answer (see ``Ownership``).

        Raises:
            Moved: the holder does not hold the tree (any more). OwnerUnavailable: no
            answer within ``timeout`` while it holds it. OmnigentError: what it raised.

        Cancellation: the holder's call is cancelled too (a ``cancel`` command).
        """
        command = CommandRow(
            new_id("cmd"),
            where.instance,
            self._instance,
            where.session_id,
            kind,
            json.dumps(payload),
        )
        waiter = self._waiting[command.id] = _Waiter()
        try:
            await self._store.post_command(command)
            deadline = trio.current_time() + (timeout if timeout is not None else float("inf"))
            while not waiter.done.is_set():
                with trio.move_on_after(self._ttl / 3):
                    await waiter.done.wait()
                if waiter.done.is_set():
                    break
                holder = await self._store.lease_holder(where.root_id)
                if holder is None or holder.instance != where.instance:
                    raise Moved()
                if trio.current_time() > deadline:
                    raise OwnerUnavailable(where.session_id, where.server)
            return decode_reply(waiter.reply)
        except trio.Cancelled:
            with trio.move_on_after(2, shield=True):
                cancel = CommandRow(
                    new_id("cmd"), where.instance, self._instance, where.session_id, "cancel", ""
                )
                await self._store.post_command(attrs.evolve(cancel, reply_to=command.id))
            raise
        finally:
            del self._waiting[command.id]

    async def run(self) -> None:
        """Take and run the commands addressed here, until cancelled."""
        self._ready.set()
        while True:
            with trio.move_on_after(self._ttl):
                await self._ready.wait()
            self._ready = trio.Event()
            rows = await self._store.take_commands(_COMMAND_BATCH)
            if len(rows) == _COMMAND_BATCH:
                self._ready.set()
            for row in rows:
                await self._dispatch(row)

    async def _dispatch(self, row: CommandRow) -> None:
        if row.kind == "reply":
            waiter = self._waiting.get(row.reply_to or "")
            if waiter is not None:
                waiter.reply = row.payload
                waiter.done.set()
        elif row.kind == "cancel":
            scope = self._running.get(row.reply_to or "")
            if scope is not None:
                scope.cancel()
        else:
            await self._slots.acquire_on_behalf_of(row.id)
            self._nursery.start_soon(self._serve, row)

    async def _serve(self, row: CommandRow) -> None:
        scope = self._running[row.id] = trio.CancelScope()
        try:
            with scope:
                reply = await self._answer(row)
            if scope.cancelled_caught:
                return  # the caller went away: nobody to answer
            answer = CommandRow(
                new_id("cmd"), row.sender, self._instance, row.session_id, "reply", reply, row.id
            )
            await self._store.post_command(answer)
        except Exception:
            log.warning("could not answer %s from %s", row.kind, row.sender, exc_info=True)
        finally:
            del self._running[row.id]
            self._slots.release_on_behalf_of(row.id)

    async def _answer(self, row: CommandRow) -> str:
        if self._closing():
            return encode_moved()  # shutting down: its leases are about to be released
        handler = self._handlers().get(row.kind)
        if handler is None:
            return encode_error(Conflict(f"this server does not handle {row.kind!r}"))
        try:
            payload = json.loads(row.payload) if row.payload else {}
            return encode_value(await handler(row.session_id, payload))
        except (Moved, Elsewhere):
            return encode_moved()
        except OmnigentError as exc:
            return encode_error(exc)
        except Exception as exc:
            log.exception("forwarded %s on %s failed", row.kind, row.session_id)
            return encode_error(InternalError(f"{type(exc).__name__} on the owning server"))
