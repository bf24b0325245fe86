"""Conversation items and content blocks, as the wire names them.

An *item* is one entry of a session's history: a message, a tool call, or a tool
call's output (the OpenAI Responses vocabulary). Items are immutable; a tool call
whose status changes is written again under the same id.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import attrs

from .._ids import new_id
from ._wire import WireError, register_tagged_union, structure, wire_converter

__all__ = [
    "ContentBlock",
    "FunctionCallItem",
    "FunctionCallOutputItem",
    "InputImage",
    "InputText",
    "Item",
    "MessageItem",
    "OutputText",
    "item_from_dict",
    "item_text",
]

Role = Literal["user", "assistant", "system", "developer"]
CallStatus = Literal["action_required", "in_progress", "completed", "failed"]


@attrs.frozen
class InputText:
    """Text a user (or system) wrote."""

    type: ClassVar[str] = "input_text"
    text: str


@attrs.frozen
class InputImage:
    """An image, by uploaded ``file_id`` or by ``image_url`` (often a ``data:`` URL).

    The core resolves ``file_id`` to a ``data:`` URL before any harness sees it.
    """

    type: ClassVar[str] = "input_image"
    # The document states it as well (omnigent.model._schema).
    wire_exactly_one: ClassVar[tuple[str, ...]] = ("file_id", "image_url")
    file_id: str | None = None
    image_url: str | None = None
    detail: Literal["auto", "low", "high"] | None = None

    def __attrs_post_init__(self) -> None:
        given = [name for name in self.wire_exactly_one if getattr(self, name) is not None]
        if len(given) != 1:
            raise WireError("exactly one of file_id and image_url is required", "file_id")


@attrs.frozen
class OutputText:
    """Text the model produced."""

    type: ClassVar[str] = "output_text"
    text: str


ContentBlock = InputText | InputImage | OutputText


class _ItemBase:
    """What every item has: its wire form, with its ``type`` tag."""

    def to_dict(self) -> dict[str, Any]:
        """The wire form: ``{"type": ..., "id": ..., ...}`` (``item_from_dict`` reads it)."""
        out: dict[str, Any] = wire_converter().unstructure(self)
        return out


@attrs.frozen
class MessageItem(_ItemBase):
    """A message in the conversation."""

    type: ClassVar[str] = "message"
    role: Role
    content: tuple[ContentBlock, ...]
    id: str = attrs.field(factory=lambda: new_id("item"))
    status: Literal["completed", "incomplete"] = "completed"
    # The user who sent it (the original omnigent's ``created_by``), when a transport
    # named one (``--auth header``); absent for the runtime's own messages.
    created_by: str | None = None


@attrs.frozen
class FunctionCallItem(_ItemBase):
    """The model asked for a tool to run; ``arguments`` is the JSON text it sent."""

    type: ClassVar[str] = "function_call"
    call_id: str
    name: str
    arguments: str
    id: str = attrs.field(factory=lambda: new_id("item"))
    status: CallStatus = "action_required"


@attrs.frozen
class FunctionCallOutputItem(_ItemBase):
    """The output of a tool call, one string (JSON, text, or ``Error: …``)."""

    type: ClassVar[str] = "function_call_output"
    call_id: str
    output: str
    id: str = attrs.field(factory=lambda: new_id("item"))


Item = MessageItem | FunctionCallItem | FunctionCallOutputItem

register_tagged_union(
    ContentBlock,
    {c.type: c for c in (InputText, InputImage, OutputText)},
    what="content block type",
)
register_tagged_union(
    Item,
    {c.type: c for c in (MessageItem, FunctionCallItem, FunctionCallOutputItem)},
    what="item type",
)


def item_text(item: Any) -> str:
    """The plain text of a message item (its text blocks joined); ``""`` otherwise."""
    if not isinstance(item, MessageItem):
        return ""
    return "".join(b.text for b in item.content if isinstance(b, InputText | OutputText))


def item_from_dict(data: Any) -> Item:
    """Rebuild a typed item from its wire form (``item.to_dict()``).

    Raises:
        InvalidInput: naming the offending field.
    """
    item: Item = structure(data, Item)
    return item
