"""The pure half of the Chat Completions stream: SSE framing and delta assembly.

:class:`SSEFrames` splits the bytes of a ``text/event-stream`` body into ``data``
payloads whatever the chunk boundaries; :class:`DeltaAssembler` folds the decoded chunk
objects into the answer's text and its tool calls, put together from their fragments.
Neither does I/O, so both are tested by feeding them bytes and dicts;
:class:`~omnigent.harnesses.openai.ChatStream` is the Trio shell that feeds them and
turns what they give back into ``TextDelta`` and ``Completion`` events.

They answer in plain values (strings and tuples) rather than those event types because
:mod:`omnigent.harnesses.openai` owns the public types and imports this module.

Error handling: :meth:`DeltaAssembler.feed` raises :class:`StreamReportedError` for an
``{"error": ...}`` object in the stream and ``TypeError``, ``ValueError`` or
``AttributeError`` for a chunk of the wrong shape; :meth:`DeltaAssembler.result` raises
``ValueError`` for a tool call that never got a name. The caller translates them.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "DeltaAssembler",
    "SSEFrames",
    "StreamReportedError",
    "message_of",
    "usage_counts",
]


class SSEFrames:
    """Splits a byte stream into SSE ``data`` payloads, whatever the chunk boundaries."""

    def __init__(self) -> None:
        self._buffer = b""
        self._held_cr = False  # a chunk ended in "\r": it may be half of a "\r\n"

    def feed(self, chunk: bytes) -> list[bytes]:
        """Returns the data payload of every frame completed by ``chunk``."""
        if self._held_cr:
            chunk = b"\r" + chunk
            self._held_cr = False
        if b"\r" in chunk:
            if chunk.endswith(b"\r"):
                chunk = chunk[:-1]
                self._held_cr = True
            chunk = chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        if b"\n\n" not in chunk and not (chunk[:1] == b"\n" and self._buffer.endswith(b"\n")):
            self._buffer += chunk
            return []
        *frames, self._buffer = (self._buffer + chunk).split(b"\n\n")
        payloads = []
        for frame in frames:
            # The usual frame is one "data: ..." line: take it without a line split.
            if frame.startswith(b"data: ") and b"\n" not in frame:
                payloads.append(frame[6:])
            elif (payload := _frame_data(frame)) is not None:
                payloads.append(payload)
        return payloads


def _frame_data(frame: bytes) -> bytes | None:
    """The joined ``data`` lines of a frame; ``None`` for comments and data-less frames."""
    lines = [line[5:] for line in frame.split(b"\n") if line.startswith(b"data:")]
    if not lines:
        return None
    return b"\n".join(line[1:] if line.startswith(b" ") else line for line in lines)


class _ToolCallParts:
    __slots__ = ("arguments", "id", "name")

    def __init__(self) -> None:
        self.id = ""
        self.name = ""
        self.arguments: list[str] = []


class DeltaAssembler:
    """Folds chunk objects into text deltas and, at the end, the whole answer."""

    def __init__(self) -> None:
        self._text: list[str] = []
        self._calls: dict[int, _ToolCallParts] = {}
        self.finish_reason: str | None = None
        # (prompt, completion, cached prompt) tokens, from the chunk that carries
        # ``usage`` (asked for with ``stream_options.include_usage``); the last wins.
        self.usage: tuple[int, int, int] | None = None

    def feed(self, chunk: Any) -> str | None:
        """Takes one decoded chunk; returns the text it added (the last, if several)."""
        if not isinstance(chunk, dict):
            raise TypeError("an event is not a JSON object")
        if (error := chunk.get("error")) is not None:
            raise StreamReportedError(message_of(error))
        if (usage := chunk.get("usage")) is not None:
            self.usage = usage_counts(usage)
        text_delta = None
        for choice in chunk.get("choices") or ():
            delta = choice.get("delta") or {}
            if content := delta.get("content"):
                self._text.append(content)
                text_delta = content
            for fragment in delta.get("tool_calls") or ():
                self._add_tool_call_fragment(fragment)
            if reason := choice.get("finish_reason"):
                self.finish_reason = reason
        return text_delta

    def _add_tool_call_fragment(self, fragment: dict[str, Any]) -> None:
        index = fragment.get("index")
        if index is None:  # some servers send whole calls without an index
            new = fragment.get("id") and not any(
                p.id == fragment["id"] for p in self._calls.values()
            )
            index = len(self._calls) if new or not self._calls else max(self._calls)
        parts = self._calls.get(index)
        if parts is None:
            parts = self._calls[index] = _ToolCallParts()
        if call_id := fragment.get("id"):
            parts.id = call_id
        function = fragment.get("function") or {}
        if (name := function.get("name")) and not parts.name:
            parts.name = name
        if arguments := function.get("arguments"):
            parts.arguments.append(arguments)

    def result(self) -> tuple[str, list[tuple[str, str, str]]]:
        """The whole text, and each tool call as ``(id, name, arguments)`` by index.

        A call the endpoint sent without an id is given ``call_<index>``.

        Raises:
            ValueError: a tool call never got a function name.
        """
        calls = []
        for index in sorted(self._calls):
            parts = self._calls[index]
            if not parts.name:
                raise ValueError(f"tool call {index} has no function name")
            calls.append((parts.id or f"call_{index}", parts.name, "".join(parts.arguments)))
        return "".join(self._text), calls


def usage_counts(usage: Any) -> tuple[int, int, int] | None:
    """``(prompt, completion, cached prompt)`` tokens of an OpenAI-style ``usage``
    object, or None for one that is not (a ``null``, counts that are not integers)."""
    if not isinstance(usage, dict):
        return None
    prompt, completion = usage.get("prompt_tokens"), usage.get("completion_tokens")
    if not isinstance(prompt, int) or not isinstance(completion, int):
        return None
    if not _is_count(prompt) or not _is_count(completion):
        return None
    details = usage.get("prompt_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, dict) else None
    return prompt, completion, cached if isinstance(cached, int) and _is_count(cached) else 0


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


class StreamReportedError(Exception):
    """The endpoint put an ``{"error": ...}`` object in the stream."""


_MESSAGE_CHARS = 300


def message_of(error: Any) -> str:
    """The human message of an error object, however the endpoint nests it.

    Only a string under ``error``, ``message`` or ``detail`` is shown (shortened to
    300 characters): anything else an endpoint answers is not reflected, since an
    endpoint may be one a client named (an internal service's JSON must not come back
    as the turn's error).
    """
    # OpenAI: {"error": {"message": ...}}; others: {"error": "..."}, {"detail": ...}.
    if isinstance(error, dict):
        for key in ("error", "message", "detail"):
            if key in error:
                return message_of(error[key])
    if isinstance(error, str):
        return error if len(error) <= _MESSAGE_CHARS else error[:_MESSAGE_CHARS] + "…"
    return "(an error without a message)"
