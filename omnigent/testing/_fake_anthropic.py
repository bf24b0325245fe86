"""FakeAnthropic: a scripted Anthropic Messages API, enough for the Claude Code CLI.

Routes (query strings such as Claude Code's ``?beta=true`` are ignored):

- ``POST /v1/messages`` — the next scripted reply; streamed as the real event
  sequence when ``stream`` is true (``message_start``, ``ping``, per content block
  ``content_block_start`` / ``content_block_delta`` (``text_delta`` or
  ``input_json_delta``) / ``content_block_stop``, ``message_delta`` with the stop
  reason, ``message_stop``), else one ``message`` object.
- ``POST /v1/messages/count_tokens`` — ``{"input_tokens": N}``, a size estimate; it
  consumes no reply and is not logged in ``requests``.
- ``GET /v1/models`` and ``GET /v1/models/{id}`` — a fixed model list.

Everything else is a 404 with Anthropic's error body.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any, ClassVar

from ._mockllm import ErrorReply
from ._script import (
    FakeShell,
    FakeToolResult,
    FakeToolUse,
    FakeTurn,
    ScriptedFake,
    offered_name,
)
from ._serve import Rendered, error_rendered, json_rendered
from ._wire import fragments

__all__ = ["FakeAnthropic"]

_MODELS = ("claude-sonnet-4-5", "claude-opus-4-1", "claude-haiku-4-5")

_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    529: "overloaded_error",
}


class FakeAnthropic(ScriptedFake):
    """A scripted Anthropic Messages endpoint (streaming and not) for tests.

    :meth:`serve` yields ``http://127.0.0.1:PORT`` — no ``/v1``, as
    ``ANTHROPIC_BASE_URL`` and the Anthropic SDKs expect. Shell uses
    (:class:`FakeShell`) become ``Bash`` tool uses.

    Example::

        fake = FakeAnthropic()
        fake.reply_shell("echo hi")            # the model asks to run a command
        fake.reply_text("It printed hi.")      # then answers
        async with fake.serve() as base_url:
            ...  # run `claude -p` with ANTHROPIC_BASE_URL=base_url
        assert fake.tool_results()[0].output == "hi"
    """

    models: ClassVar[tuple[str, ...]] = _MODELS
    """What ``GET /v1/models`` lists. Requests may name any model; it is echoed."""

    _name: ClassVar[str] = "FakeAnthropic"

    def _base_url(self, root: str) -> str:
        return root

    def _respond(self, method: str, path: str, raw_body: bytes) -> Rendered:
        path = path.rstrip("/")
        if method == "GET" and path == "/v1/models":
            data = [_model(name) for name in self.models]
            ends = {"first_id": data[0]["id"], "last_id": data[-1]["id"]}
            return json_rendered(200, {"data": data, "has_more": False, **ends})
        if method == "GET" and path.startswith("/v1/models/"):
            name = path.removeprefix("/v1/models/")
            if name in self.models:
                return json_rendered(200, _model(name))
            return self._error(ErrorReply(404, f"model: {name}"))
        if method != "POST" or path not in ("/v1/messages", "/v1/messages/count_tokens"):
            return self._no_route(method, path)
        parsed = self._read_body(raw_body)
        if isinstance(parsed, Rendered):
            return parsed
        if path.endswith("/count_tokens"):
            return json_rendered(200, {"input_tokens": _estimate_tokens(raw_body)})
        return self._answer(parsed, len(raw_body))

    def _answer_body(self, turn: FakeTurn, body: dict[str, Any], size: int) -> dict[str, Any] | str:
        """The Messages ``message`` object for ``turn``."""
        blocks = self._blocks(turn, body)
        if isinstance(blocks, str):
            return blocks
        return {
            "id": f"msg_fake{self._next_id('message')}",
            "type": "message",
            "role": "assistant",
            "model": str(body.get("model")),
            "content": blocks,
            "stop_reason": "tool_use" if turn.tools else "end_turn",
            "stop_sequence": None,
            "usage": _usage(max(1, size // 4), blocks),
        }

    def _frames(self, answer: dict[str, Any], chunk_size: int, *, stall: bool) -> list[bytes]:
        events = list(_stream_events(answer, chunk_size))
        if stall:
            events = events[:-2]  # no message_delta, no message_stop
        return [_sse(event) for event in events]

    def _error(self, reply: ErrorReply) -> Rendered:
        kind = _ERROR_TYPES.get(reply.status, "api_error")
        body = {"type": "error", "error": {"type": kind, "message": reply.message}}
        return error_rendered(reply.status, body, reply.retry_after)

    def _blocks(self, turn: FakeTurn, body: dict[str, Any]) -> list[dict[str, Any]] | str:
        blocks: list[dict[str, Any]] = []
        if turn.text is not None:
            blocks.append({"type": "text", "text": turn.text})
        for tool in turn.tools:
            if isinstance(tool, FakeShell):
                if "Bash" not in _tool_names(body):
                    return f"FakeShell needs a Bash tool; offered: {sorted(_tool_names(body))}"
                tool = FakeToolUse("Bash", {"command": tool.command}, tool.call_id)
            if isinstance(tool.input, str):
                return f"tool {tool.name}: Messages tool inputs are JSON objects, not text"
            call_id = tool.call_id or f"toolu_fake{self._next_id('tool'):02d}"
            name = offered_name(tool.name, _tool_names(body))
            blocks.append(
                {"type": "tool_use", "id": call_id, "name": name, "input": dict(tool.input)}
            )
        return blocks

    def _tool_results_in(self, body: dict[str, Any]) -> Iterable[FakeToolResult]:
        for message in _as_list(body.get("messages")):
            if not isinstance(message, dict):
                continue
            for block in _as_list(message.get("content")):
                if isinstance(block, dict) and block.get("type") == "tool_result":
                    yield FakeToolResult(
                        str(block.get("tool_use_id")),
                        _text_of(block.get("content")),
                        block.get("is_error") is True,
                    )


def _stream_events(message: dict[str, Any], chunk_size: int) -> Iterator[dict[str, Any]]:
    """The Messages streaming events for a whole ``message``, in the real order."""
    start = {**message, "content": [], "stop_reason": None}
    start["usage"] = {**message["usage"], "output_tokens": 1}
    yield {"type": "message_start", "message": start}
    yield {"type": "ping"}
    for index, block in enumerate(message["content"]):
        if block["type"] == "text":
            opening: dict[str, Any] = {"type": "text", "text": ""}
            text = block["text"]
            deltas = [
                {"type": "text_delta", "text": text[i : i + chunk_size]}
                for i in range(0, len(text), chunk_size)
            ]
        else:
            opening = {**block, "input": {}}
            deltas = [
                {"type": "input_json_delta", "partial_json": part}
                for part in ["", *fragments(json.dumps(block["input"]))]
            ]
        yield {"type": "content_block_start", "index": index, "content_block": opening}
        for delta in deltas:
            yield {"type": "content_block_delta", "index": index, "delta": delta}
        yield {"type": "content_block_stop", "index": index}
    yield {
        "type": "message_delta",
        "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
        "usage": {"output_tokens": message["usage"]["output_tokens"]},
    }
    yield {"type": "message_stop"}


def _sse(event: dict[str, Any]) -> bytes:
    return f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode()


def _usage(input_tokens: int, blocks: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "input_tokens": input_tokens,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
        "output_tokens": max(1, len(json.dumps(blocks)) // 4),
    }


def _estimate_tokens(raw_body: bytes) -> int:
    return max(1, len(raw_body) // 4)


def _model(name: str) -> dict[str, Any]:
    return {
        "type": "model",
        "id": name,
        "display_name": name,
        "created_at": "2025-01-01T00:00:00Z",
    }


def _tool_names(body: dict[str, Any]) -> set[str]:
    return {str(t.get("name")) for t in _as_list(body.get("tools")) if isinstance(t, dict)}


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(
        str(part.get("text", ""))
        for part in _as_list(content)
        if isinstance(part, dict) and part.get("type") == "text"
    )
