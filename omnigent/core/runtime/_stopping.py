"""Stopping sessions' work: one session, a tree being deleted, or all at shutdown.

A stop (``stop_session``) cancels everything one session runs and withdraws what is
pending on it and its descendants — hook requests and policy ASKs held by callers
outside the session included — and waits for both; a delete stops every session of
the doomed tree the same way. Either runs where the session's tree is held (the
runtime routes it there).

Shutdown has a grace period: every session is stopped, then what is stuck is abandoned.
Leaving ``open_runtime`` (or ``Runtime.shutdown``) must end, whatever a tool does. The
sessions are stopped — each running turn ends ``cancelled`` and says so — and given
``grace`` seconds. A sync tool or policy blocked in its thread (``time.sleep(60)``)
is left after its own short grace, as by any cancel
(:mod:`omnigent.core.work._threads`); what still runs after ``grace`` can only be
waiting on a thread — a blocking call abandoned by nobody yet, or a store call on a
locked database. Those waits are abandoned, with a log line naming each, and the
turns end at once; the threads finish on their own.

Every wait of a stop has a deadline too: stopping one session or a doomed tree waits
for their actors at most ``grace`` + :data:`AFTER_GRACE`, then goes on, naming what
ignored the cancellation.

Every wait of a shutdown has a deadline: ``stop_all`` returns within ``grace`` +
:data:`AFTER_GRACE`. A session still running then ignores cancellation (an async tool
that shields itself without a deadline): it is named in an error line, and left —
Trio cannot abandon a task, so leaving ``open_runtime`` still waits for it to return.

:class:`Stopping` is the part of a runtime that does all three; at shutdown the bus and
the store are closed after it by ``open_runtime``, with the same kind of bound.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

import trio

from ...stores import Store
from ..asking import Elicitations
from ..bus import EventBus
from ..session import HistoryCache, SessionActor
from ..work import BlockingCalls, ClientMcp, SubAgents
from ._live import LiveSessions

if TYPE_CHECKING:
    from ...processes import ProcessManager

__all__ = ["AFTER_GRACE", "Stopping"]

log = logging.getLogger("omnigent.core")

# Once the grace is over, how long abandoned work gets to wind down (the rest of the
# "grace + 1 s" bound goes to the event writer and the store).
AFTER_GRACE = 0.5

# How long a stop or delete waits for withdrawn elicitations to record their end.
_WITHDRAW_WAIT = 5.0


class Stopping:
    """Stops sessions: one, a doomed tree, or all of them within a grace period.

    Owned by the ``Runtime``.

    Args:
        live: the live work (the actors to stop).
        elicitations: what is pending on the sessions (withdrawn).
        threads: blocking calls (abandoned past the shutdown grace).
        store, bus: where the stops' ends are written.
        processes: native coding agents' processes (ended with their session).
        client_mcp: MCP servers clients supplied (stopped with their session).
        subagents: dispatches (a deleted child's is delivered first).
        histories: kept histories (a stop's dropped messages invalidate one).
        grace: the shutdown grace, in seconds.
    """

    def __init__(
        self,
        *,
        live: LiveSessions,
        elicitations: Elicitations,
        threads: BlockingCalls,
        store: Store,
        bus: EventBus,
        processes: ProcessManager | None,
        client_mcp: ClientMcp,
        subagents: SubAgents,
        histories: HistoryCache,
        grace: float,
    ) -> None:
        self._live = live
        self._client_mcp = client_mcp
        self._subagents = subagents
        self._histories = histories
        self._elicitations = elicitations
        self._threads = threads
        self._store = store
        self._bus = bus
        self._processes = processes
        self.grace = grace
        self.done = trio.Event()
        self._started = False

    # -- one session, or a tree ---------------------------------------------------------

    async def stop_here(self, session_id: str) -> None:
        """``Runtime.stop_session`` where the session's tree is held (the routed call).

        Settles the buffered messages it drops (their turn streams learn that no
        turn will answer them), and returns once the stop's terminal events are
        stored.
        """
        actor = self._live.actor(session_id)
        if actor is not None and (waiting := sorted(actor.pending_ids())):
            # Settled before the stop ends anything: a turn stream on another server
            # waiting on one of these learns that no turn will answer it.
            with trio.move_on_after(_WITHDRAW_WAIT, shield=True):
                await self._store.settle_items(session_id, waiting)
        tree = [session_id, *await self._store.descendant_ids(session_id)]
        dropped = await self._stop_and_withdraw([session_id], withdraw=tree)
        self._histories.drop(session_id)  # dropped messages stay in the history
        with trio.move_on_after(_WITHDRAW_WAIT, shield=True):
            await self._store.settle_items(session_id, dropped)
            # The stop's terminal events are stored before it answers; their queued
            # writes also hold the tree, which is let go once they are written.
            await self._bus.flush()

    async def stop_tree_here(self, session_id: str, doomed: list[str]) -> None:
        """What a delete stops, where the tree is held: every doomed session's work."""
        await self._stop_and_withdraw(doomed)
        # A deleted child's dispatch is delivered to its (surviving) parent first.
        await self._subagents.wait_concluded(doomed)
        with trio.move_on_after(_WITHDRAW_WAIT, shield=True):
            await self._bus.flush()

    async def stop_and_wait(self, session_id: str) -> None:
        """Stop one session (what a sub-agent watcher stops its child with)."""
        await self._stop_and_withdraw([session_id])

    async def _stop_and_withdraw(
        self, session_ids: Sequence[str], *, withdraw: Sequence[str] | None = None
    ) -> list[str]:
        """Stop the sessions' actors and withdraw what is pending on ``withdraw``
        (default: the same sessions); wait for both. Returns the dropped messages."""
        actors = [a for a in (self._live.actor(sid) for sid in session_ids) if a]
        dropped = [item_id for actor in actors for item_id in actor.stop()]
        waiters = self._elicitations.withdraw(set(withdraw or session_ids))
        with trio.move_on_after(self.grace + AFTER_GRACE):
            await _all_done(actors)
        left = [a.session_id for a in actors if not a.done.is_set()]
        if left:
            # Cancelled work ends within the grace (a blocked thread is left after its
            # own); what still runs shields itself. The stop goes on without it, as
            # shutdown does, rather than hold its caller (a delete, an HTTP request).
            log.error(
                "stop: going on without %d sessions that did not end %.1f s after they "
                "were stopped (%s): they ignore cancellation",
                len(left),
                self.grace + AFTER_GRACE,
                ", ".join(left[:10]) + (" …" if len(left) > 10 else ""),
            )
        # MCP servers a connected client supplies: stopped too (the next turn on that
        # connection starts them again; a deleted session has none).
        await self._client_mcp.stop(session_ids)
        if self._processes is not None:
            # A native coding agent's process serves this session only: a stop or a
            # delete leaves none behind (an idle session's included).
            for sid in session_ids:
                await self._processes.terminate_session(sid)
        with trio.move_on_after(_WITHDRAW_WAIT):
            for waiter in waiters:
                await waiter.finished.wait()
        return dropped

    # -- every session, at shutdown -----------------------------------------------------

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
        live = self._live
        live.closing = True
        actors = list(live.actors.values())
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
        # Nothing of ours waits any more: what still runs ignores cancellation (an
        # async tool that shields itself, a thread not started through BlockingCalls).
        # Trio cannot abandon a task: leaving open_runtime still waits for it.
        left = [a.session_id for a in actors if not a.done.is_set()]
        log.error(
            "shutdown: abandoning %d sessions that did not end %.1f s after they were "
            "stopped (%s): they ignore cancellation, and leaving the runtime waits for them",
            len(left),
            self.grace + AFTER_GRACE,
            ", ".join(left[:10]) + (" …" if len(left) > 10 else ""),
        )


async def _all_done(actors: list[SessionActor]) -> None:
    for actor in actors:
        await actor.done.wait()
