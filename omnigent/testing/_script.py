"""The script shared by the fake vendor servers, and their common machinery.

A script is a queue of model turns. :class:`FakeTurn` is what the model "says" —
text and/or tool uses — and :class:`FakeShell` is a tool use that names no tool: the
fake picks whichever shell tool the request offers (Claude Code calls it ``Bash``,
Codex ``exec_command``), so one script serves either CLI. :class:`ErrorReply` and
:class:`HangReply` (shared with :class:`~omnigent.testing.MockLLM`) script failures.

:class:`ScriptedFake` is the base of :class:`~omnigent.testing.FakeAnthropic` and
:class:`~omnigent.testing.FakeResponses`: the queue, the request log, the wait for a
request, how a scripted reply becomes an answer (an error, a hang, one JSON body or a
stream), and the two deliveries (in memory and over loopback).
"""

from __future__ import annotations

import abc
import contextlib
from collections import deque
from collections.abc import AsyncIterator, Callable, Collection, Iterable, Mapping
from typing import Any, ClassVar, TypeAlias

import attrs
import httpx
import trio

from ._mockllm import ErrorReply, HangReply
from ._serve import (
    JSON_HEADERS,
    SSE_HEADERS,
    Rendered,
    json_rendered,
    mock_transport,
    serve_http,
)
from ._wire import parse_object, timed_parts

__all__ = [
    "FakeReply",
    "FakeShell",
    "FakeToolResult",
    "FakeToolUse",
    "FakeTurn",
    "ScriptedFake",
    "offered_name",
]


def _positive(instance: Any, attribute: attrs.Attribute[int], value: int) -> None:
    if value < 1:
        raise ValueError(f"{attribute.name} must be at least 1")


def _not_negative(instance: Any, attribute: attrs.Attribute[float], value: float) -> None:
    if value < 0:
        raise ValueError(f"{attribute.name} must not be negative")


def _as_tuple(tools: Iterable[FakeToolUse | FakeShell]) -> tuple[FakeToolUse | FakeShell, ...]:
    return tuple(tools)


@attrs.frozen
class FakeToolUse:
    """The model calls tool ``name`` with ``input``.

    ``name`` is matched against the tools the request offers (:func:`offered_name`):
    a tool an MCP server provides may be named bare — ``FakeToolUse("sys_session_send",
    …)`` calls ``mcp__omnigent__sys_session_send`` in Claude Code, and in Codex, which
    keeps MCP tools behind its ``tool_search`` tool, the fake first searches for it
    (one extra model request) and then calls it in the namespace found.

    ``input`` is a JSON object, or text for a Responses *custom* (freeform) tool such
    as Codex's ``apply_patch``: :class:`~omnigent.testing.FakeResponses` emits a
    ``custom_tool_call`` when the request declares ``name`` as a custom tool, else a
    ``function_call`` (text is then sent as the arguments string as it is). The
    Messages API has only JSON inputs, so :class:`~omnigent.testing.FakeAnthropic`
    answers a text input 400. ``call_id`` is the id the model gives the call
    (``toolu_…`` / ``call_…``); by default the fake numbers them.
    """

    name: str
    input: Mapping[str, Any] | str = attrs.field(factory=dict)
    call_id: str | None = None


@attrs.frozen
class FakeShell:
    """The model runs ``command`` with the shell tool that the request offers.

    The fake reads the request's ``tools`` and calls the first shell tool it knows:
    ``Bash {command}`` for Claude Code; ``exec_command {cmd}``, ``shell_command
    {command}`` or ``shell {command: [bash, -lc, …]}`` for Codex. A request that offers
    none is answered 400, naming the tools it did offer.
    """

    command: str
    call_id: str | None = None


@attrs.frozen
class FakeTurn:
    """One scripted model answer: ``text`` first, then ``tools`` (in order).

    The text streams in deltas of ``chunk_size`` characters and each tool's input in
    three fragments; ``delay`` seconds pass between events. ``stall`` streams all that
    and then neither finishes the message nor closes the stream until the client goes
    away — a model still "thinking" mid-turn, for interrupt tests.
    """

    text: str | None = None
    tools: tuple[FakeToolUse | FakeShell, ...] = attrs.field(default=(), converter=_as_tuple)
    chunk_size: int = attrs.field(default=8, validator=_positive)
    delay: float = attrs.field(default=0.0, validator=_not_negative)
    stall: bool = False


@attrs.frozen
class FakeToolResult:
    """A tool result the client sent back to the model (see :meth:`ScriptedFake.tool_results`).

    ``output`` is the result's text (text parts joined); ``is_error`` is what the
    client flagged (Anthropic ``is_error``; always ``False`` for the Responses API,
    which has no such flag).
    """

    call_id: str
    output: str
    is_error: bool = False


def offered_name(name: str, offered: Collection[str]) -> str:
    """The name under which the request offers the tool ``name``.

    ``name`` itself if it is offered; else the one offered name that ends in
    ``__<name>`` — how clients name a tool an MCP server provides
    (``mcp__<server>__<tool>``); else ``name`` as given (a client may accept tools it
    does not list up front).
    """
    if name in offered:
        return name
    found = [candidate for candidate in offered if candidate.endswith(f"__{name}")]
    return found[0] if len(found) == 1 else name


FakeReply: TypeAlias = FakeTurn | ErrorReply | HangReply
_Scripted: TypeAlias = FakeReply | Callable[[dict[str, Any]], FakeReply]


class ScriptedFake(abc.ABC):
    """A scripted vendor endpoint: a queue of replies, a log of requests.

    Each model request (``POST /v1/messages`` or ``POST /v1/responses``) consumes the
    next reply in order; when none is left the answer is a 400 whose message says so
    (400, not 5xx, because both CLIs retry server errors for a minute before giving
    up). Every model request's JSON body is appended to :attr:`requests`.

    Subclasses render the vendor's wire format (its answer body, its stream events, its
    error body); this class holds the script and turns each reply into an answer.
    """

    _name: ClassVar[str]
    """What the fake calls itself in the messages of its error answers."""

    def __init__(self, turns: Iterable[_Scripted] = ()) -> None:
        self._queue: deque[_Scripted] = deque(turns)
        self._changed = trio.Event()
        self._ids: dict[str, int] = {}
        self.requests: list[dict[str, Any]] = []
        """The JSON body of every model request received, in order."""
        self.usages: list[dict[str, Any]] = []
        """The ``usage`` object of every answer sent, in the vendor's form, in order."""

    @property
    def pending(self) -> int:
        """How many scripted replies have not been used yet."""
        return len(self._queue)

    # -- scripting --------------------------------------------------------------------

    def reply(self, reply: FakeReply | Callable[[dict[str, Any]], FakeReply]) -> None:
        """Queues a reply, or a callable that builds one from the request body."""
        self._queue.append(reply)

    def reply_text(
        self, text: str, *, chunk_size: int = 8, delay: float = 0.0, stall: bool = False
    ) -> None:
        """Queues a text answer; see :class:`FakeTurn`."""
        self.reply(FakeTurn(text, (), chunk_size, delay, stall))

    def reply_tool_use(
        self,
        name: str,
        input: Mapping[str, Any] | str,
        *,
        text: str | None = None,
        call_id: str | None = None,
    ) -> None:
        """Queues an answer that calls tool ``name`` (after optional ``text``)."""
        self.reply(FakeTurn(text, (FakeToolUse(name, input, call_id),)))

    def reply_shell(
        self, command: str, *, text: str | None = None, call_id: str | None = None
    ) -> None:
        """Queues an answer that runs ``command`` in the client's shell tool; see
        :class:`FakeShell`."""
        self.reply(FakeTurn(text, (FakeShell(command, call_id),)))

    def reply_error(self, status: int, message: str, *, retry_after: float | None = None) -> None:
        """Queues an HTTP error with the vendor's error body."""
        self.reply(ErrorReply(status, message, retry_after))

    def reply_hang(self) -> None:
        """Queues an answer whose headers come and then nothing, until the client goes."""
        self.reply(HangReply())

    # -- what was received ---------------------------------------------------------------

    def tool_results(self) -> list[FakeToolResult]:
        """Every tool result the client has sent, in the order first seen.

        Clients resend the whole conversation on each request, so a result is listed
        once (by call id) however many requests carried it.
        """
        seen: dict[str, FakeToolResult] = {}
        for body in self.requests:
            for result in self._tool_results_in(body):
                seen.setdefault(result.call_id, result)
        return list(seen.values())

    async def wait_requests(self, count: int = 1) -> dict[str, Any]:
        """Blocks until ``count`` model requests have arrived; returns the last of those.

        For tests that must act while the client is mid-request (a stalled turn).
        """
        while len(self.requests) < count:
            await self._changed.wait()
        return self.requests[count - 1]

    # -- for the renderers -----------------------------------------------------------------

    def _take(self, body: dict[str, Any]) -> FakeReply | None:
        """Logs a model request and returns the reply for it (``None``: script empty)."""
        self.requests.append(body)
        self._changed.set()
        self._changed = trio.Event()
        if not self._queue:
            return None
        scripted = self._queue.popleft()
        return scripted(body) if callable(scripted) else scripted

    def _next_id(self, kind: str) -> int:
        """Numbers ids per kind (messages, tool calls), from 1, in the order made."""
        self._ids[kind] = self._ids.get(kind, 0) + 1
        return self._ids[kind]

    def _read_body(self, raw_body: bytes) -> dict[str, Any] | Rendered:
        """A model request's body as a JSON object, or the 400 that says why it is not."""
        parsed = parse_object(raw_body)
        if isinstance(parsed, str):
            return self._error(ErrorReply(400, f"{self._name}: {parsed}"))
        return parsed

    def _no_route(self, method: str, path: str) -> Rendered:
        """The 404 for a route the vendor's API does not have."""
        return self._error(ErrorReply(404, f"{self._name}: no route for {method} {path}"))

    def _too_large(self) -> Rendered:
        """The 413 for a request body over :data:`~._serve.MAX_BODY_BYTES`."""
        return self._error(ErrorReply(413, f"{self._name}: the request body is too large"))

    def _answer(self, body: dict[str, Any], size: int) -> Rendered:
        """The next scripted reply to one model request (``size`` bytes), rendered.

        An empty script and a reply the request cannot take are 400s; a
        :class:`FakeTurn` is one JSON body, or streamed when the request asks
        (``"stream": true``); a stalled turn never ends its answer.
        """
        reply = self._take(body)
        if reply is None:
            return self._error(ErrorReply(400, f"{self._name}: no scripted reply left"))
        if isinstance(reply, ErrorReply):
            return self._error(reply)
        stream = body.get("stream") is True
        if isinstance(reply, HangReply):
            return Rendered(200, SSE_HEADERS if stream else JSON_HEADERS, (), hang=True)
        answer = self._answer_body(reply, body, size)
        if isinstance(answer, str):
            return self._error(ErrorReply(400, f"{self._name}: {answer}"))
        self.usages.append(answer["usage"])
        if not stream:
            if reply.stall:
                return Rendered(200, JSON_HEADERS, (), hang=True)
            return json_rendered(200, answer)
        frames = self._frames(answer, reply.chunk_size, stall=reply.stall)
        return Rendered(200, SSE_HEADERS, timed_parts(frames, reply.delay), hang=reply.stall)

    @abc.abstractmethod
    def _respond(self, method: str, path: str, raw_body: bytes) -> Rendered: ...

    @abc.abstractmethod
    def _error(self, reply: ErrorReply) -> Rendered:
        """``reply`` as the vendor's error answer."""

    @abc.abstractmethod
    def _answer_body(self, turn: FakeTurn, body: dict[str, Any], size: int) -> dict[str, Any] | str:
        """The whole answer object for ``turn``, or why the request cannot take it."""

    @abc.abstractmethod
    def _frames(self, answer: dict[str, Any], chunk_size: int, *, stall: bool) -> list[bytes]:
        """``answer`` as the vendor's SSE frames; ``stall``: without those that end it."""

    @abc.abstractmethod
    def _tool_results_in(self, body: dict[str, Any]) -> Iterable[FakeToolResult]: ...

    @abc.abstractmethod
    def _base_url(self, root: str) -> str: ...

    # -- delivery -------------------------------------------------------------------------

    def transport(self) -> httpx.MockTransport:
        """An ``httpx.MockTransport`` that answers from this script (any host).

        Delays use ``trio.sleep``, so ``autojump_clock`` makes them instant.
        """
        return mock_transport(self._respond, self._too_large)

    @contextlib.asynccontextmanager
    async def serve(self, *, host: str = "127.0.0.1", port: int = 0) -> AsyncIterator[str]:
        """Serves this script over HTTP on a loopback port; yields the base URL.

        The URL is what the vendor's clients take as their base URL (see the
        subclass). Resource handling: leaving the block stops the server and joins
        all its tasks; stalled and hanging answers are broken off first, so closing
        takes milliseconds even with a stream open.
        """
        async with serve_http(self._respond, self._too_large, host=host, port=port) as root:
            yield self._base_url(root)
