"""The runtime's side of the external harness protocol, without I/O.

An external harness answers a turn with an SSE stream (``API.md``, "External harness
protocol"). This module turns the raw bytes of that stream into decoded frames, and
the runtime's requests into the flat bodies the harness takes:

* :class:`FrameReader` parses raw chunks (whatever their boundaries — the hot path
  reads ``aiter_raw``, not lines) and **coalesces**: consecutive
  ``response.output_text.delta`` frames of one item that arrive together become one
  frame, so a 20,000-delta stream costs a few hundred publishes, not 20,000.
* :func:`turn_body`, :func:`injection_body` and friends build the request bodies.
* :func:`elicitation_params` and :func:`error_message` read what a harness sent.

Frames are plain dicts (the wire is JSON); the relay in
:mod:`omnigent.harnesses.external._harness` acts on them.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

from ...errors import HarnessError, InvalidInput
from ...model import MAX_DEPTH, ElicitationParams, Item, MessageItem, check_depth, unstructure
from .._chat_sse import SSEFrames
from ..base import ToolSchema, TurnRequest

__all__ = [
    "DELTA",
    "FrameReader",
    "elicitation_params",
    "error_message",
    "injection_body",
    "tool_entry",
    "turn_body",
]

DELTA = "response.output_text.delta"
_MAX_FRAME = 8 << 20  # a frame larger than this is a broken harness, not a message


class FrameReader:
    """Raw SSE bytes in, decoded (and coalesced) frames out.

    Raises:
        HarnessError: from :meth:`feed`, for a frame that is not a JSON object, one
            nested deeper than ``MAX_DEPTH``, or a single frame over 8 MiB.
    """

    def __init__(self) -> None:
        self._frames = SSEFrames()
        self._pending = 0

    def feed(self, chunk: bytes) -> list[dict[str, Any]]:
        """The frames completed by ``chunk``, adjacent deltas of one item merged."""
        self._pending += len(chunk)
        payloads = self._frames.feed(chunk)
        if payloads:
            self._pending = 0
        elif self._pending > _MAX_FRAME:
            raise HarnessError("the external harness sent an SSE frame larger than 8 MiB")
        out: list[dict[str, Any]] = []
        for payload in payloads:
            if payload == b"[DONE]":
                continue
            try:
                frame = json.loads(payload)
                check_depth(frame)  # the one limit every boundary applies
            except (RecursionError, InvalidInput):
                raise HarnessError(
                    f"the external harness sent a frame nested deeper than {MAX_DEPTH} levels"
                ) from None
            except ValueError:
                raise HarnessError("the external harness sent a frame that is not JSON") from None
            if not isinstance(frame, dict):
                raise HarnessError("the external harness sent a frame that is not an object")
            _merge(out, frame)
        return out


def _merge(out: list[dict[str, Any]], frame: dict[str, Any]) -> None:
    if frame.get("type") == DELTA and out:
        last = out[-1]
        delta = frame.get("delta")
        if (
            last.get("type") == DELTA
            and last.get("item_id") == frame.get("item_id")
            and isinstance(delta, str)
            and isinstance(last.get("delta"), str)
        ):
            last["delta"] += delta
            return
    if frame.get("type") == DELTA:
        frame = dict(frame)  # it may be extended in place by later deltas
    out.append(frame)


def tool_entry(schema: ToolSchema) -> dict[str, Any]:
    """A tool as the harness is offered it: a Responses-style function schema."""
    return {
        "type": "function",
        "name": schema.name,
        "description": schema.description,
        "parameters": dict(schema.parameters),
    }


def _item_dicts(items: Iterable[Item]) -> list[dict[str, Any]]:
    return [unstructure(item, Item) for item in items]


def turn_body(request: TurnRequest) -> dict[str, Any]:
    """The ``message`` body that starts a turn: the whole history, then the input."""
    return {
        "type": "message",
        "role": "user",
        "content": _item_dicts([*request.history, *request.input]),
        "model": request.model,
        "instructions": request.instructions,
        "tools": [tool_entry(t) for t in request.tools],
        "response_id": request.response_id,
    }


def injection_body(messages: Sequence[MessageItem]) -> dict[str, Any]:
    """The ``message`` body of messages that arrived mid-turn (answered ``204``)."""
    return {"type": "message", "role": "user", "content": _item_dicts(messages)}


def elicitation_params(raw: Any) -> ElicitationParams:
    """Elicitation params from a harness's ``response.elicitation_request``.

    ``message`` is required; ``mode`` defaults to ``form``, ``phase`` to
    ``harness_elicitation``; ``requestedSchema``, ``url``, ``tool_name`` and
    ``tool_input`` are kept when they have the right type.

    Raises:
        HarnessError: ``raw`` is not an object with a string ``message``.
    """
    if not isinstance(raw, Mapping) or not isinstance(raw.get("message"), str):
        raise HarnessError("the external harness sent an elicitation without a message")
    mode: Literal["form", "url"] = "url" if raw.get("mode") == "url" else "form"
    phase = raw.get("phase")
    if not isinstance(phase, str):
        phase = "harness_elicitation"

    def typed(key: str, kind: type) -> Any:
        value = raw.get(key)
        return value if isinstance(value, kind) else None

    return ElicitationParams(
        mode=mode,
        message=raw["message"],
        phase=phase,
        requestedSchema=typed("requestedSchema", dict),
        url=typed("url", str),
        tool_name=typed("tool_name", str),
        tool_input=typed("tool_input", dict),
    )


def error_message(frame: Mapping[str, Any], default: str) -> str:
    """The error message a ``response.failed`` / ``error`` frame carries."""
    for holder in (frame, frame.get("response")):
        if isinstance(holder, Mapping):
            error = holder.get("error")
            if isinstance(error, Mapping) and isinstance(error.get("message"), str):
                return str(error["message"])
            if isinstance(error, str):
                return error
    return default
