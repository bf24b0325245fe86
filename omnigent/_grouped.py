"""Calls of one kind sent together while one is on its way: a group commit.

Under load — issue 32's 200 turns at once — the database sees many one-row statements
of the same kind at the same moment: a cluster member's lease claims and releases, a
PostgreSQL store's reads of session rows and histories. Each is a round trip, a
statement the database parses and runs, and this process's CPU around it.
:class:`Grouped` sends one call for every call that is waiting, sized by what is
waiting: a call that finds none under way is sent at once, alone (no added delay when
the server is quiet); calls that arrive while one is on its way join the next batch,
which the first of them to run sends as soon as that one ends. A call never joins a
batch already sent, so it sees everything that was written before it was made.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Mapping
from typing import Generic, TypeVar

import attrs
import trio

__all__ = ["Grouped"]

K = TypeVar("K")
R = TypeVar("R")


@attrs.define(eq=False)
class _Batch(Generic[K, R]):
    keys: set[K] = attrs.field(factory=set)
    ended: trio.Event = attrs.field(factory=trio.Event)
    answers: Mapping[K, R] = attrs.field(factory=dict)
    failed: Exception | None = None
    unsent: bool = False  # its sender was cancelled before it was sent


class Grouped(Generic[K, R]):
    """One call per key, sent in batches (see the module docstring).

    ``send`` answers every key of a batch (a mapping holding each); it runs in the
    task of the batch's first call to run. If it raises, every call of the batch
    raises that exception (as every waiter of an ``asyncio`` future does).

    Cancellation: a call cancelled while its batch waits leaves the batch — nothing
    was sent for it. Once its batch is being sent, a ``shielded`` call (a write: a
    claim that was sent must reach its caller, or the lease would be held by nobody's
    tenure) waits for the answer through a cancel, as the store's writes do, until
    their timeout; an unshielded one (a read) leaves at once, its answer unread.
    ``send`` of a shielded batch should itself finish through a cancel (the store's
    writes do); if a batch's sender is cancelled all the same, its other calls send
    their keys again — ``send`` must be safe to repeat (a claim, a release and a read
    are).
    """

    def __init__(
        self,
        send: Callable[[Collection[K]], Awaitable[Mapping[K, R]]],
        *,
        shielded: bool = True,
    ) -> None:
        self._send = send
        self._shielded = shielded
        self._next: _Batch[K, R] = _Batch()
        self._sending: _Batch[K, R] | None = None

    async def __call__(self, key: K) -> R:
        while True:
            batch = self._next
            batch.keys.add(key)
            try:
                while self._sending is not None and self._sending is not batch:
                    await self._sending.ended.wait()
            except BaseException:
                if batch is self._next:
                    batch.keys.discard(key)
                raise
            if batch is self._next:
                return await self._send_batch(batch, key)
            with trio.CancelScope(shield=self._shielded):  # sent by another call
                await batch.ended.wait()
            if not batch.unsent:
                return _answer(batch, key)

    async def _send_batch(self, batch: _Batch[K, R], key: K) -> R:
        self._next = _Batch()
        self._sending = batch
        try:
            batch.answers = await self._send(frozenset(batch.keys))
        except Exception as exc:
            batch.failed = exc
            raise
        except BaseException:
            batch.unsent = True  # the others send it again, without this call's key
            raise
        finally:
            self._sending = None
            batch.ended.set()
        return _answer(batch, key)


def _answer(batch: _Batch[K, R], key: K) -> R:
    if batch.failed is not None:
        raise batch.failed
    return batch.answers[key]
