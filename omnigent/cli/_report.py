"""Exit codes, and an error that reached the command line told as ``Error: …``.

Light on purpose (only :mod:`omnigent.errors`): :func:`~omnigent.cli.main` imports it
before it knows which command runs.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator

from ..errors import InvalidInput, OmnigentError

__all__ = [
    "EXIT_BROKEN_PIPE",
    "EXIT_FAILED",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_TERMINATED",
    "EXIT_USAGE",
    "format_error",
    "report",
]

EXIT_OK = 0
EXIT_FAILED = 1
"""The turn failed, or omnigent could not do what was asked for a reason not the user's."""
EXIT_USAGE = 2
"""The user asked for something impossible: a bad spec, a missing file, a bad option."""
EXIT_INTERRUPTED = 130
"""The turn was cancelled (128 + SIGINT, as shells report a Ctrl-C)."""
EXIT_TERMINATED = 143
"""The turn was cancelled by SIGTERM (128 + SIGTERM, as shells report it)."""
EXIT_BROKEN_PIPE = 141
"""Whoever read stdout went away (``| head``): 128 + SIGPIPE, as a shell tool ends."""


def format_error(exc: BaseException) -> list[str]:
    """``Error: <message>``, then ``  <loc>: <msg>`` for each field of a validation error."""
    message = exc.message if isinstance(exc, OmnigentError) else str(exc)
    lines = [f"Error: {message}"]
    if isinstance(exc, InvalidInput):
        lines.extend(f"  {d.loc or '$'}: {d.msg}" for d in exc.details)
    return lines


def report(exc: BaseException) -> int:
    """The exit code for an error that reached the command line, after telling the user.

    A group (from a nursery) is looked into: Ctrl-C anywhere in it is an interrupt, and
    a single omnigent error is that error.

    Raises:
        exc itself, if it is a bug rather than the user's or the world's doing: a
        traceback is then the most useful thing to show.
    """
    if isinstance(exc, BaseExceptionGroup):
        _, rest = exc.split(KeyboardInterrupt)
        if rest is None:
            exc = KeyboardInterrupt()
        elif len(leaves := list(_leaves(rest))) == 1 and isinstance(
            leaves[0], OmnigentError | BrokenPipeError
        ):
            exc = leaves[0]
    if isinstance(exc, BrokenPipeError):
        # Nothing reads stdout any more: say nothing, and let nothing flush into it later.
        with contextlib.suppress(OSError, ValueError):  # a stdout with no descriptor
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            os.close(devnull)
        return EXIT_BROKEN_PIPE
    if isinstance(exc, KeyboardInterrupt):
        sys.stderr.write("Interrupted.\n")
        sys.stderr.flush()
        return EXIT_INTERRUPTED
    if not isinstance(exc, OmnigentError):
        raise exc
    for line in format_error(exc):
        print(line, file=sys.stderr)
    return EXIT_USAGE if exc.status < 500 else EXIT_FAILED


def _leaves(exc: BaseException) -> Iterator[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            yield from _leaves(inner)
    else:
        yield exc
