"""``GET /v1/feed``: every session the caller may read, live, on one stream.

A client showing all of its sessions (the web console's Sessions view) cannot follow
one ``…/stream`` per session — a browser opens at most six HTTP/1.1 connections to a
host. This stream is snapshot-then-tail (:meth:`~omnigent.Runtime.watch_sessions`):
``feed.snapshot``, one ``session.updated`` per readable session (newest first),
``feed.synced``, then one ``session.updated`` (the session's snapshot as it is now) or
``session.deleted`` per change. Frames carry no ``id``: a client that reconnects (an
``EventSource`` does by itself) gets a fresh snapshot and drops whatever it did not get
again by ``feed.synced``. ``docs/http.md`` has the wire form.

It is served like the session streams (:mod:`._sse_pull`): pulled in the response's
task, coalesced, pinged when silent, and ended when the server stops.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from quart import Blueprint, Response

from ...core import Runtime, SessionWatch
from ._access import viewer
from ._params import owner, state
from ._stream_routes import pulled_sse_response

__all__ = ["blueprint", "encode_change"]

blueprint = Blueprint("omnigent_feed", __name__)

_ENCODE = json.JSONEncoder(separators=(",", ":")).encode


def encode_change(kind: str, data: object) -> bytes:
    """One feed frame (no ``id``: the feed resumes with a snapshot, not an id)."""
    return f"event: {kind}\ndata: {_ENCODE(data)}\n\n".encode()


@blueprint.get("/feed")
async def feed() -> Response:
    owner()  # 401 without an identity under --auth header, before the 200
    return pulled_sse_response(_Feed(state().runtime, viewer()))


class _Feed:
    """A :class:`~._sse_pull.FrameSource` over one :class:`~omnigent.core.SessionWatch`."""

    def __init__(self, runtime: Runtime, who: str | None) -> None:
        self._runtime = runtime
        self._viewer = who
        self._watch: SessionWatch | None = None

    @asynccontextmanager
    async def open(self) -> AsyncIterator[SessionWatch]:
        async with self._runtime.watch_sessions(viewer=self._viewer) as watch:
            self._watch = watch
            try:
                yield watch
            finally:
                self._watch = None

    async def next_frame(self, *, wait: bool) -> bytes | None:
        if self._watch is None:
            raise StopAsyncIteration
        change = await self._watch.next(wait=wait)
        if change is None:
            return None
        return encode_change(change.kind.value, change.to_dict())

    async def settle(self) -> None:
        # Nothing to finish: the feed tells state, and the next connection reads it.
        return
