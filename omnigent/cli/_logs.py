"""Logging for the command line: to stderr only, since stdout carries the answer."""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["logging_to_stderr"]


class _StderrHandler(logging.Handler):
    """Writes to whatever ``sys.stderr`` is when a record arrives (tests swap it)."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            sys.stderr.write(self.format(record) + "\n")
        except Exception:
            self.handleError(record)


@contextmanager
def logging_to_stderr(verbosity: int) -> Iterator[None]:
    """Log to stderr only (stdout carries the answer): WARNING, ``-v`` INFO, ``-vv`` DEBUG.

    The root logger is restored on exit, so calling :func:`~omnigent.cli.main`
    in-process (as the tests do) leaves logging as it found it.
    """
    level = (logging.WARNING, logging.INFO)[verbosity] if verbosity < 2 else logging.DEBUG
    root = logging.getLogger()
    handler = _StderrHandler(level)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    previous = root.level
    root.addHandler(handler)
    root.setLevel(min(level, previous or level))
    try:
        yield
    finally:
        root.removeHandler(handler)
        root.setLevel(previous)
