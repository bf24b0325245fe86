"""The C allocator, set for a long-running server: large blocks go back to the system.

A message may be megabytes (``serve --max-message-bytes``, 8 MiB by default), and one
request makes several copies of it — the body, the decoded JSON, the stored row, the
events — in the event loop's thread and in worker threads. glibc's ``malloc`` serves a
large block from ``mmap`` only until the first such block is freed; from then on its
threshold rises to that size and later blocks come from the heaps (one per thread),
whose freed memory mostly stays with the process. Under ``omnigent serve`` each 7 MiB
message kept ~25 MiB of RSS for good (68 → 2,540 MiB after 100, unchanged when idle),
although nothing referenced it any more (issue 23, defect 5, found again by the
re-run probe).

:func:`return_large_blocks` fixes the threshold at :data:`MMAP_THRESHOLD`: every block
at least that large is its own mapping, given back when freed. Called by the commands
that run a server (``omnigent serve``, ``omnigent stdio``); a library leaves its host's
allocator alone. Elsewhere than glibc (musl, macOS) it does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
from typing import Any

__all__ = ["MMAP_THRESHOLD", "return_large_blocks"]

log = logging.getLogger("omnigent")

MMAP_THRESHOLD = 1 << 20
"""Blocks of at least this many bytes are mapped on their own (glibc's default starts
at 128 KiB and rises with every large block freed, up to 32 MiB)."""

_M_MMAP_THRESHOLD = -3  # glibc's <malloc.h>


def return_large_blocks() -> bool:
    """Fix glibc's mmap threshold (see the module); whether it was set."""
    mallopt = _mallopt()
    if mallopt is None:
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    if mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD) != 1:
        log.debug("mallopt(M_MMAP_THRESHOLD) was refused; large blocks stay with the heaps")
        return False
    return True


def _mallopt() -> Any:
    """The C library's ``mallopt``, or ``None`` (not glibc's, or no such function).

    Looked up among the symbols the process already has (its C library's among them)
    before ``ctypes.util.find_library``, which runs ``ldconfig -p`` in a child process:
    a few milliseconds of every server's start (``benchmarks/startup.py``).
    """
    try:
        return ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        pass
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        return ctypes.CDLL(name).mallopt
    except (OSError, AttributeError):  # no C library by that name, or not glibc
        return None
