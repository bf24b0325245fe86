"""Server-sent events: frame encoding, and the constants of the body that streams them.

Encoding is pure: :func:`encode_event` turns a typed event into one
``id: …\\nevent: …\\ndata: …\\n\\n`` frame, :func:`encode_frame` any other (an
``event: error``). The body that relays frames to a client, coalesced into chunks, with
pings and a bounded settle at shutdown, is :class:`~._sse_pull.PulledSSEBody`.
"""

from __future__ import annotations

import json
from typing import Any

from ...model import Event

__all__ = ["PING", "SETTLE_TIMEOUT", "encode_event", "encode_frame"]

PING = b": ping\n\n"
"""The comment a silent stream sends every ``ping_interval`` (proxies keep it open)."""
SETTLE_TIMEOUT = 2.0
"""Seconds a stopping server's stream may take to forward its last events."""

_ENCODE = json.JSONEncoder(separators=(",", ":")).encode


def encode_frame(event_type: str, data: Any, event_id: int | None = None) -> bytes:
    """One SSE frame; ``data`` is JSON-encoded on a single line."""
    head = f"id: {event_id}\n" if event_id is not None else ""
    return f"{head}event: {event_type}\ndata: {_ENCODE(data)}\n\n".encode()


def encode_event(event: Event) -> bytes:
    """The frame of a session event: its ``event_id``, ``type`` and wire form.

    The JSON is the event's own, encoded once when it was published
    (:meth:`~omnigent.model.Event.to_json`), not once per subscriber.
    """
    return f"id: {event.event_id}\nevent: {event.type}\ndata: {event.to_json()}\n\n".encode()
