"""A streaming client for OpenAI-compatible Chat Completions endpoints.

It speaks to anything that serves ``POST {base_url}/chat/completions`` with
``stream: true`` (OpenAI, vLLM, Ollama, llama.cpp, LM Studio, gateways) and turns the
server-sent events into a small vocabulary::

    ChatEvent = TextDelta | Completion

A stream yields one :class:`TextDelta` per content delta, as it arrives, and then exactly
one :class:`Completion` carrying the whole text and the tool calls assembled from their
fragments.

Every failure — a 4xx, retries exhausted on 429/5xx, a refused connection, a malformed or
truncated stream — is a :class:`~omnigent.errors.ModelEndpointError` whose message says
what to fix, with ``http_status`` set when the endpoint answered one and the httpx error
on ``__cause__``.

The SSE parser and the delta assembler are pure and do no I/O: they live in
:mod:`omnigent.harnesses._chat_sse`, tested without a network. This module holds the
public event types, the retrying client and :class:`ChatStream`, the thin Trio shell
that feeds them and translates their errors into :class:`ModelEndpointError`.
"""

from __future__ import annotations

import collections
import contextlib
import json
import logging
import random
from collections.abc import AsyncIterator, Mapping
from typing import Any, TypeAlias

import attrs
import httpx
import trio

from ..errors import ModelEndpointError
from ..model import Usage
from ._chat_sse import (
    DeltaAssembler,
    SSEFrames,
    StreamReportedError,
    message_of,
)

__all__ = [
    "ChatCompletionsClient",
    "ChatEvent",
    "ChatStream",
    "Completion",
    "TextDelta",
    "ToolCall",
]

log = logging.getLogger(__name__)

# Bounds for work done after the answer is complete or while closing: neither may hold
# up the caller for long, and both run shielded so a cancel cannot leak a connection.
_DRAIN_TIMEOUT = 1.0
_CLOSE_TIMEOUT = 2.0
_ABANDON_MAX_CHUNKS = 1000
# A stream's JSON payloads are UTF-8 (SSE is): decoded directly, without the encoding
# sniffing json.loads does for bytes (a profile of the relay: ~5 % of the server's CPU).
_DECODE = json.JSONDecoder().decode


@attrs.frozen
class ToolCall:
    """A complete tool call. ``arguments`` is the raw JSON text the model sent."""

    id: str
    name: str
    arguments: str


@attrs.frozen
class TextDelta:
    """A piece of the answer's text, in arrival order."""

    text: str


@attrs.frozen
class Completion:
    """The end of a stream: the whole text, the tool calls, and why the model stopped.

    ``finish_reason`` is ``"stop"``, ``"tool_calls"``, ``"length"``, … or ``None`` if the
    endpoint ended the stream with ``[DONE]`` without naming one. ``usage`` is what the
    endpoint reported for the call (asked for with ``stream_options.include_usage``),
    or ``None`` if it reported nothing. Two completions are equal when their answers
    are: the usage is a measurement of the call, not part of what the model said.
    """

    text: str
    tool_calls: tuple[ToolCall, ...]
    finish_reason: str | None
    usage: Usage | None = attrs.field(default=None, eq=False)


ChatEvent: TypeAlias = TextDelta | Completion


class ChatStream:
    """The events of one streamed answer: an async iterator of :class:`ChatEvent`.

    Obtained from :meth:`ChatCompletionsClient.open_stream`, which closes it; it is
    single-use. It yields text deltas as they arrive and then one :class:`Completion`.

    Raises:
        ModelEndpointError: the stream broke off, was malformed, ended before the
            answer was complete, or carried an error object.
    """

    def __init__(self, response: httpx.Response, endpoint: str) -> None:
        self._response = response
        self._endpoint = endpoint
        # Raw chunks as they arrive (not lines); aiter_bytes rather than aiter_raw only
        # so that a gateway that gzips the event stream still works. For an identity
        # body both hand over the same bytes objects.
        self._chunks = response.aiter_bytes()
        self._frames = SSEFrames()
        self._assembler = DeltaAssembler()
        self._ready: collections.deque[ChatEvent] = collections.deque()
        self._complete = False  # the Completion has been queued
        self._closed = False

    def __aiter__(self) -> ChatStream:
        return self

    async def __anext__(self) -> ChatEvent:
        while not self._ready:
            if self._complete or self._closed:
                await self._drain()
                raise StopAsyncIteration
            chunk = await self._read()
            if chunk is None:
                if self._assembler.finish_reason is None:
                    raise ModelEndpointError(
                        f"model endpoint {self._endpoint} ended the stream before the answer "
                        "was complete (no finish_reason and no [DONE])"
                    )
                self._finish()
            else:
                self._parse(chunk)
        return self._ready.popleft()

    def take_ready_text(self) -> str:
        """The text of the deltas already read and waiting, taken now ("" if none).

        No I/O: these arrived with the delta just yielded (in the same network
        read). A relay that writes ``delta.text + stream.take_ready_text()`` sends a
        burst as one piece, however finely the endpoint split it; the iterator then
        goes on after them.
        """
        parts = []
        while self._ready and isinstance(self._ready[0], TextDelta):
            parts.append(self._ready.popleft().text)
        return "".join(parts)

    def _parse(self, chunk: bytes) -> None:
        for payload in self._frames.feed(chunk):
            if payload == b"[DONE]":
                self._finish()
                return
            try:
                text = self._assembler.feed(_DECODE(payload.decode()))
            except StreamReportedError as exc:
                raise ModelEndpointError(
                    f"model endpoint {self._endpoint} reported an error mid-stream: {exc}"
                ) from exc
            except (ValueError, TypeError, AttributeError) as exc:
                raise ModelEndpointError(
                    f"model endpoint {self._endpoint} sent a malformed stream: {exc}"
                ) from exc
            if text is not None:
                self._ready.append(TextDelta(text))

    def _finish(self) -> None:
        try:
            text, calls = self._assembler.result()
        except ValueError as exc:
            raise ModelEndpointError(
                f"model endpoint {self._endpoint} sent a malformed stream: {exc}"
            ) from exc
        tool_calls = tuple(ToolCall(*call) for call in calls)
        counts = self._assembler.usage
        usage = None if counts is None else Usage.of_call(*counts)
        self._ready.append(Completion(text, tool_calls, self._assembler.finish_reason, usage))
        self._complete = True

    async def _read(self) -> bytes | None:
        try:
            return await self._chunks.__anext__()
        except StopAsyncIteration:
            return None
        except httpx.HTTPError as exc:
            raise ModelEndpointError(
                f"model endpoint {self._endpoint} broke off the stream: {_describe(exc)}"
            ) from exc

    async def _drain(self) -> None:
        # Reading to the end of the body lets httpx return the connection to its pool.
        # Bounded: a server that keeps the body open after [DONE] costs at most a second.
        if self._closed:
            return
        with trio.move_on_after(_DRAIN_TIMEOUT), contextlib.suppress(httpx.HTTPError):
            async for _ in self._chunks:
                pass
        await self.aclose()

    async def aclose(self) -> None:
        """Closes the response. Idempotent; completes even when cancelled."""
        if self._closed:
            return
        self._closed = True
        with trio.move_on_after(_CLOSE_TIMEOUT, shield=True):
            await self._abandon_body()
            await self._response.aclose()

    async def _abandon_body(self) -> None:
        # httpx reads the body through nested async generators. Dropping them while they
        # wait at a `yield` leaves each unfinished, and Trio warns (ResourceWarning) as it
        # collects them. Reading on in a cancelled scope instead ends them all with the
        # Cancelled raised at their next await: they finish and nothing is left over.
        # (Buffered chunks come back without an await: the loop is bounded for them.)
        with trio.CancelScope() as scope, contextlib.suppress(Exception):
            scope.cancel()
            for _ in range(_ABANDON_MAX_CHUNKS):
                await self._chunks.__anext__()


class ChatCompletionsClient:
    """Streams answers from an OpenAI-compatible Chat Completions endpoint.

    Args:
        http: the client to send with; the caller owns it and its timeouts. The httpx
            default read timeout (5 s) is short for a model thinking over a long prompt:
            pass e.g. ``httpx.Timeout(10.0, read=300.0)``.
        base_url: the API root, e.g. ``http://127.0.0.1:8000/v1``.
        api_key: sent as ``Authorization: Bearer <key>`` when given.
        max_retries: how many times a 429 or 5xx answer is retried.
        backoff_base: the first retry delay in seconds; it doubles on every retry (with
            jitter), capped at ``backoff_max``. A numeric ``Retry-After`` header is
            honoured instead, capped at ``backoff_max`` too.

    Example::

        async with httpx.AsyncClient() as http:
            client = ChatCompletionsClient(http, base_url=url, api_key=key)
            async with client.open_stream(model="gpt-4o-mini", messages=msgs) as stream:
                async for event in stream:
                    if isinstance(event, TextDelta):
                        print(event.text, end="")
    """

    def __init__(
        self,
        http: httpx.AsyncClient,
        *,
        base_url: str,
        api_key: str | None,
        max_retries: int = 4,
        backoff_base: float = 0.5,
        backoff_max: float = 8.0,
    ) -> None:
        self._http = http
        self._base_url = base_url.rstrip("/")
        self._url = f"{self._base_url}/chat/completions"
        self._headers = {"accept": "text/event-stream"}
        if api_key:
            self._headers["authorization"] = f"Bearer {api_key}"
        self._max_retries = max_retries
        self._backoff_base = backoff_base
        self._backoff_max = backoff_max

    @contextlib.asynccontextmanager
    async def open_stream(
        self,
        *,
        model: str,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None = None,
        temperature: float | None = None,
        extra_body: Mapping[str, Any] | None = None,
    ) -> AsyncIterator[ChatStream]:
        """Sends one request and yields its :class:`ChatStream`.

        The request is sent (and retried) on entry; the body is read as the caller
        iterates. ``extra_body`` adds fields such as ``max_tokens`` or ``tool_choice``.

        Resource handling: leaving the block closes the response, whether or not the
        stream was read to the end.

        Cancellation: a cancel while waiting, retrying or reading propagates unchanged
        and the response is closed on the way out (shielded, bounded).

        Raises:
            ModelEndpointError: on entry when the endpoint cannot be reached or answers
                an error; while iterating when the stream fails.
        """
        # The usage of the call comes in a last chunk (no choices) when asked for:
        # OpenAI, vLLM, llama.cpp, Ollama and LiteLLM all honour it.
        body: dict[str, Any] = {
            "model": model,
            "messages": messages,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if tools:
            body["tools"] = tools
        if temperature is not None:
            body["temperature"] = temperature
        if extra_body:
            body.update(extra_body)
        stream = ChatStream(await self._send(body), self._base_url)
        try:
            yield stream
        finally:
            await stream.aclose()

    async def complete(
        self,
        *,
        model: str,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None = None,
        temperature: float | None = None,
        extra_body: Mapping[str, Any] | None = None,
    ) -> Completion:
        """Streams an answer to its end and returns the :class:`Completion`.

        Takes the same arguments, and raises the same errors, as :meth:`open_stream`.
        """
        async with self.open_stream(
            model=model,
            messages=messages,
            tools=tools,
            temperature=temperature,
            extra_body=extra_body,
        ) as stream:
            # Read on to the end, not just to the Completion, so the body is drained
            # and the connection can be reused.
            events = [event async for event in stream if isinstance(event, Completion)]
        return events[-1]

    async def _send(self, body: dict[str, Any]) -> httpx.Response:
        for attempt in range(self._max_retries + 1):
            request = self._http.build_request("POST", self._url, json=body, headers=self._headers)
            try:
                response = await self._http.send(request, stream=True)
            except httpx.HTTPError as exc:
                raise _transport_error(self._base_url, exc) from exc
            if response.is_success:
                if response.headers.get("content-type", "").startswith("application/json"):
                    await response.aclose()
                    raise ModelEndpointError(
                        f"model endpoint {self._base_url} answered JSON instead of an event "
                        "stream: does it support stream: true?"
                    )
                return response
            status = response.status_code
            message = await _read_error_message(response)
            if status != 429 and status < 500:
                raise ModelEndpointError(
                    f"model endpoint answered {status}: {message}", http_status=status
                )
            if attempt == self._max_retries:
                raise ModelEndpointError(
                    f"model endpoint answered {status} after {attempt + 1} attempts: {message}",
                    http_status=status,
                )
            await trio.sleep(self._retry_delay(attempt, response.headers.get("retry-after")))
        raise AssertionError("unreachable")  # pragma: no cover

    def _retry_delay(self, attempt: int, retry_after: str | None) -> float:
        if retry_after is not None:
            with contextlib.suppress(ValueError):
                return min(max(float(retry_after), 0.0), self._backoff_max)
        delay = min(self._backoff_base * 2.0**attempt, self._backoff_max)
        return delay * (0.5 + random.random() / 2)  # jitter spreads out retrying clients


async def _read_error_message(response: httpx.Response) -> str:
    """The ``error.message`` of a JSON error body (shortened), else the reason phrase.

    Any other body is logged, never reflected: the endpoint may be one a client's spec
    named, and what an internal service answers must not come back to that client.
    """
    try:
        raw = await response.aread()
    except httpx.HTTPError as exc:
        return f"(the error body could not be read: {type(exc).__name__})"
    finally:
        await response.aclose()
    try:
        return message_of(json.loads(raw))
    except ValueError:
        log.info("model endpoint error body (not shown to clients): %.300r", raw)
        return f"{response.reason_phrase or 'error'} (a body that is not a JSON error)"


def _transport_error(endpoint: str, exc: httpx.HTTPError) -> ModelEndpointError:
    if isinstance(exc, httpx.ConnectTimeout):
        return ModelEndpointError(
            f"model endpoint {endpoint} did not accept the connection in time"
        )
    if isinstance(exc, httpx.ConnectError) and _refused(exc):
        return ModelEndpointError(f"model endpoint {endpoint} refused the connection")
    if isinstance(exc, httpx.ConnectError):
        return ModelEndpointError(f"could not connect to model endpoint {endpoint}: {exc}")
    return ModelEndpointError(f"model endpoint {endpoint} failed: {_describe(exc)}")


def _describe(exc: httpx.HTTPError) -> str:
    if isinstance(exc, httpx.TimeoutException):
        return f"{type(exc).__name__} (raise the httpx client's timeout if the model is slow)"
    return str(exc) or type(exc).__name__


def _refused(exc: BaseException) -> bool:
    """Whether every connection attempt behind ``exc`` was refused."""
    cause = exc.__cause__ or exc.__context__
    if isinstance(exc, ConnectionRefusedError):
        return True
    if isinstance(exc, BaseExceptionGroup):
        return all(_refused(inner) for inner in exc.exceptions)
    return cause is not None and _refused(cause)
