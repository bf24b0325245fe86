"""Calls between servers: a command row and ``NOTIFY`` there, a reply row back.

:class:`CommandChannel` belongs to a :class:`~._shared.SharedOwnership`. Its
:meth:`~CommandChannel.forward` posts a command to the server holding a session's
tree and waits for the reply (or for the holder to lose the tree: ``Moved``); its
:meth:`~CommandChannel.run` loop takes the commands addressed here — woken by a
notification, and every lease time in any case — and runs each call in its own task
(at most :data:`_HANDLERS` at once; more wait in the table), answering with a reply
row. A forwarding caller that is cancelled posts a ``cancel`` command, which cancels
that call's task on the holder.

A command row carries a typed :class:`~.._calls.Call` as the JSON text its
:class:`~.._calls.CallWire` makes of it (its ``kind`` is the call's name), and a reply
row the answer's; this is the only place the cluster's calls are serialised.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import attrs
import trio

from ...._ids import new_id
from ....errors import InternalError, OmnigentError, OwnerUnavailable
from ....stores import ClusterStore, CommandRow
from .._calls import Call, CallWire
from .._ownership import Elsewhere, Moved

__all__ = ["CommandChannel", "Serve"]

log = logging.getLogger("omnigent.core.cluster")

_COMMAND_BATCH = 100
_HANDLERS = 256
# Kinds of rows that are the channel's own, not calls.
_REPLY = "reply"
_CANCEL = "cancel"

T = TypeVar("T")

Serve = Callable[[Call[Any, Any], str, str], Awaitable[Any]]
"""Runs a call forwarded here: ``(call, session_id, root_id) -> answer``; raises
``Moved`` when the tree is not held here."""


@attrs.define(eq=False)
class _Waiter:
    done: trio.Event = attrs.field(factory=trio.Event)
    reply: str = ""


class CommandChannel:
    """Forwarded calls, both ways, for one cluster member.

    Args:
        store: where command rows are posted and taken.
        instance: this member's instance key (commands addressed to it are its).
        nursery: where the calls run here run (the ownership's).
        ttl: the lease time (how often a silent holder is looked at again).
        wire: how calls and answers become the rows' text.
        serve: runs a call forwarded here.
        closing: whether this member is shutting down (calls are answered "moved").
    """

    def __init__(
        self,
        store: ClusterStore,
        instance: str,
        nursery: trio.Nursery,
        ttl: float,
        wire: CallWire,
        *,
        serve: Serve,
        closing: Callable[[], bool],
    ) -> None:
        self._store = store
        self._instance = instance
        self._nursery = nursery
        self._ttl = ttl
        self._wire = wire
        self._serve_call = serve
        self._closing = closing
        self._waiting: dict[str, _Waiter] = {}  # forwarded calls awaiting their reply
        self._running: dict[str, trio.CancelScope] = {}  # calls run here, by command id
        self._slots = trio.CapacityLimiter(_HANDLERS)
        self._ready = trio.Event()

    def wake(self) -> None:
        """A command for this instance was posted (or notifications may have been lost)."""
        self._ready.set()

    async def forward(self, where: Elsewhere, call: Call[Any, T]) -> T:
        """Run ``call`` on the holder ``where`` names; its answer (see ``Ownership``).

        Raises:
            Moved: the holder does not hold the tree (any more). OwnerUnavailable: no
            answer within the call's ``timeout`` while it holds it. OmnigentError: what
            it raised.

        Cancellation: the holder's call is cancelled too (a ``cancel`` command).
        """
        command = CommandRow(
            new_id("cmd"),
            where.instance,
            self._instance,
            where.session_id,
            call.name,
            self._wire.encode_call(call, where.root_id),
        )
        timeout = call.timeout
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
            return self._wire.decode_answer(call, waiter.reply)
        except trio.Cancelled:
            with trio.move_on_after(2, shield=True):
                cancel = CommandRow(
                    new_id("cmd"), where.instance, self._instance, where.session_id, _CANCEL, ""
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
        if row.kind == _REPLY:
            waiter = self._waiting.get(row.reply_to or "")
            if waiter is not None:
                waiter.reply = row.payload
                waiter.done.set()
        elif row.kind == _CANCEL:
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
                new_id("cmd"), row.sender, self._instance, row.session_id, _REPLY, reply, row.id
            )
            await self._store.post_command(answer)
        except Exception:
            log.warning("could not answer %s from %s", row.kind, row.sender, exc_info=True)
        finally:
            del self._running[row.id]
            self._slots.release_on_behalf_of(row.id)

    async def _answer(self, row: CommandRow) -> str:
        wire = self._wire
        if self._closing():
            return wire.encode_moved()  # shutting down: its leases are about to be released
        try:
            call, root_id = wire.decode_call(row.kind, row.payload)
            value = await self._serve_call(call, row.session_id, root_id)
            return wire.encode_value(call, value)
        except (Moved, Elsewhere):
            return wire.encode_moved()
        except OmnigentError as exc:
            return wire.encode_error(exc)
        except Exception as exc:
            log.exception("forwarded %s on %s failed", row.kind, row.session_id)
            return wire.encode_error(InternalError(f"{type(exc).__name__} on the owning server"))
