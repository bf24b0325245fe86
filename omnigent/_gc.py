"""The garbage collector, set for a long-running server once it has started.

CPython frees most objects by reference counting; its cyclic collector also scans,
now and then, every object it tracks. A full pass (generation 2) over a server's
heap stops the event loop for as long as the scan takes: under ``omnigent serve``
with two hundred SSE streams open, 74–80 ms each time, about once a second. Those
stops were the fan-out's p99 (``docs/benchmarks.md``, "Garbage collection").

:func:`full_passes_held` is entered by ``omnigent serve`` before it imports the
server: its start builds the heap a full pass would scan (every module, class and
function it imports), and CPython ran one such pass in the middle of it (≈ 15 ms of a
≈ 500 ms start, ``benchmarks/startup.py``) over objects that are all still alive and
are about to be frozen. Until the server has settled no full pass runs; the young
generations are collected as usual. A ``serve`` that ends without settling (``--help``,
a bad option, a failed start) puts the threshold back as it leaves.

:func:`settle_after_startup` is called by the commands that run a server
(``omnigent serve``, ``omnigent stdio``) once it is up:

* ``gc.collect(1)`` then ``gc.freeze()``: what startup made (modules, classes, the app,
  the runtime) moves to the permanent generation and is never scanned again. The
  young generations' garbage has been collected by then; the old generation is what
  survived the collector's passes during startup. A full pass over it (every module,
  class and function: ≈ 25 ms before the first request was answered,
  ``benchmarks/startup.py``) found 60–270 objects of garbage there; they are frozen
  with it.
* The third threshold goes from 10 to :data:`FULL_PASS_EVERY`: a full pass comes after
  that many generation-1 passes (CPython still adds its own condition: the objects
  waiting for one must be a quarter of the old generation). Cyclic garbage that has
  reached the old generation waits longer to be freed; nothing else changes.

* Large messages bring the full pass forward (:func:`note_large_input`): what a turn
  leaves in reference cycles (a finished session actor, its turn, their frames) is
  freed only by a full pass, and with it every megabyte of the messages it held.
  Once :data:`FULL_PASS_AFTER_BYTES` of messages were accepted since the last one, a
  full pass runs. Before, a server that took a 7 MiB message at a time kept ~25 MiB
  of RSS for each (68 → 2,540 MiB after 100, unchanged when idle; issue 23, defect 5,
  found again by the re-run probe); with this and :mod:`omnigent._malloc` it goes
  back to ~70 MiB.

A library must leave its host's collector alone: :func:`omnigent.open_runtime` does
not call this, and :func:`note_large_input` does nothing until it is called.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

__all__ = [
    "FULL_PASS_AFTER_BYTES",
    "FULL_PASS_EVERY",
    "full_passes_held",
    "note_large_input",
    "settle_after_startup",
]

FULL_PASS_EVERY = 100
"""Generation-1 passes between two full ones (CPython's default is 10)."""

FULL_PASS_AFTER_BYTES = 32 * 1024 * 1024
"""Bytes of messages accepted after which a settled server runs a full pass."""

LARGE_INPUT = 256 * 1024
"""Messages smaller than this are not counted (they are freed the usual way)."""


class _Accepted:
    """Bytes of large messages accepted since the last full pass (process-wide, like
    the collector it drives); counting only once a server has settled."""

    counting = False
    since_pass = 0


_HELD = 1_000_000
"""The third threshold while a server starts: no full pass before it settles."""


@contextlib.contextmanager
def full_passes_held() -> Iterator[None]:
    """No full pass until :func:`settle_after_startup` (see the module), or until the
    block ends without it (then the threshold is put back). Only for a command that
    settles once its server is up."""
    young, middle, old = gc.get_threshold()
    gc.set_threshold(young, middle, _HELD)
    try:
        yield
    finally:
        young, middle, now = gc.get_threshold()
        if now == _HELD:  # never settled
            gc.set_threshold(young, middle, old)


def settle_after_startup() -> None:
    """Freeze the startup heap and make full collections rarer (see the module)."""
    gc.collect(1)
    gc.freeze()
    young, middle, _old = gc.get_threshold()
    gc.set_threshold(young, middle, FULL_PASS_EVERY)
    _Accepted.counting = True
    _Accepted.since_pass = 0


def note_large_input(size: int) -> None:
    """Count a message of ``size`` bytes a client sent; run a full pass once
    :data:`FULL_PASS_AFTER_BYTES` were counted (only in a settled server: see the
    module). Blocking for the length of the pass (tens of milliseconds), at most once
    per that many bytes taken in."""
    if not _Accepted.counting or size < LARGE_INPUT:
        return
    _Accepted.since_pass += size
    if _Accepted.since_pass >= FULL_PASS_AFTER_BYTES:
        _Accepted.since_pass = 0
        gc.collect()
