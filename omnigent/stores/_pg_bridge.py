"""psycopg's sync API run on the Trio thread: one greenlet per call, no worker thread.

psycopg 3 runs every network exchange as a generator that yields when it would block
(the socket and whether to wait for reading or writing; libpq is in non-blocking
mode) and a *wait function* that drives it — a blocking ``select`` for the sync
API, asyncio for the async one. :class:`BridgedConnection` overrides the sync
connection's :meth:`~BridgedConnection.wait`: inside :func:`run_bridged`'s greenlet
it hands each wait to the Trio task that started the greenlet, which waits on the
socket with ``trio.lowlevel.wait_readable`` / ``wait_writable`` and switches back.
The store's table code stays plain sync psycopg (``conn.execute(…)``,
``conn.transaction()``) and runs unchanged; a call costs no thread hop, no lock
hand-off between threads and no contention for the GIL (issue 32: a pooled call in a
worker thread cost this process ≈ 300 µs of CPU under 200 concurrent turns, ≈ 70 µs
driven here).

Cancellation: a wait is a Trio checkpoint, so a call is cancelled where it waits on
the database. The greenlet is then unwound at once (every later wait of its
connection raises :class:`CallStopped` before sending anything), and the
connection — in the middle of an exchange, its state unknown — is handed to the
caller to be cancelled on the server and closed, never reused. Outside such a
greenlet (connecting, the pool's set-up) the connection waits as psycopg's own does.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import suppress
from typing import Any, TypeVar

import greenlet
import psycopg
import trio
from psycopg.abc import PQGen
from psycopg.rows import TupleRow
from psycopg.waiting import Ready, Wait

__all__ = ["BridgedConnection", "CallStopped", "run_bridged"]

T = TypeVar("T")
RV = TypeVar("RV")


class CallStopped(BaseException):
    """Raised inside a bridged call that its Trio task gave up (cancelled).

    A ``BaseException``, so that no ``except Exception`` of the table code keeps the
    call going on a connection that is about to be closed.
    """


class _Bridge(greenlet.greenlet):
    """The greenlet of one bridged call; its waits go to its parent (the Trio task)."""

    stopped = False


class BridgedConnection(psycopg.Connection[TupleRow]):
    """A psycopg connection whose waits, inside :func:`run_bridged`, are Trio's."""

    def wait(self, gen: PQGen[RV], interval: float = 0.1, timeout: float | None = None) -> RV:
        """Consume ``gen``: in a bridged call, by handing each wait to the Trio task."""
        current = greenlet.getcurrent()
        if not isinstance(current, _Bridge):
            return super().wait(gen, interval=interval, timeout=timeout)
        if current.stopped:
            gen.close()  # never started: nothing was sent
            raise CallStopped
        fileno = self.pgconn.socket
        task = current.parent
        assert task is not None  # a bridge is started by run_bridged, its parent
        try:
            state = next(gen)
            while True:
                ready = task.switch(fileno, state)
                state = gen.send(ready)
        except StopIteration as done:
            result: RV = done.value
            return result


async def run_bridged(fn: Callable[[BridgedConnection], T], conn: BridgedConnection) -> T:
    """``fn(conn)`` on this thread, its database waits made Trio's (module docstring).

    Raises whatever ``fn`` raises. Cancellation: raised here once ``fn`` is unwound;
    the connection may then be mid-exchange and must be cancelled on the server and
    closed by the caller, not reused (``KeyboardInterrupt`` too).
    """
    call = _Bridge(fn)
    try:
        request: Any = call.switch(conn)
        while not call.dead:
            fileno, state = request
            if state == Wait.W:
                await trio.lowlevel.wait_writable(fileno)
                request = call.switch(Ready.W)
            elif state == Wait.R:
                await trio.lowlevel.wait_readable(fileno)
                request = call.switch(Ready.R)
            else:  # Wait.RW: psycopg flushing a large query while results arrive
                request = call.switch(await _either(fileno))
        result: T = request
        return result
    finally:
        if not call.dead:
            call.stopped = True
            # Unwound; what it raises on the way out is moot: the call is given up.
            with suppress(CallStopped, Exception):
                call.throw(CallStopped)


async def _either(fileno: int) -> Ready:
    """Wait until ``fileno`` is readable or writable; which one it was."""
    ready = Ready.NONE
    async with trio.open_nursery() as nursery:

        async def wait(waiter: Callable[[int], Any], which: Ready) -> None:
            nonlocal ready
            await waiter(fileno)
            ready = which
            nursery.cancel_scope.cancel()

        nursery.start_soon(wait, trio.lowlevel.wait_readable, Ready.R)
        nursery.start_soon(wait, trio.lowlevel.wait_writable, Ready.W)
    return ready
