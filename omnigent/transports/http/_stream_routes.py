"""Events in (``POST /v1/sessions/{id}/events``) and out (SSE: a turn's with
``?stream=true``, a session's with ``GET …/stream``).

Everything that can fail with a status code is checked before the ``200`` goes out:
the caller's level on the session (edit to post, read to watch), the body, the event
type and content, the files it names, the resume point. What can still
fail once streaming has begun (the session deleted meanwhile, the runtime closing)
ends the stream with an ``event: error`` frame (see :mod:`._sse_pull`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any, Protocol

import trio
from quart import Blueprint, Response, request

from ...core import Runtime, Subscription, parse_event
from ...errors import InvalidInput
from ...model import Event
from ._access import EDIT, READ, session_access, viewer
from ._params import parse_int, query_bool, state, structured_body
from ._sse import encode_event
from ._sse_pull import FrameSource, PulledSSEBody

__all__ = ["blueprint", "pulled_sse_response"]

blueprint = Blueprint("omnigent_streams", __name__)

_SETTLE_POLL = 0.05


def pulled_sse_response(source: FrameSource) -> Response:
    """A ``200 text/event-stream`` response serving a cancel-safe ``source`` from the
    response task itself (see :mod:`._sse_pull`); never timed out."""
    app_state = state()
    body = PulledSSEBody(source, stopping=app_state.stopping, ping_interval=app_state.ping_interval)
    response = Response(body, status=200, content_type="text/event-stream")
    response.headers["Cache-Control"] = "no-cache"
    response.headers["X-Accel-Buffering"] = "no"
    # Quart's RESPONSE_TIMEOUT (60 s) would otherwise cut a long stream silently.
    response.timeout = None
    return response


@blueprint.post("/sessions/<session_id>/events")
async def post_event(session_id: str) -> tuple[dict[str, Any], int] | Response:
    runtime = state().runtime
    await session_access(session_id, EDIT)
    stream = query_bool("stream")
    from ._bodies import EventBody  # the first request's: see _bodies

    body = await structured_body(EventBody)
    who = viewer()
    if not stream:
        answer = await runtime.post_event(session_id, body.type, body.data, viewer=who)
        return answer.to_dict(), 202
    event = parse_event(body.type, body.data)
    if event.type != "message":
        raise InvalidInput.at("stream", "only a message event can be streamed")
    # What can fail with a status code fails here, before the 200.
    await runtime.check_content(event.content, root="data.content", viewer=who)

    return pulled_sse_response(_TurnStream(runtime, session_id, event.content, event.role, who))


@blueprint.get("/sessions/<session_id>/stream")
async def stream(session_id: str) -> Response:
    runtime = state().runtime
    await session_access(session_id, READ)
    after = await _resume_point(session_id)
    who = viewer()

    stream = _SessionStream(runtime, session_id, after, who)
    return pulled_sse_response(stream)


class _Pullable(Protocol):
    """Events that can be pulled cancel-safely, with what is at hand taken without
    waiting: a :class:`~omnigent.core.Subscription`, or the
    :class:`~omnigent.core.TurnEvents` of :meth:`~omnigent.Runtime.open_turn_stream`."""

    async def __anext__(self) -> Event: ...

    async def next_ready(self) -> Event | None: ...


async def _pull(events: _Pullable | None, *, wait: bool) -> Event | None:
    """The next event (``wait=False``: ``None`` unless one is at hand)."""
    if events is None:  # the stream's source is not open (any more)
        raise StopAsyncIteration
    return await events.__anext__() if wait else await events.next_ready()


class _TurnStream:
    """``POST …/events?stream=true``: the events of the turn answering one message.

    A :class:`~._sse_pull.FrameSource`: opening it sends the message; it ends after
    the terminal event of the turn that answers it. At shutdown it runs to that end
    (the server stopped the turn first, so its terminal events are published).
    """

    def __init__(
        self,
        runtime: Runtime,
        session_id: str,
        content: str | Sequence[Any],
        role: str,
        who: str | None,
    ) -> None:
        self._runtime = runtime
        self._session_id = session_id
        self._content = content
        self._role = role
        self._viewer = who
        self._events: _Pullable | None = None
        self._ended = trio.Event()

    @asynccontextmanager
    async def open(self) -> AsyncIterator[_Pullable]:
        turn = self._runtime.open_turn_stream(
            self._session_id, self._content, role=self._role, viewer=self._viewer
        )
        async with turn as (_accepted, events):
            # The body cancels a wait for an event to ping: TurnEvents is cancel-safe
            # (an async generator would be finalized).
            self._events = events
            try:
                yield events
            finally:
                self._events = None

    async def next_frame(self, *, wait: bool) -> bytes | None:
        try:
            event = await _pull(self._events, wait=wait)
        except StopAsyncIteration:
            self._ended.set()
            raise
        return None if event is None else encode_event(event)

    async def settle(self) -> None:
        await self._ended.wait()


class _SessionStream:
    """``GET …/stream``: a session's events; at shutdown, up to its last one.

    A :class:`~._sse_pull.FrameSource`: the response task pulls the subscription
    itself (cancel-safe), one wake-up per batch.
    """

    def __init__(self, runtime: Runtime, session_id: str, after: int, who: str | None) -> None:
        self._runtime = runtime
        self._session_id = session_id
        self._after = after
        self._viewer = who
        self._events: Subscription | None = None
        self._progress = trio.lowlevel.ParkingLot()

    @asynccontextmanager
    async def open(self) -> AsyncIterator[Subscription]:
        subscription = self._runtime.subscribe(
            self._session_id, after=self._after, viewer=self._viewer
        )
        async with subscription as events:
            self._events = events
            try:
                yield events
            finally:
                self._events = None
                self._after = events.last_event_id

    async def next_frame(self, *, wait: bool) -> bytes | None:
        event = await _pull(self._events, wait=wait)
        if self._progress:  # only a settling stream waits here: no work per event
            self._progress.unpark_all()
        return None if event is None else encode_event(event)

    def _seen(self) -> int:
        # The subscription's own position: it also moves past events this viewer may
        # not see, which are never forwarded.
        return self._after if self._events is None else self._events.last_event_id

    async def settle(self) -> None:
        # The server stopped the sessions first: their last events are final now.
        final = await self._runtime.last_event_id(self._session_id)
        while self._seen() < final:
            with trio.move_on_after(_SETTLE_POLL):  # a skipped event unparks nobody
                await self._progress.park()


async def _resume_point(session_id: str) -> int:
    """Where the stream starts: ``Last-Event-ID``, else ``?after``, else now.

    The header wins: a browser's EventSource reconnects to the same URL (which may
    carry the first connection's ``?after``) and says where it stopped in the header.
    "Now" is resolved here, before the response starts, so a client that posts a
    message once it sees the headers cannot miss the turn's first events.
    """
    header = request.headers.get("Last-Event-ID")
    query = request.args.get("after")
    # Both are checked: a bad ``?after`` is a 422 even when the header wins.
    after = None if query is None else parse_int(query, "after", low=0)
    if header is not None:
        return parse_int(header.strip(), "Last-Event-ID", low=0)
    if after is not None:
        return after
    return await state().runtime.last_event_id(session_id)
