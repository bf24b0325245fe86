"""FakeResponses: a scripted OpenAI Responses API, enough for the Codex CLI.

Routes:

- ``POST /v1/responses`` — the next scripted reply; streamed as the real event
  sequence when ``stream`` is true (``response.created``, ``response.in_progress``,
  per output item ``response.output_item.added``, for a message
  ``response.content_part.added`` / ``response.output_text.delta`` /
  ``response.output_text.done`` / ``response.content_part.done``, for a function call
  ``response.function_call_arguments.delta`` / ``…arguments.done``, for a custom
  (freeform) tool call ``response.custom_tool_call_input.delta`` / ``…input.done``, then
  ``response.output_item.done``; last ``response.completed``), each event with its
  ``sequence_number``; else one ``response`` object.
- ``GET /v1/models`` — a fixed OpenAI-style model list.

Everything else is a 404 with OpenAI's error body.
"""

from __future__ import annotations

import json
import time
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

__all__ = ["FakeResponses"]

_MODELS = ("gpt-5-codex", "gpt-5", "gpt-5-mini")

_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "invalid_api_key",
    404: "not_found",
    413: "request_too_large",
    429: "rate_limit_exceeded",
}
_OUTPUT_KINDS = ("function_call_output", "custom_tool_call_output")
_CALL_STREAMS = {
    "function_call": ("arguments", "response.function_call_arguments"),
    "custom_tool_call": ("input", "response.custom_tool_call_input"),
}


class FakeResponses(ScriptedFake):
    """A scripted OpenAI Responses endpoint (streaming and not) for tests.

    :meth:`serve` yields ``http://127.0.0.1:PORT/v1`` — the ``base_url`` of a Codex
    ``model_providers`` entry or of an OpenAI SDK client. Shell uses
    (:class:`FakeShell`) call the first of ``exec_command``, ``shell_command`` and
    ``shell`` that the request's ``tools`` list offers.

    A :class:`FakeToolUse` of a tool the request does not offer directly is looked up
    in the namespaces it offers (``{"type": "namespace", "tools": [...]}``, and those a
    ``tool_search_output`` in its input loaded): found, the call names its
    ``namespace``. Not found, but the request offers Codex's ``tool_search``: the
    answer is a ``tool_search_call`` for the tool, and the same turn answers the next
    request (which carries the search's output) — Codex keeps MCP tools behind that
    search.

    Example::

        fake = FakeResponses()
        fake.reply_shell("echo hi")
        fake.reply_text("It printed hi.")
        async with fake.serve() as base_url:
            ...  # codex with model_providers.fake.base_url = base_url
        assert "hi" in fake.tool_results()[0].output
    """

    models: ClassVar[tuple[str, ...]] = _MODELS
    """What ``GET /v1/models`` lists. Requests may name any model; it is echoed."""

    _name: ClassVar[str] = "FakeResponses"

    def _base_url(self, root: str) -> str:
        return f"{root}/v1"

    def _respond(self, method: str, path: str, raw_body: bytes) -> Rendered:
        path = path.rstrip("/")
        if method == "GET" and path == "/v1/models":
            data = [
                {"id": name, "object": "model", "created": 0, "owned_by": "omnigent"}
                for name in self.models
            ]
            return json_rendered(200, {"object": "list", "data": data})
        if method != "POST" or path != "/v1/responses":
            return self._no_route(method, path)
        parsed = self._read_body(raw_body)
        if isinstance(parsed, Rendered):
            return parsed
        return self._answer(parsed, len(raw_body))

    def _answer_body(self, turn: FakeTurn, body: dict[str, Any], size: int) -> dict[str, Any] | str:
        """The Responses ``response`` object for ``turn``."""
        output = self._output(turn, body)
        if isinstance(output, str):
            return output
        return {
            "id": f"resp_fake{self._next_id('response')}",
            "object": "response",
            "created_at": int(time.time()),
            "status": "completed",
            "error": None,
            "incomplete_details": None,
            "model": str(body.get("model")),
            "output": output,
            "parallel_tool_calls": body.get("parallel_tool_calls", True),
            "tool_choice": body.get("tool_choice", "auto"),
            "tools": [],
            "usage": _usage(size // 4, output),
        }

    def _frames(self, answer: dict[str, Any], chunk_size: int, *, stall: bool) -> list[bytes]:
        events = list(_stream_events(answer, chunk_size))
        if stall:
            events = events[:-1]  # no response.completed
        return [_sse(number, event) for number, event in enumerate(events)]

    def _error(self, reply: ErrorReply) -> Rendered:
        status = reply.status
        kind = _ERROR_TYPES.get(status, "server_error" if status >= 500 else "api_error")
        body = {"error": {"message": reply.message, "type": kind, "param": None, "code": kind}}
        return error_rendered(status, body, reply.retry_after)

    def _output(self, turn: FakeTurn, body: dict[str, Any]) -> list[dict[str, Any]] | str:
        searched = _searched(body)
        wanted = [
            tool.name
            for tool in turn.tools
            if isinstance(tool, FakeToolUse)
            and tool.name not in searched
            and _locate(tool.name, body) is None
        ]
        if wanted and any(t.get("type") == "tool_search" for t in _tools(body)):
            self._queue.appendleft(turn)  # answers the next request, once it is found
            return [self._search_item(name) for name in wanted]
        output: list[dict[str, Any]] = []
        if turn.text is not None:
            content = [{"type": "output_text", "text": turn.text, "annotations": []}]
            output.append(
                {
                    "type": "message",
                    "id": f"msg_fake{self._next_id('message')}",
                    "status": "completed",
                    "role": "assistant",
                    "content": content,
                }
            )
        for tool in turn.tools:
            if isinstance(tool, FakeShell):
                resolved = _shell_call(tool, _tool_names(body))
                if resolved is None:
                    offered = sorted(_tool_names(body))
                    return f"FakeShell needs a shell tool; offered: {offered}"
                tool = resolved
            output.append(self._call_item(tool, body))
        return output

    def _search_item(self, name: str) -> dict[str, Any]:
        number = self._next_id("tool")
        return {
            "type": "tool_search_call",
            "id": f"ts_fake{number}",
            "call_id": f"call_search{number}",
            "execution": "client",
            "arguments": {"query": name, "limit": 8},
            "status": "completed",
        }

    def _call_item(self, tool: FakeToolUse, body: dict[str, Any]) -> dict[str, Any]:
        number = self._next_id("tool")
        custom = _custom_tool_names(body)
        namespace, name = _locate(tool.name, body) or (None, tool.name)
        text = tool.input if isinstance(tool.input, str) else json.dumps(tool.input)
        call_id = tool.call_id or f"call_fake{number}"
        if name in custom:
            return {
                "type": "custom_tool_call",
                "id": f"ctc_fake{number}",
                "call_id": call_id,
                "name": name,
                "input": text,
                "status": "completed",
            }
        item = {
            "type": "function_call",
            "id": f"fc_fake{number}",
            "call_id": call_id,
            "name": name,
            "arguments": text,
            "status": "completed",
        }
        if namespace is not None:
            item["namespace"] = namespace
        return item

    def _tool_results_in(self, body: dict[str, Any]) -> Iterable[FakeToolResult]:
        items = body.get("input")
        for item in items if isinstance(items, list) else []:
            if isinstance(item, dict) and item.get("type") in _OUTPUT_KINDS:
                yield FakeToolResult(str(item.get("call_id")), _text_of(item.get("output")))


def _shell_call(shell: FakeShell, offered: set[str]) -> FakeToolUse | None:
    """The call that runs ``shell.command`` with the first known shell tool offered."""
    if "exec_command" in offered:
        return FakeToolUse("exec_command", {"cmd": shell.command}, shell.call_id)
    if "shell_command" in offered:
        return FakeToolUse("shell_command", {"command": shell.command}, shell.call_id)
    if "shell" in offered:
        return FakeToolUse("shell", {"command": ["bash", "-lc", shell.command]}, shell.call_id)
    return None


def _stream_events(response: dict[str, Any], chunk_size: int) -> Iterator[dict[str, Any]]:
    """The Responses streaming events for a whole ``response``, in the real order."""
    opening = {**response, "status": "in_progress", "output": [], "usage": None}
    yield {"type": "response.created", "response": opening}
    yield {"type": "response.in_progress", "response": opening}
    for index, item in enumerate(response["output"]):
        where = {"item_id": item["id"], "output_index": index}
        if item["type"] == "message":
            added = {**item, "status": "in_progress", "content": []}
            yield {"type": "response.output_item.added", "output_index": index, "item": added}
            yield from _text_events(item["content"][0], where, chunk_size)
        elif item["type"] not in _CALL_STREAMS:  # a tool search: no deltas
            yield {"type": "response.output_item.added", "output_index": index, "item": item}
        else:
            # function_call streams `arguments`, custom_tool_call streams `input`
            field, prefix = _CALL_STREAMS[item["type"]]
            added = {**item, "status": "in_progress", field: ""}
            yield {"type": "response.output_item.added", "output_index": index, "item": added}
            for delta in fragments(item[field]):
                yield {"type": f"{prefix}.delta", **where, "delta": delta}
            yield {"type": f"{prefix}.done", **where, field: item[field]}
        yield {"type": "response.output_item.done", "output_index": index, "item": item}
    yield {"type": "response.completed", "response": response}


def _text_events(
    part: dict[str, Any], where: dict[str, Any], chunk_size: int
) -> Iterator[dict[str, Any]]:
    where = {**where, "content_index": 0}
    text = part["text"]
    yield {"type": "response.content_part.added", **where, "part": {**part, "text": ""}}
    for i in range(0, len(text), chunk_size):
        delta = text[i : i + chunk_size]
        yield {"type": "response.output_text.delta", **where, "delta": delta, "logprobs": []}
    yield {"type": "response.output_text.done", **where, "text": text, "logprobs": []}
    yield {"type": "response.content_part.done", **where, "part": part}


def _sse(number: int, event: dict[str, Any]) -> bytes:
    data = json.dumps({**event, "sequence_number": number})
    return f"event: {event['type']}\ndata: {data}\n\n".encode()


def _usage(input_tokens: int, output: list[dict[str, Any]]) -> dict[str, Any]:
    output_tokens = max(1, len(json.dumps(output)) // 4)
    return {
        "input_tokens": input_tokens,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": output_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": input_tokens + output_tokens,
    }


def _locate(name: str, body: dict[str, Any]) -> tuple[str | None, str] | None:
    """``(namespace, name)`` of the tool ``name`` as the request offers it — directly
    (namespace ``None``), in a namespace it lists, or in one a ``tool_search_output``
    in its input loaded — or ``None`` if it is not offered."""
    direct = _tool_names(body)
    found = offered_name(name, direct)
    if found in direct:
        return None, found
    namespaces = [t for t in _tools(body) if t.get("type") == "namespace"]
    items = body.get("input")
    for item in items if isinstance(items, list) else []:
        if isinstance(item, dict) and item.get("type") == "tool_search_output":
            loaded = item.get("tools")
            namespaces += (
                [t for t in loaded if isinstance(t, dict)] if isinstance(loaded, list) else []
            )
    for namespace in namespaces:
        members = namespace.get("tools")
        names = {
            str(t.get("name"))
            for t in (members if isinstance(members, list) else [])
            if isinstance(t, dict)
        }
        if name in names:
            return str(namespace.get("name")), name
    return None


def _searched(body: dict[str, Any]) -> set[str]:
    """What the conversation has searched for already (searched once, a tool still
    not found is called by its name, and the client says what it makes of that)."""
    items = body.get("input")
    out = set()
    for item in items if isinstance(items, list) else []:
        if isinstance(item, dict) and item.get("type") == "tool_search_call":
            arguments = item.get("arguments")
            if isinstance(arguments, dict) and isinstance(arguments.get("query"), str):
                out.add(arguments["query"])
    return out


def _tool_names(body: dict[str, Any]) -> set[str]:
    return {str(t["name"]) for t in _tools(body) if "name" in t}


def _custom_tool_names(body: dict[str, Any]) -> set[str]:
    return {str(t["name"]) for t in _tools(body) if "name" in t and t.get("type") == "custom"}


def _tools(body: dict[str, Any]) -> list[dict[str, Any]]:
    tools = body.get("tools")
    return [t for t in (tools if isinstance(tools, list) else []) if isinstance(t, dict)]


def _text_of(output: Any) -> str:
    if isinstance(output, str):
        return output
    if not isinstance(output, list):
        return ""
    return "".join(
        str(part.get("text", ""))
        for part in output
        if isinstance(part, dict) and part.get("type") in ("input_text", "output_text")
    )
