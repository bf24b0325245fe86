"""What a native coding agent is told: the session's history, when it joins late.

A native CLI keeps its own conversation, so a turn sends it only the new message. But
a session may hold history the CLI never saw — ``initial_items``, turns before its
conversation was lost (an unknown resume id, a transcript deleted). The first turn of
a new native conversation then opens with :func:`preamble`: the earlier messages as
text, bounded, so the agent answers with what came before. Pure functions.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ...model import (
    FunctionCallItem,
    FunctionCallOutputItem,
    InputImage,
    InputText,
    Item,
    MessageItem,
    OutputText,
    item_text,
)

__all__ = ["MAX_PREAMBLE", "input_blocks", "preamble", "split_data_url"]

MAX_PREAMBLE = 100_000
"""At most this many characters of earlier conversation (the newest are kept)."""
_MAX_PART = 2_000

_OPENING = "Earlier in this conversation (before you joined it):\n\n"
_CLOSING = "\n\n(End of the earlier conversation. The new message follows.)"


def _clip(text: str, limit: int = _MAX_PART) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def preamble(history: Sequence[Item]) -> str | None:
    """The session's earlier messages and tool calls as one text (``None``: none)."""
    parts: list[str] = []
    for item in history:
        if isinstance(item, MessageItem):
            text = item_text(item).strip()
            if text:
                parts.append(f"{item.role}: {text}")
        elif isinstance(item, FunctionCallItem) and item.status != "action_required":
            parts.append(f"(tool call {item.name} {_clip(item.arguments, 500)})")
        elif isinstance(item, FunctionCallOutputItem):
            parts.append(f"(tool output: {_clip(item.output)})")
    if not parts:
        return None
    body = "\n\n".join(parts)
    if len(body) > MAX_PREAMBLE:
        body = "…" + body[-(MAX_PREAMBLE - 1) :]
    return _OPENING + body + _CLOSING


def split_data_url(url: str) -> tuple[str, str] | None:
    """``(media type, base64 data)`` of a ``data:<type>;base64,<data>`` URL, else None."""
    if not url.startswith("data:"):
        return None
    head, sep, data = url[5:].partition(",")
    if not sep or not head.endswith(";base64"):
        return None
    media_type = head.removesuffix(";base64") or "application/octet-stream"
    return media_type, data


def input_blocks(
    messages: Sequence[MessageItem],
    preamble: str | None,
    image: Callable[[str], dict[str, Any]],
) -> list[dict[str, Any]]:
    """A turn's new input as content blocks: the preamble, then each message's text
    and images, in order; never empty (one empty text block if there is nothing).

    Args:
        messages: the turn's new messages.
        preamble: the earlier conversation's text (:func:`preamble`), if any.
        image: the CLI's block for an image URL (``data:`` URLs included).
    """
    blocks: list[dict[str, Any]] = []
    if preamble:
        blocks.append({"type": "text", "text": preamble})
    for message in messages:
        for block in message.content:
            if isinstance(block, InputText | OutputText):
                if block.text:
                    blocks.append({"type": "text", "text": block.text})
            elif isinstance(block, InputImage) and block.image_url:
                blocks.append(image(block.image_url))
    return blocks or [{"type": "text", "text": ""}]
