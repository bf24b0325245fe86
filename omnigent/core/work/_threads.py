"""Blocking user code in worker threads, which a shutdown past its grace abandons.

A sync tool or a sync policy function runs in a worker thread so it cannot block the
event loop. A thread cannot be interrupted, so cancelling its turn waits for it to
return: no work outlives the turn that asked for it. But a function that never
returns (``time.sleep(3600)``, a hung socket) would then hold the runtime's shutdown
forever. :class:`BlockingCalls` runs each such call so that only :meth:`abandon` —
called by ``open_runtime`` once ``shutdown_grace`` has passed — stops the wait: the
caller gets :class:`Abandoned`, the thread is left to finish on its own (worker
threads are daemons: they do not keep the process alive), and a log line names what
was abandoned.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import attrs
import trio

__all__ = ["Abandoned", "BlockingCalls"]

T = TypeVar("T")


class Abandoned(RuntimeError):
    """A blocking call was abandoned at shutdown; its thread may still be running."""


@attrs.define(eq=False)
class _Call:
    what: str
    started: float


class BlockingCalls:
    """The blocking calls of one runtime that are running now."""

    def __init__(self) -> None:
        self._running: dict[trio.CancelScope, _Call] = {}

    async def run(self, fn: Callable[..., T], *args: Any, what: str) -> T:
        """``fn(*args)`` in a worker thread, waited for unless abandoned.

        Args:
            what: names the call in the log line if it is abandoned
                (``tool 'x' of session conv_…``).

        Raises:
            Abandoned: :meth:`abandon` was called while it ran.

        Cancellation: waits for the thread to return (a cancelled caller sees the
        cancel at its next checkpoint), unless abandoned.
        """
        with trio.CancelScope(shield=True) as scope:
            self._running[scope] = _Call(what, trio.current_time())
            try:
                return await trio.to_thread.run_sync(fn, *args, abandon_on_cancel=True)
            finally:
                del self._running[scope]
        raise Abandoned(f"{what} was abandoned at shutdown")

    def running(self) -> list[str]:
        """What is running, with how long it has been, for log lines."""
        current = trio.current_time()
        return [f"{c.what} ({current - c.started:.1f} s)" for c in self._running.values()]

    def abandon(self) -> list[str]:
        """Stop waiting for every call running now; returns what they were."""
        abandoned = self.running()
        for scope in self._running:
            scope.cancel()
        return abandoned
