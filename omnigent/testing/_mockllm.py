"""MockLLM: a scripted OpenAI-compatible Chat Completions endpoint.

One piece of code (:meth:`MockLLM._respond`) turns a request into a rendered
answer — status, headers and timed byte parts — and the shared shells in
:mod:`omnigent.testing._serve` deliver it: an ``httpx.MockTransport`` for in-memory tests
and a Hypercorn (Trio worker) server on a loopback port for end-to-end tests.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from enum import StrEnum
from typing import Any, TypeAlias

import attrs
import httpx
import trio

from ._serve import JSON_HEADERS as _JSON_HEADERS
from ._serve import SSE_HEADERS as _SSE_HEADERS
from ._serve import Rendered as _Rendered
from ._serve import error_rendered, mock_transport, serve_http
from ._serve import json_rendered as _json

__all__ = [
    "ErrorReply",
    "HangReply",
    "MockLLM",
    "MockToolCall",
    "Reply",
    "TextReply",
    "ToolCallsReply",
    "Writes",
    "mock_tokens",
]

MODEL_ID = "mock-model"
_NO_REPLY_LEFT = "MockLLM: no scripted reply left"


class Writes(StrEnum):
    """How a streamed answer with no ``delay`` goes onto the network.

    ``PACKED``: all its frames in one write, so a reader gets many deltas per network
    read (cheap for tests). ``DELTA``: one write per frame, flushed, as real model
    servers stream (one token per SSE frame) — a reader that keeps up gets one delta
    per read.
    """

    PACKED = "packed"
    DELTA = "delta"


@attrs.frozen
class TextReply:
    """Answer with ``text``, streamed as content deltas of ``chunk_size`` characters.

    ``delay`` seconds pass between content chunks (the finish chunk and ``[DONE]``
    follow the last one at once). ``truncated`` ends the stream after the
    text with neither a finish_reason nor ``[DONE]``, as a dropped connection would.
    ``finish_reason`` is what the last chunk says (``length``: cut at the token limit,
    ``content_filter``: filtered).
    """

    text: str
    chunk_size: int = 8
    delay: float = 0.0
    truncated: bool = False
    finish_reason: str = "stop"


@attrs.frozen
class MockToolCall:
    """One scripted tool call. ``arguments`` is encoded as JSON unless it is a string.

    Without a ``call_id`` the server numbers its calls: ``call_mock0``, ``call_mock1``,
    … over its whole life (a client may check that no id is used twice).
    """

    name: str
    arguments: Mapping[str, Any] | str
    call_id: str | None = None


@attrs.frozen
class ToolCallsReply:
    """Answer with tool calls (finish_reason ``tool_calls``), after optional ``text``.

    Each call's arguments are streamed in a few fragments, as OpenAI does; ``delay``
    seconds pass between fragments.
    """

    calls: tuple[MockToolCall, ...]
    text: str | None = None
    delay: float = 0.0


@attrs.frozen
class ErrorReply:
    """Answer ``status`` with an OpenAI error body; ``retry_after`` sets that header."""

    status: int
    message: str
    retry_after: float | None = None


@attrs.frozen
class HangReply:
    """Send the response headers, then nothing until the client goes away."""


Reply: TypeAlias = TextReply | ToolCallsReply | ErrorReply | HangReply
_Scripted: TypeAlias = Reply | Callable[[dict[str, Any]], Reply]


class MockLLM:
    """A scripted OpenAI-compatible server for tests.

    Queue replies with the ``reply_*`` methods; each ``POST /v1/chat/completions``
    consumes the next one, in order, and answers it streamed (``stream: true``) or as
    one JSON completion. When the queue is empty the answer is a 500 whose message is
    ``"MockLLM: no scripted reply left"``. ``GET /v1/models`` lists ``mock-model``;
    anything else is a 404. Every chat request body is kept in :attr:`requests`.

    Every answer reports its usage, as OpenAI does: in the JSON completion, and in a
    last chunk (no choices) of a stream that asked for it with
    ``stream_options.include_usage``. The counts are :func:`mock_tokens` of the
    request's messages (prompt) and of the answer's text and tool-call arguments
    (completion); each answer's ``(prompt, completion)`` is kept in :attr:`usages`.

    ``writes`` says how a streamed answer without a ``delay`` is written: all at once
    (:attr:`Writes.PACKED`, the default) or one network write per frame
    (:attr:`Writes.DELTA`, as real servers stream).

    Example::

        mock = MockLLM()
        mock.reply_text("Hello world", chunk_size=3)
        mock.reply_tool_call("add", {"a": 1, "b": 2})

        # in memory: any host, paths under /v1
        async with httpx.AsyncClient(transport=mock.transport()) as http:
            client = ChatCompletionsClient(http, base_url="http://mock/v1", api_key=None)
            print(await client.complete(model="m", messages=[...]))

        # or over a real loopback socket
        async with mock.serve() as base_url:  # "http://127.0.0.1:PORT/v1"
            ...

        assert mock.pending == 0
        assert mock.requests[0]["messages"] == [...]
    """

    def __init__(self, *, writes: Writes = Writes.PACKED) -> None:
        self._writes = Writes(writes)
        self._queue: deque[_Scripted] = deque()
        self._ids = itertools.count(1)
        self._call_ids = itertools.count(0)
        self._changed = trio.Event()
        self.requests: list[dict[str, Any]] = []
        """The JSON body of every chat request received, in order."""
        self.usages: list[tuple[int, int]] = []
        """The ``(prompt_tokens, completion_tokens)`` of every answer, in order."""

    async def wait_requests(self, count: int = 1) -> dict[str, Any]:
        """Blocks until ``count`` chat requests have arrived; returns the last of those.

        For tests that must act while the client is mid-request (a hanging reply).
        """
        while len(self.requests) < count:
            await self._changed.wait()
        return self.requests[count - 1]

    @property
    def pending(self) -> int:
        """How many scripted replies have not been used yet."""
        return len(self._queue)

    # -- scripting ----------------------------------------------------------------

    def reply(self, reply: Reply | Callable[[dict[str, Any]], Reply]) -> None:
        """Queues a reply object, or a callable that builds one from the request body."""
        self._queue.append(reply)

    def reply_text(
        self,
        text: str,
        *,
        chunk_size: int = 8,
        delay: float = 0.0,
        truncated: bool = False,
        finish_reason: str = "stop",
    ) -> None:
        """Queues a text answer; see :class:`TextReply`."""
        if chunk_size < 1:
            raise ValueError("chunk_size must be at least 1")
        self.reply(TextReply(text, chunk_size, delay, truncated, finish_reason))

    def reply_tool_call(
        self,
        name: str,
        arguments: Mapping[str, Any] | str,
        *,
        call_id: str | None = None,
        text: str | None = None,
    ) -> None:
        """Queues an answer with one tool call; see :class:`ToolCallsReply`."""
        self.reply(ToolCallsReply((MockToolCall(name, arguments, call_id),), text))

    def reply_tool_calls(
        self, calls: Iterable[tuple[str, Mapping[str, Any] | str]], *, text: str | None = None
    ) -> None:
        """Queues an answer with several tool calls, given as ``(name, arguments)``."""
        self.reply(ToolCallsReply(tuple(MockToolCall(n, a) for n, a in calls), text))

    def reply_error(self, status: int, message: str, *, retry_after: float | None = None) -> None:
        """Queues an HTTP error; see :class:`ErrorReply`."""
        self.reply(ErrorReply(status, message, retry_after))

    def reply_hang(self) -> None:
        """Queues an answer that never comes; see :class:`HangReply`."""
        self.reply(HangReply())

    # -- the shared core ---------------------------------------------------------------

    def _respond(self, method: str, path: str, raw_body: bytes) -> _Rendered:
        path = path.rstrip("/")
        if method == "GET" and path == "/v1/models":
            data = [{"id": MODEL_ID, "object": "model", "created": 0, "owned_by": "omnigent"}]
            return _json(200, {"object": "list", "data": data})
        if method != "POST" or path != "/v1/chat/completions":
            return _error(ErrorReply(404, f"MockLLM: no route for {method} {path}"))
        try:
            body = json.loads(raw_body)
        except ValueError:
            return _error(ErrorReply(400, "MockLLM: the request body is not JSON"))
        if not isinstance(body, dict):
            return _error(ErrorReply(400, "MockLLM: the request body is not a JSON object"))
        self.requests.append(body)
        self._changed.set()
        self._changed = trio.Event()
        scripted = self._queue.popleft() if self._queue else ErrorReply(500, _NO_REPLY_LEFT)
        reply = scripted(body) if callable(scripted) else scripted
        if isinstance(reply, ToolCallsReply):
            # Unique over the server's life, as a real API's ids are (clients check).
            numbered = (
                attrs.evolve(c, call_id=c.call_id or f"call_mock{next(self._call_ids)}")
                for c in reply.calls
            )
            reply = attrs.evolve(reply, calls=tuple(numbered))
        stream = body.get("stream") is True
        usage = None
        if isinstance(reply, TextReply | ToolCallsReply):
            counts = (_prompt_tokens(body), _completion_tokens(reply))
            self.usages.append(counts)
            options = body.get("stream_options")
            if not stream or (isinstance(options, dict) and options.get("include_usage") is True):
                usage = counts
        completion_id = f"chatcmpl-mock{next(self._ids)}"
        return _render(reply, completion_id, str(body.get("model")), stream, usage, self._writes)

    # -- in memory ----------------------------------------------------------------------

    def transport(self) -> httpx.MockTransport:
        """An ``httpx.MockTransport`` that answers from this script (any host).

        Delays use ``trio.sleep``, so ``autojump_clock`` makes them instant.
        """
        return mock_transport(self._respond, _too_large)

    # -- over a socket --------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def serve(self, *, host: str = "127.0.0.1", port: int = 0) -> AsyncIterator[str]:
        """Serves this script over HTTP; yields the base URL (``http://HOST:PORT/v1``).

        Resource handling: leaving the block stops the server and joins all its tasks.
        Hanging replies are ended first, so closing takes milliseconds even with a
        stream open.
        """
        async with serve_http(self._respond, _too_large, host=host, port=port) as root:
            yield f"{root}/v1"


def _too_large() -> _Rendered:
    return _error(ErrorReply(413, "MockLLM: the request body is too large"))


# -- rendering (pure) -----------------------------------------------------------------


def mock_tokens(text: str) -> int:
    """How many tokens MockLLM counts in ``text``: one per 4 characters, rounded up."""
    return -(-len(text) // 4)


def _prompt_tokens(body: Mapping[str, Any]) -> int:
    """The prompt tokens of a request: :func:`mock_tokens` of each message's text
    (a string content, or the text parts of a list) and each tool call's arguments."""
    total = 0
    for message in body.get("messages") or ():
        if not isinstance(message, dict):
            continue
        content = message.get("content")
        if isinstance(content, str):
            total += mock_tokens(content)
        elif isinstance(content, list):
            for part in content:
                if isinstance(part, dict) and isinstance(part.get("text"), str):
                    total += mock_tokens(part["text"])
        for call in message.get("tool_calls") or ():
            arguments = (call.get("function") or {}).get("arguments")
            if isinstance(arguments, str):
                total += mock_tokens(arguments)
    return total


def _completion_tokens(reply: TextReply | ToolCallsReply) -> int:
    total = mock_tokens(reply.text or "")
    if isinstance(reply, ToolCallsReply):
        total += sum(mock_tokens(_arguments_text(call)) for call in reply.calls)
    return total


def _usage_object(usage: tuple[int, int]) -> dict[str, int]:
    return {"prompt_tokens": usage[0], "completion_tokens": usage[1], "total_tokens": sum(usage)}


def _render(
    reply: Reply,
    completion_id: str,
    model: str,
    stream: bool,
    usage: tuple[int, int] | None = None,
    writes: Writes = Writes.PACKED,
) -> _Rendered:
    if isinstance(reply, ErrorReply):
        return _error(reply)
    if isinstance(reply, HangReply):
        return _Rendered(200, _SSE_HEADERS if stream else _JSON_HEADERS, (), hang=True)
    if not stream:
        return _json(200, _whole_completion(reply, completion_id, model, usage or (0, 0)))
    envelope = {
        "id": completion_id,
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
    }

    def frame(delta: dict[str, Any], finish_reason: str | None = None) -> bytes:
        choice = {"index": 0, "delta": delta, "finish_reason": finish_reason}
        return b"data: " + json.dumps({**envelope, "choices": [choice]}).encode() + b"\n\n"

    text = reply.text or ""
    step = reply.chunk_size if isinstance(reply, TextReply) else 8
    deltas = [frame({"content": text[i : i + step]}) for i in range(0, len(text), step)]
    if isinstance(reply, ToolCallsReply):
        deltas += [frame({"tool_calls": [d]}) for d in _tool_call_deltas(reply.calls)]
    deltas.insert(
        0, frame({"role": "assistant", "content": ""}) + (deltas.pop(0) if deltas else b"")
    )
    if not (isinstance(reply, TextReply) and reply.truncated):
        finish_reason = "tool_calls" if isinstance(reply, ToolCallsReply) else reply.finish_reason
        deltas[-1] += frame({}, finish_reason)
        if usage is not None:
            last = {**envelope, "choices": [], "usage": _usage_object(usage)}
            deltas[-1] += b"data: " + json.dumps(last).encode() + b"\n\n"
        deltas[-1] += b"data: [DONE]\n\n"
    if not reply.delay and writes is Writes.PACKED:  # one write instead of one per frame
        return _Rendered(200, _SSE_HEADERS, ((0.0, b"".join(deltas)),))
    parts = tuple((reply.delay if i else 0.0, d) for i, d in enumerate(deltas))
    return _Rendered(200, _SSE_HEADERS, parts)


def _tool_call_deltas(calls: Sequence[MockToolCall]) -> list[dict[str, Any]]:
    deltas: list[dict[str, Any]] = []
    for index, call in enumerate(calls):
        function = {"name": call.name, "arguments": ""}
        deltas.append(
            {"index": index, "id": _call_id(call, index), "type": "function", "function": function}
        )
        arguments = _arguments_text(call)
        step = max(1, -(-len(arguments) // 3))  # three fragments, as OpenAI splits them
        for i in range(0, len(arguments), step):
            deltas.append({"index": index, "function": {"arguments": arguments[i : i + step]}})
    return deltas


def _whole_completion(
    reply: TextReply | ToolCallsReply, completion_id: str, model: str, usage: tuple[int, int]
) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.text}
    finish_reason = reply.finish_reason if isinstance(reply, TextReply) else "stop"
    if isinstance(reply, ToolCallsReply):
        finish_reason = "tool_calls"
        message["tool_calls"] = [
            {
                "id": _call_id(call, index),
                "type": "function",
                "function": {"name": call.name, "arguments": _arguments_text(call)},
            }
            for index, call in enumerate(reply.calls)
        ]
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
        "usage": _usage_object(usage),
    }


def _call_id(call: MockToolCall, index: int) -> str:
    return call.call_id or f"call_mock{index}"


def _arguments_text(call: MockToolCall) -> str:
    return call.arguments if isinstance(call.arguments, str) else json.dumps(call.arguments)


_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    429: "rate_limit_error",
}


def _error(reply: ErrorReply) -> _Rendered:
    kind = _ERROR_TYPES.get(reply.status, "server_error" if reply.status >= 500 else "api_error")
    body = {"error": {"message": reply.message, "type": kind, "code": kind}}
    return error_rendered(reply.status, body, reply.retry_after)
