"""Blocking user code in worker threads: a cancel gets a grace, then the thread is left.

A sync tool or a sync policy function runs in a worker thread so it cannot block the
event loop. A thread cannot be interrupted, so :class:`BlockingCalls` gives each call
*grace then abandon*, as a shutdown does for whole sessions:

* When its caller is cancelled (``interrupt``, ``stop_session``, a shutdown), the
  wait goes on for at most :data:`CANCEL_GRACE` — a call about to return finishes
  with its turn, so most leave no work behind — and then the caller sees the cancel:
  the turn ends ``cancelled`` at once, whatever the thread does. The thread is left
  to finish on its own (worker threads are daemons: they do not keep the process
  alive); when it does, its result is discarded with a log line naming the call.
* :meth:`BlockingCalls.abandon` — called by ``open_runtime`` once ``shutdown_grace``
  has passed — stops every wait at once, cancelled or not: a caller that was not
  cancelled gets :class:`Abandoned`.

Without the grace-then-abandon a function that never returns (``time.sleep(3600)``,
a hung socket) held its turn's interrupt and its session's stop for ever.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from typing import Any, TypeVar

import attrs
import outcome
import trio

__all__ = ["CANCEL_GRACE", "Abandoned", "BlockingCalls"]

log = logging.getLogger(__name__)

T = TypeVar("T")

CANCEL_GRACE = 0.5
"""Seconds a cancelled call's thread is given to return before it is abandoned."""


class Abandoned(RuntimeError):
    """A blocking call was abandoned at shutdown; its thread may still be running."""


@attrs.define(eq=False)
class _Call:
    what: str
    started: float
    finished: trio.Event = attrs.field(factory=trio.Event)
    given_up: bool = False  # nobody waits for its result any more
    waits: list[trio.CancelScope] = attrs.field(factory=list)  # what abandon() cancels

    def finish(self, result: outcome.Outcome[Any]) -> None:
        """The thread returned (called on the event loop)."""
        self.finished.set()
        if self.given_up:
            took = trio.current_time() - self.started
            if isinstance(result, outcome.Error):
                log.warning(
                    "%s raised after it was abandoned (%.1f s); discarded: %r",
                    self.what,
                    took,
                    result.error,
                )
            else:
                log.warning(
                    "%s returned after it was abandoned (%.1f s); its result is discarded",
                    self.what,
                    took,
                )


class BlockingCalls:
    """The blocking calls of one runtime that are running now.

    Args:
        grace: how long a cancelled call's thread may take to return before the
            caller stops waiting for it.
    """

    def __init__(self, grace: float = CANCEL_GRACE) -> None:
        self._grace = grace
        self._running: set[_Call] = set()

    async def run(self, fn: Callable[..., T], *args: Any, what: str) -> T:
        """``fn(*args)`` in a worker thread.

        Args:
            what: names the call in log lines (``sync tool 'x'``).

        Raises:
            Abandoned: :meth:`abandon` was called while it ran.

        Cancellation: the thread gets the grace to return; then the cancel goes on
        and the thread is left to finish on its own (its result discarded, logged).
        """
        call = _Call(what, trio.current_time())
        token = trio.lowlevel.current_trio_token()

        def work() -> outcome.Outcome[T]:
            result: outcome.Outcome[T] = outcome.capture(fn, *args)
            with contextlib.suppress(trio.RunFinishedError):
                token.run_sync_soon(call.finish, result)
            return result

        self._running.add(call)
        try:
            try:
                with trio.CancelScope() as scope:
                    call.waits.append(scope)
                    result = await trio.to_thread.run_sync(work, abandon_on_cancel=True)
                    return result.unwrap()
            except trio.Cancelled:
                await self._grace_then_abandon(call)
                raise
            # Only abandon() cancels that scope: a shutdown past its grace.
            call.given_up = True
            raise Abandoned(f"{what} was abandoned at shutdown")
        finally:
            self._running.discard(call)

    async def _grace_then_abandon(self, call: _Call) -> None:
        with trio.CancelScope(shield=True) as grace:
            call.waits.append(grace)
            grace.deadline = trio.current_time() + self._grace
            await call.finished.wait()
        if not call.finished.is_set():
            call.given_up = True
            log.warning(
                "abandoning %s (%.1f s): cancelled, and it did not return within %.1f s; "
                "its thread finishes on its own",
                call.what,
                trio.current_time() - call.started,
                self._grace,
            )

    def running(self) -> list[str]:
        """What is running, with how long it has been, for log lines."""
        current = trio.current_time()
        return [f"{c.what} ({current - c.started:.1f} s)" for c in self._running]

    def abandon(self) -> list[str]:
        """Stop waiting for every call running now; returns what they were."""
        abandoned = self.running()
        for call in self._running:
            for scope in call.waits:
                scope.cancel()
        return abandoned
