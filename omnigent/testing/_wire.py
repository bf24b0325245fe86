"""Small pure helpers the fake vendor servers share (no I/O)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

__all__ = ["fragments", "parse_object", "timed_parts"]


def fragments(text: str, count: int = 3) -> list[str]:
    """``text`` cut into ``count`` pieces (fewer if it is shorter), as vendors stream
    tool arguments: clients must join fragments, never parse one alone."""
    if not text:
        return []
    step = max(1, -(-len(text) // count))
    return [text[i : i + step] for i in range(0, len(text), step)]


def parse_object(raw_body: bytes) -> dict[str, Any] | str:
    """The request body as a JSON object, or a message saying why it is not one."""
    try:
        body = json.loads(raw_body)
    except ValueError:
        return "the request body is not JSON"
    if not isinstance(body, dict):
        return "the request body is not a JSON object"
    return body


def timed_parts(frames: Sequence[bytes], delay: float) -> tuple[tuple[float, bytes], ...]:
    """Frames as ``(delay before, bytes)`` parts: ``delay`` seconds apart, or — with no
    delay — coalesced into one write."""
    if not delay:
        return ((0.0, b"".join(frames)),)
    return tuple((delay if i else 0.0, frame) for i, frame in enumerate(frames))
