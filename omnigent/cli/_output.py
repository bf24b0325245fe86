"""The command line's unit of output, and the one place it is written.

A :class:`Chunk` is text bound for ``stdout`` or ``stderr``. The renderers
(:mod:`omnigent.cli._render`, :mod:`omnigent.cli._approval_render`) return chunks and
strings without doing I/O; the command line, the turn and the approval prompt hand
them to :func:`write`. :func:`one_line`, the shaping every renderer shares, lives here
too, below them all, so that no renderer has to import another.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import Literal

import attrs

__all__ = ["TOOL_TEXT_LIMIT", "Chunk", "Stream", "one_line", "write"]

TOOL_TEXT_LIMIT = 200

Stream = Literal["stdout", "stderr"]


@attrs.frozen
class Chunk:
    """Text to write to one of the two output streams."""

    stream: Stream
    text: str


def one_line(text: str, limit: int = TOOL_TEXT_LIMIT) -> str:
    """``text`` with its whitespace runs collapsed to single spaces, cut at ``limit``.

    A tool's arguments or output can be a page of JSON; the terminal gets a glimpse.
    """
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def write(chunks: Iterable[Chunk]) -> None:
    """Write each chunk to its stream, flushing it at once.

    Flushing every chunk keeps the two streams in order on a terminal, and puts a
    prompt on screen before the line that answers it is read. The streams are looked
    up on every call, so whatever ``sys.stdout`` and ``sys.stderr`` are then (tests
    swap them) is where the text goes.
    """
    for chunk in chunks:
        stream = sys.stdout if chunk.stream == "stdout" else sys.stderr
        stream.write(chunk.text)
        stream.flush()
