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

Cursors: ``conn.execute`` runs on the connection's spare cursor when no caller still
holds it (:meth:`BridgedConnection.execute`): a cursor keeps the adapters it looked
up for its parameters and result columns, which a fresh cursor per statement looked
up again — ≈ 20 µs of a simple statement, more for an 18-column session row.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from contextlib import suppress
from typing import TYPE_CHECKING, Any, TypeVar

import greenlet
import psycopg
import trio
from psycopg.abc import Params, PQGen
from psycopg.rows import TupleRow
from psycopg.waiting import Ready, Wait

if TYPE_CHECKING:
    from psycopg.abc import QueryNoTemplate  # psycopg 3.3; 3.2's Query is the same union

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


def _references(obj: object) -> int:
    return sys.getrefcount(obj)


class _Probe:
    spare: object = None


def _unheld_references() -> int:
    """What :func:`_references` counts of an object only an attribute and the
    caller's local refer to — measured, not assumed: the interpreter's count of its
    own temporaries differs between versions."""
    probe = _Probe()
    probe.spare = object()
    spare = probe.spare
    return _references(spare)


_UNHELD = _unheld_references()


class BridgedConnection(psycopg.Connection[TupleRow]):
    """A psycopg connection whose waits, inside :func:`run_bridged`, are Trio's."""

    _spare: psycopg.Cursor[TupleRow] | None = None

    def execute(  # type: ignore[override]  # psycopg's overloads add template strings
        self,
        query: QueryNoTemplate,
        params: Params | None = None,
        *,
        prepare: bool | None = None,
        binary: bool = False,
    ) -> psycopg.Cursor[TupleRow]:
        """As psycopg's, on the connection's spare cursor unless a caller still holds it.

        A cursor returned earlier and still referred to (``rows = conn.execute(…)``
        read later, a ``for`` loop over one) is never reused: the count of references
        to the spare tells, as numpy's ``ndarray.resize`` checks an array's, and a
        held spare is left to its holder for a new one. Reusing a cursor is psycopg's
        own API: executing on it again.
        """
        if binary:
            return super().execute(query, params, prepare=prepare, binary=True)
        spare = self._spare
        if spare is None or spare.closed or _references(spare) > _UNHELD:
            spare = self._spare = self.cursor()
        return spare.execute(query, params, prepare=prepare)

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
