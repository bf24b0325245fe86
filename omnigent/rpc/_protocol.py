"""JSON-RPC 2.0 over a message stream: framing and dispatch, with no I/O.

This module is pure: it turns bytes and text into typed messages and back, ; the
bookkeeping of one connection (which ids are in flight either way, what to do with
each message) is :mod:`._dispatch`. The Trio shell that moves messages over a real stream is
:mod:`._connection`; the Agent Client Protocol on top is :mod:`omnigent.transports.acp._agent`.

Framing
    On stdio a message is one line of UTF-8 JSON (NDJSON); :class:`LineSplitter` cuts
    a byte stream into lines of *any* length up to ``max_line`` (64 MiB by default —
    there is no 64 KiB line limit, a known pain of other ACP agents). A line longer
    than that is skipped up to its newline and reported once as :data:`TOO_LARGE`, so
    the connection survives it. On a WebSocket a message is one text frame.

Decoding
    :func:`decode` turns one message into a :class:`Request`, :class:`Notification` or
    :class:`Response` — or into the error response to send back: ``-32700`` for text
    that is not JSON (``NaN``, lone surrogates and nesting deeper than
    :data:`MAX_DEPTH` included), ``-32600`` for JSON that is not a JSON-RPC message (a
    batch, a wrong ``jsonrpc``, a bad ``id`` or ``method``). Nothing a client sends
    makes it raise.

Dispatch
    :class:`Dispatcher` decides what each decoded message means for the connection:
    run a request (unless its method is unknown, ``-32601``; its id is already in
    flight, ``-32600``; or too many are, :data:`SERVER_BUSY`), run a notification,
    cancel an in-flight request (``$/cancel_request``), deliver a response to the
    outgoing request waiting for it, or drop it.

Error handling: handlers raise :class:`RpcError` to answer an error; the shell answers
anything else as ``-32603`` with a fixed message and logs the cause.
"""

from __future__ import annotations

import json
from collections.abc import Collection
from typing import Any, Final, TypeAlias

import attrs

from ..model import finite_float

__all__ = [
    "CANCEL_REQUEST",
    "INTERNAL_ERROR",
    "INVALID_PARAMS",
    "INVALID_REQUEST",
    "MAX_DEPTH",
    "MAX_MESSAGE_BYTES",
    "METHOD_NOT_FOUND",
    "PARSE_ERROR",
    "REQUEST_CANCELLED",
    "RESOURCE_NOT_FOUND",
    "SERVER_BUSY",
    "TOO_LARGE",
    "Incoming",
    "LineSplitter",
    "Notification",
    "Request",
    "RequestId",
    "Response",
    "RpcError",
    "decode",
    "encode",
    "error_response",
    "notification",
    "request",
    "response",
    "valid_id",
]

PARSE_ERROR: Final = -32700
INVALID_REQUEST: Final = -32600
METHOD_NOT_FOUND: Final = -32601
INVALID_PARAMS: Final = -32602
INTERNAL_ERROR: Final = -32603
REQUEST_CANCELLED: Final = -32800
# ACP's "resource not found" (an unknown session).
RESOURCE_NOT_FOUND: Final = -32002
# Ours, in the range JSON-RPC leaves to servers: too many requests in flight.
SERVER_BUSY: Final = -32050

CANCEL_REQUEST: Final = "$/cancel_request"
MAX_DEPTH: Final = 64
MAX_MESSAGE_BYTES: Final = 64 * 1024 * 1024

RequestId: TypeAlias = "int | str | None"


class _TooLarge:
    def __repr__(self) -> str:
        return "TOO_LARGE"


TOO_LARGE: Final = _TooLarge()
"""What a framer yields in place of a message longer than its limit."""


class RpcError(Exception):
    """An error answer: ``code``, a ``message`` safe to show, optional ``data``."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            out["data"] = self.data
        return out

    @classmethod
    def invalid_params(cls, message: str, data: Any = None) -> RpcError:
        return cls(INVALID_PARAMS, f"Invalid params: {message}", data)


# -- messages ---------------------------------------------------------------------------


@attrs.frozen
class Request:
    """A call that wants an answer."""

    id: RequestId
    method: str
    params: Any = None


@attrs.frozen
class Notification:
    """A call that wants none."""

    method: str
    params: Any = None


@attrs.frozen
class Response:
    """The answer to one of our requests: ``result``, or ``error`` (``{code, message}``)."""

    id: RequestId
    result: Any = None
    error: dict[str, Any] | None = None


Incoming: TypeAlias = Request | Notification | Response


def request(request_id: RequestId, method: str, params: Any = None) -> dict[str, Any]:
    out: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        out["params"] = params
    return out


def notification(method: str, params: Any = None) -> dict[str, Any]:
    out: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        out["params"] = params
    return out


def response(request_id: RequestId, result: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


def error_response(
    request_id: RequestId, code: int, message: str, data: Any = None
) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "error": RpcError(code, message, data).to_dict()}


def encode(message: dict[str, Any]) -> str:
    """One message as compact JSON text (no newline).

    Raises:
        TypeError, ValueError: the message holds something JSON cannot carry (a bug
        of whoever built it).
    """
    return json.dumps(message, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


# -- decoding ---------------------------------------------------------------------------


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _too_deep(value: Any, limit: int) -> bool:
    """Whether containers nest deeper than ``limit`` (iteratively: no recursion)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        current, depth = stack.pop()
        if isinstance(current, dict):
            children: Collection[Any] = current.values()
        elif isinstance(current, list):
            children = current
        else:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False


def valid_id(value: Any) -> bool:
    """Whether ``value`` can be a request id: a string, an integer (no bool), or null."""
    if isinstance(value, bool):
        return False
    if isinstance(value, float):
        return False  # ids "SHOULD NOT contain fractional parts": we take none
    return value is None or isinstance(value, int | str)


def _id_of(data: Any) -> RequestId:
    if isinstance(data, dict) and valid_id(data.get("id")):
        found: RequestId = data.get("id")
        return found
    return None


def decode(raw: str | bytes) -> Incoming | dict[str, Any]:
    """One message, or the error response to send back for it.

    Never raises: whatever ``raw`` holds, the answer is a message or an error reply.
    """
    try:
        text = raw.decode("utf-8") if isinstance(raw, bytes) else raw
        data = json.loads(text, parse_constant=_no_constant, parse_float=finite_float)
        # A lone surrogate ("\\ud800") decodes but can never be sent on or stored.
        json.dumps(data, ensure_ascii=False).encode("utf-8")
    except RecursionError:
        return error_response(None, PARSE_ERROR, "Parse error: nested too deeply")
    except (UnicodeError, ValueError) as exc:
        return error_response(None, PARSE_ERROR, f"Parse error: {_short(exc)}")
    if _too_deep(data, MAX_DEPTH):
        return error_response(
            _id_of(data), INVALID_REQUEST, f"Invalid Request: nested deeper than {MAX_DEPTH}"
        )
    return _message(data)


def _short(exc: BaseException) -> str:
    text = str(exc)
    return text if len(text) <= 200 else text[:199] + "…"


def _invalid(data: Any, why: str) -> dict[str, Any]:
    return error_response(_id_of(data), INVALID_REQUEST, f"Invalid Request: {why}")


def _message(data: Any) -> Incoming | dict[str, Any]:
    if isinstance(data, list):
        return _invalid(None, "batches are not supported")
    if not isinstance(data, dict):
        return _invalid(None, "a message must be a JSON object")
    if data.get("jsonrpc") != "2.0":
        return _invalid(data, 'jsonrpc must be "2.0"')
    if "id" in data and not valid_id(data["id"]):
        return _invalid(None, "id must be a string, an integer or null")
    if "method" in data:
        method = data["method"]
        if not isinstance(method, str) or not method:
            return _invalid(data, "method must be a non-empty string")
        params = data.get("params")
        if params is not None and not isinstance(params, dict | list):
            return _invalid(data, "params must be an object or an array")
        if "id" in data:
            return Request(data["id"], method, params)
        return Notification(method, params)
    if "id" in data and ("result" in data) != ("error" in data):
        error = data.get("error")
        if "error" in data and not isinstance(error, dict):
            error = {"code": INTERNAL_ERROR, "message": "malformed error"}
        return Response(data["id"], data.get("result"), error)
    return _invalid(data, "neither a request, a notification nor a response")


# -- framing ----------------------------------------------------------------------------


class LineSplitter:
    """Cuts a byte stream into lines (NDJSON), any length up to ``max_line`` bytes.

    Blank lines are skipped and a trailing ``\\r`` is dropped. A line longer than
    ``max_line`` is discarded up to its newline and reported as :data:`TOO_LARGE`.
    Memory is bounded by ``max_line`` plus the chunk being fed.
    """

    def __init__(self, max_line: int = MAX_MESSAGE_BYTES) -> None:
        self.max_line = max_line
        self._parts: list[bytes] = []
        self._size = 0
        self._discarding = False

    def feed(self, data: bytes) -> list[bytes | _TooLarge]:
        """The complete lines ``data`` finishes (with what came before it)."""
        out: list[bytes | _TooLarge] = []
        start = 0
        while (end := data.find(b"\n", start)) >= 0:
            self._take(data[start:end], out)
            self._finish_line(out)
            start = end + 1
        self._take(data[start:], out)
        return out

    def end(self) -> list[bytes | _TooLarge]:
        """At end of stream: the last line, if it had no newline."""
        out: list[bytes | _TooLarge] = []
        self._finish_line(out)
        return out

    def _take(self, piece: bytes, out: list[bytes | _TooLarge]) -> None:
        if self._discarding or not piece:
            return
        if self._size + len(piece) > self.max_line:
            self._parts, self._size, self._discarding = [], 0, True
            out.append(TOO_LARGE)
            return
        self._parts.append(piece)
        self._size += len(piece)

    def _finish_line(self, out: list[bytes | _TooLarge]) -> None:
        line = b"".join(self._parts)
        self._parts, self._size, was_discarding = [], 0, self._discarding
        self._discarding = False
        if was_discarding:
            return
        line = line.removesuffix(b"\r")
        if line.strip():
            out.append(line)
