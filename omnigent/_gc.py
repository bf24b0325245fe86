"""The garbage collector, set for a long-running server once it has started.

CPython frees most objects by reference counting; its cyclic collector also scans,
now and then, every object it tracks. A full pass (generation 2) over a server's
heap stops the event loop for as long as the scan takes: under ``omnigent serve``
with two hundred SSE streams open, 74–80 ms each time, about once a second. Those
stops were the fan-out's p99 (``docs/benchmarks.md``, "Garbage collection").

:func:`settle_after_startup` is called by the commands that run a server
(``omnigent serve``, ``omnigent stdio``) once it is up:

* ``gc.collect()`` then ``gc.freeze()``: what startup made (modules, classes, the app,
  the runtime) moves to the permanent generation and is never scanned again. Garbage
  made before the freeze has been collected by then.
* The third threshold goes from 10 to :data:`FULL_PASS_EVERY`: a full pass comes after
  that many generation-1 passes (CPython still adds its own condition: the objects
  waiting for one must be a quarter of the old generation). Cyclic garbage that has
  reached the old generation waits longer to be freed; nothing else changes.

A library must leave its host's collector alone: :func:`omnigent.open_runtime` does
not call this.
"""

from __future__ import annotations

import gc

__all__ = ["FULL_PASS_EVERY", "settle_after_startup"]

FULL_PASS_EVERY = 100
"""Generation-1 passes between two full ones (CPython's default is 10)."""


def settle_after_startup() -> None:
    """Freeze the startup heap and make full collections rarer (see the module)."""
    gc.collect()
    gc.freeze()
    young, middle, _old = gc.get_threshold()
    gc.set_threshold(young, middle, FULL_PASS_EVERY)
