"""Validation of what clients send in: ``{type, data}`` events and message content.

Everything is checked here, before any side effect, so bad input changes nothing and
its error names the field (``data.content[0].type``).
"""

from __future__ import annotations

import types
from collections.abc import Mapping, Sequence
from typing import Any, Final, Literal

import attrs

from ..._gc import note_large_input
from ...errors import InvalidInput, PayloadTooLarge
from ...model import ContentBlock, InputImage, InputText, structure, wire_schema

__all__ = [
    "EVENT_DATA",
    "EVENT_TYPES",
    "MAX_MESSAGE_BYTES",
    "ApprovalData",
    "InboundEvent",
    "McpElicitationData",
    "check_message_bytes",
    "message_bytes",
    "parse_event",
    "parse_message_content",
]


@attrs.frozen
class _MessageData:
    """``message``: a user message; ``input_text`` and ``input_image`` blocks only."""

    content: tuple[ContentBlock, ...] = attrs.field(metadata=wire_schema({"minItems": 1}))
    role: Literal["user"] = "user"


@attrs.frozen
class _EmptyData:
    """``interrupt`` / ``stop_session``: no fields (``data`` may be left out)."""


@attrs.frozen
class ApprovalData:
    """``approval``: answer an elicitation (as the resolve route does)."""

    elicitation_id: str
    action: Literal["accept", "decline", "cancel"]
    content: Any = None


@attrs.frozen
class McpElicitationData:
    """``mcp_elicitation``: ask the person a question (MCP's elicitation request)."""

    message: str
    requestedSchema: dict[str, Any] | None = None


_KINDS: dict[str, type[Any]] = {
    "message": _MessageData,
    "interrupt": _EmptyData,
    "stop_session": _EmptyData,
    "approval": ApprovalData,
    "mcp_elicitation": McpElicitationData,
}
EVENT_TYPES = tuple(_KINDS)
EVENT_DATA: Mapping[str, type[Any]] = types.MappingProxyType(_KINDS)
"""The attrs class each inbound event type's ``data`` is structured into (read-only).

``data`` may be left out (or ``null``) when that class has no required field."""


@attrs.frozen
class InboundEvent:
    """A validated inbound event."""

    type: str
    role: str = "user"
    content: tuple[ContentBlock, ...] = ()
    data: Any = None


def _check_user_blocks(blocks: Sequence[ContentBlock], root: str) -> None:
    if not blocks:
        raise InvalidInput.at(root, "must contain at least one content block")
    for index, block in enumerate(blocks):
        if not isinstance(block, InputText | InputImage):
            raise InvalidInput.at(
                f"{root}[{index}].type", "a user message takes input_text or input_image blocks"
            )


MAX_MESSAGE_BYTES: Final = 8 * 1024 * 1024
"""The largest message a session takes by default (8 MiB of text and inline images;
``open_runtime(max_message_bytes=...)``, ``serve --max-message-bytes``)."""


def message_bytes(blocks: Sequence[ContentBlock]) -> int:
    """The UTF-8 size of a message's text and inline image URLs (``file_id`` images are
    stored once as files, and count nothing here)."""
    total = 0
    for block in blocks:
        text = (block.image_url or "") if isinstance(block, InputImage) else block.text
        total += len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))
    return total


def check_message_bytes(blocks: Sequence[ContentBlock], limit: int, *, root: str) -> None:
    """Refuse a message larger than ``limit`` bytes.

    Every message is kept — in the store, in the history a session's turns are given,
    in the history cache — so its size is bounded before anything is written. A
    message taken is counted towards the server's next full collection
    (:func:`omnigent._gc.note_large_input`).

    Raises:
        PayloadTooLarge: (413) naming ``root`` and the limit.
    """
    size = message_bytes(blocks)
    if size > limit:
        raise PayloadTooLarge(
            f"{root}: a message is at most {limit} bytes of text and inline images, "
            f"this one is {size}; upload large images as files (input_image with file_id)"
        )
    note_large_input(size)  # a server frees what large messages leave sooner


def parse_message_content(content: Any, *, root: str) -> tuple[ContentBlock, ...]:
    """User message content from a string or a list of blocks (dicts or block objects).

    Raises:
        InvalidInput: naming the offending block field under ``root``.
    """
    if isinstance(content, str):
        blocks: tuple[ContentBlock, ...] = (InputText(content),)
    elif isinstance(content, Sequence) and all(
        isinstance(b, InputText | InputImage) for b in content
    ):
        blocks = tuple(content)
    else:
        blocks = structure(content, tuple[ContentBlock, ...], root=root)
    _check_user_blocks(blocks, root)
    return blocks


def parse_event(type: Any, data: Any) -> InboundEvent:
    """Validate an inbound ``{type, data}`` event.

    Raises:
        InvalidInput: at ``type`` for an unknown type, at ``data…`` for a bad body.
    """
    if not isinstance(type, str) or type not in _KINDS:
        expected = ", ".join(EVENT_TYPES)
        raise InvalidInput.at("type", f"unknown event type {type!r} (expected one of: {expected})")
    body: Any = structure({} if data is None else data, _KINDS[type], root="data")
    if isinstance(body, _MessageData):
        _check_user_blocks(body.content, "data.content")
        return InboundEvent(type, role=body.role, content=body.content)
    return InboundEvent(type, data=body)
