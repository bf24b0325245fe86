"""Shutdown with a grace period: stop every session, then abandon what is stuck.

Leaving ``open_runtime`` (or ``Runtime.shutdown``) must end, whatever a tool does. The
sessions are stopped — each running turn ends ``cancelled`` and says so — and given
``grace`` seconds. A sync tool or policy blocked in its thread (``time.sleep(60)``)
is left after its own short grace, as by any cancel
(:mod:`omnigent.core.work._threads`); what still runs after ``grace`` can only be
waiting on a thread — a blocking call abandoned by nobody yet, or a store call on a
locked database. Those waits are abandoned, with a
log line naming each, and the turns end at once; the threads finish on their own.

:class:`Stopping` is the part of a runtime that does it; the bus and the store are
closed after it by ``open_runtime``, with the same kind of bound.
"""

from __future__ import annotations

import logging

import trio

from ...stores import Store
from ..asking import Elicitations
from ..session import SessionActor
from ..work import BlockingCalls
from ._host import ActorHost

__all__ = ["AFTER_GRACE", "Stopping"]

log = logging.getLogger("omnigent.core")

# Once the grace is over, how long abandoned work gets to wind down (the rest of the
# "grace + 1 s" bound goes to the event writer and the store).
AFTER_GRACE = 0.5


class Stopping:
    """Stops a runtime's sessions within a grace period. Owned by the ``Runtime``."""

    def __init__(
        self,
        *,
        host: ActorHost,
        elicitations: Elicitations,
        threads: BlockingCalls,
        store: Store,
        grace: float,
    ) -> None:
        self._host = host
        self._elicitations = elicitations
        self._threads = threads
        self._store = store
        self.grace = grace
        self.done = trio.Event()
        self._started = False

    async def stop_all(self) -> None:
        """Refuse new work, stop every session and wait for them (bounded).

        Buffered messages stay pending in the store: the next start answers them.
        Idempotent: a second call waits for the first.

        Cancellation: shielded; bounded by ``grace`` + :data:`AFTER_GRACE` (plus the
        harnesses' own bounded ``aclose``).
        """
        if self._started:
            await self.done.wait()
            return
        self._started = True
        with trio.CancelScope(shield=True):
            try:
                await self._stop_all()
            finally:
                self.done.set()

    async def _stop_all(self) -> None:
        host = self._host
        host.closing = True
        actors = list(host.actors.values())
        for actor in actors:
            actor.stop()
        # Hook requests and policy ASKs held by callers outside any session: answered
        # ``cancel`` (a hook answers deny), as by a stop.
        self._elicitations.withdraw(self._elicitations.sessions())
        with trio.move_on_after(self.grace):
            await _all_done(actors)
            return
        stuck = self._threads.abandon()
        left = [a.session_id for a in actors if not a.done.is_set()]
        log.warning(
            "shutdown: the %.1f s grace is over with %d sessions still running (%s); abandoning %s",
            self.grace,
            len(left),
            ", ".join(left[:10]),
            "; ".join(stuck) if stuck else "no blocked threads",
        )
        with trio.move_on_after(AFTER_GRACE / 2):
            await _all_done(actors)
            return
        waits = self._store.abandon()
        log.warning("shutdown: abandoning %d store calls still waiting for the database", waits)
        with trio.move_on_after(AFTER_GRACE / 2):
            await _all_done(actors)
            return
        for actor in actors:
            if not actor.done.is_set():
                log.error("shutdown: session %s is still winding down", actor.session_id)
        await _all_done(actors)


async def _all_done(actors: list[SessionActor]) -> None:
    for actor in actors:
        await actor.done.wait()
