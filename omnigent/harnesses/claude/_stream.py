"""What Claude Code's stream-json lines mean, without I/O.

:class:`StreamReader` turns the lines of one conversation's turns into relay actions
(:mod:`omnigent.harnesses.native._relay`) and the control protocol's own messages: text
deltas of the top-level agent (sub-agents' lines, with a ``parent_tool_use_id``, are not
relayed — their tool calls still reach the ``PreToolUse`` hook), ``tool_use`` blocks as
calls, ``tool_result`` blocks as their outputs, the ``result`` line as the end of the
turn; ``control_request`` / ``control_cancel_request`` / ``control_response`` and the
``system``/``init`` session id as typed messages; each model call's usage (the
``message_start`` event's input tokens — cache reads and writes included — and the
``message_delta`` event's output tokens) as a :class:`~..native.Used`. What omnigent
sends, and the approval mappings, are in :mod:`._protocol`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, TypeGuard

import attrs

from ...model import Usage
from ..native import Action, Call, CallOutput, EndMessage, Finished, Say, Used, merge_text

__all__ = [
    "ControlCancel",
    "ControlRequest",
    "ControlResponse",
    "Message",
    "SessionStarted",
    "StreamReader",
]


@attrs.frozen
class ControlRequest:
    """Claude Code asks omnigent something (``hook_callback``, ``can_use_tool``, …)."""

    request_id: str
    subtype: str
    body: Mapping[str, Any] = attrs.field(hash=False)


@attrs.frozen
class ControlCancel:
    """Claude Code withdrew a request it sent (an interrupt came first)."""

    request_id: str


@attrs.frozen
class ControlResponse:
    """Claude Code's answer to one of omnigent's control requests."""

    request_id: str
    ok: bool
    body: Any = attrs.field(default=None, hash=False)


@attrs.frozen
class SessionStarted:
    """The turn's ``system``/``init`` line: Claude Code's session id."""

    session_id: str


Message = Action | ControlRequest | ControlCancel | ControlResponse | SessionStarted


class StreamReader:
    """Stream lines in, actions and control messages out; one per conversation turn.

    With ``--include-partial-messages`` text arrives twice: as ``stream_event`` deltas,
    then as a whole ``assistant`` line per content block. Deltas are relayed as they
    come; an ``assistant`` text block is relayed only if its text was not streamed.
    """

    def __init__(self) -> None:
        self._message_id = ""
        self._open_block: str | None = None
        self._streamed: dict[str, int] = {}  # message id -> text blocks streamed
        self._seen: dict[str, int] = {}  # message id -> text blocks in assistant lines
        # The open model call's (model, input tokens, cached input tokens).
        self._call: tuple[str | None, int, int] | None = None

    def feed(self, lines: Sequence[Mapping[str, Any]]) -> list[Message]:
        """What a batch of lines means, adjacent text deltas merged."""
        out: list[Message] = []
        for line in lines:
            out.extend(self._read(line))
        actions: list[Any] = merge_text(out)  # type: ignore[arg-type]
        return actions

    def _read(self, line: Mapping[str, Any]) -> list[Any]:
        kind = line.get("type")
        if kind == "control_request":
            return _control_request(line)
        if kind == "control_cancel_request":
            request_id = line.get("request_id")
            return [ControlCancel(request_id)] if isinstance(request_id, str) else []
        if kind == "control_response":
            return _control_response(line)
        if kind == "result":
            self._open_block = None
            return [EndMessage(), Finished(_result_error(line))]
        if line.get("parent_tool_use_id") is not None:
            return []  # a sub-agent's work: its tool calls still reach the hook
        if kind == "system" and line.get("subtype") == "init":
            session_id = line.get("session_id")
            return [SessionStarted(session_id)] if isinstance(session_id, str) else []
        if kind == "stream_event":
            event = line.get("event")
            return self._stream_event(event) if isinstance(event, Mapping) else []
        message = line.get("message")
        if not isinstance(message, Mapping):
            return []
        if kind == "assistant":
            return self._assistant(message)
        if kind == "user":
            return _tool_results(message)
        return []

    def _stream_event(self, event: Mapping[str, Any]) -> list[Any]:
        kind = event.get("type")
        if kind == "message_start":
            message = event.get("message")
            if isinstance(message, Mapping) and isinstance(message.get("id"), str):
                self._message_id = message["id"]
                model = message.get("model")
                self._call = (
                    model if isinstance(model, str) else None,
                    *_input_tokens(message.get("usage")),
                )
            return []
        if kind == "message_delta":
            return self._used(event.get("usage"))
        index = event.get("index")
        key = f"{self._message_id}:{index}"
        if kind == "content_block_start":
            block = event.get("content_block")
            if isinstance(block, Mapping) and block.get("type") == "text":
                self._open_block = key
                self._streamed[self._message_id] = self._streamed.get(self._message_id, 0) + 1
                text = block.get("text")
                return [Say(key, text)] if isinstance(text, str) and text else []
            return []
        if kind == "content_block_delta" and key == self._open_block:
            delta = event.get("delta")
            if isinstance(delta, Mapping) and delta.get("type") == "text_delta":
                text = delta.get("text")
                return [Say(key, text)] if isinstance(text, str) and text else []
            return []
        if kind == "content_block_stop" and key == self._open_block:
            self._open_block = None
            return [EndMessage()]
        return []

    def _used(self, usage: Any) -> list[Any]:
        """The open call's usage, once its ``message_delta`` gives the output tokens."""
        call, self._call = self._call, None
        output = usage.get("output_tokens") if isinstance(usage, Mapping) else None
        if call is None or not _count(output):
            return []
        model, input_tokens, cached = call
        return [Used(Usage.of_call(input_tokens, output, cached), model)]

    def _assistant(self, message: Mapping[str, Any]) -> list[Any]:
        message_id = message.get("id")
        message_id = message_id if isinstance(message_id, str) else ""
        out: list[Any] = []
        content = message.get("content")
        for block in content if isinstance(content, list) else ():
            if not isinstance(block, Mapping):
                continue
            if block.get("type") == "text" and isinstance(block.get("text"), str):
                seen = self._seen.get(message_id, 0) + 1
                self._seen[message_id] = seen
                if seen > self._streamed.get(message_id, 0) and block["text"]:
                    out += [Say(f"{message_id}:whole{seen}", block["text"]), EndMessage()]
            elif block.get("type") == "tool_use" and isinstance(block.get("id"), str):
                arguments = json.dumps(block.get("input") or {})
                out.append(Call(block["id"], str(block.get("name") or "tool"), arguments))
        return out


def _count(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _input_tokens(usage: Any) -> tuple[int, int]:
    """``(input, cached)`` of an Anthropic ``usage``: ``input_tokens`` counts only what
    was neither read from nor written to the cache, so both are added back."""
    if not isinstance(usage, Mapping):
        return 0, 0
    keys = ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")
    parts: list[int] = []
    for key in keys:
        value = usage.get(key)
        parts.append(value if _count(value) else 0)
    return sum(parts), parts[1]


def _control_request(line: Mapping[str, Any]) -> list[Any]:
    request_id, request = line.get("request_id"), line.get("request")
    if not isinstance(request_id, str) or not isinstance(request, Mapping):
        return []
    return [ControlRequest(request_id, str(request.get("subtype")), request)]


def _control_response(line: Mapping[str, Any]) -> list[Any]:
    response = line.get("response")
    if not isinstance(response, Mapping) or not isinstance(response.get("request_id"), str):
        return []
    ok = response.get("subtype") == "success"
    body = response.get("response") if ok else response.get("error")
    return [ControlResponse(response["request_id"], ok, body)]


def _tool_results(message: Mapping[str, Any]) -> list[Any]:
    content = message.get("content")
    out: list[Any] = []
    for block in content if isinstance(content, list) else ():
        if not isinstance(block, Mapping) or block.get("type") != "tool_result":
            continue
        call_id = block.get("tool_use_id")
        if not isinstance(call_id, str):
            continue
        text = _result_text(block.get("content"))
        if block.get("is_error") and not text.startswith("Error:"):
            text = f"Error: {text}"
        out.append(CallOutput(call_id, text))
    return out


def _result_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [
            str(b.get("text"))
            for b in content
            if isinstance(b, Mapping) and b.get("type") == "text" and b.get("text") is not None
        ]
        return "\n".join(parts)
    return "" if content is None else json.dumps(content)


def _result_error(line: Mapping[str, Any]) -> str | None:
    """``None`` for a successful ``result``, else what went wrong."""
    if line.get("subtype") == "success" and not line.get("is_error"):
        return None
    errors = line.get("errors")
    if isinstance(errors, list) and errors:
        return "Claude Code: " + "; ".join(str(e) for e in errors)
    result = line.get("result")
    if isinstance(result, str) and result:
        return f"Claude Code: {result}"
    return f"Claude Code ended the turn with {line.get('subtype') or 'an error'}"
