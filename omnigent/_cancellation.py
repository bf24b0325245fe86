"""Telling a cancellation apart from a failure in a possibly grouped exception.

Since trio 0.25 a nursery raises an ``ExceptionGroup`` that may mix ``trio.Cancelled``
with real errors; the owners of work (a session actor, a sub-agent watcher) must
re-raise the cancellation and report only the rest.
"""

from __future__ import annotations

import trio

__all__ = ["only_exceptions", "split_cancellation"]


def split_cancellation(
    exc: BaseException,
) -> tuple[BaseException | None, BaseException | None]:
    """``(the trio.Cancelled part, the rest)`` of a possibly grouped exception."""
    if isinstance(exc, BaseExceptionGroup):
        return exc.split(trio.Cancelled)
    if isinstance(exc, trio.Cancelled):
        return exc, None
    return None, exc


def only_exceptions(exc: BaseException) -> bool:
    """Whether ``exc`` holds only ``Exception``s (no KeyboardInterrupt and the like)."""
    if isinstance(exc, BaseExceptionGroup):
        return exc.split(Exception)[1] is None
    return isinstance(exc, Exception)
