"""Content both ways: ACP prompt blocks into omnigent content, omnigent blocks into ACP.

Into omnigent (:func:`prompt_content`), as the agent advertises in ``initialize``
(``image`` and ``embeddedContext``, no ``audio``):

=======================  =====================================================
ACP block                omnigent block
=======================  =====================================================
``text``                 ``input_text``
``image``                ``input_image`` with a ``data:<mimeType>;base64,…`` URL
``resource`` (text)      ``input_text``: ``<context ref="URI">`` … ``</context>``
``resource`` (image)     ``input_image`` (a ``blob`` whose ``mimeType`` is an image)
``resource_link``        ``input_text``: ``[@NAME](URI)``
=======================  =====================================================

Anything else — ``audio``, a non-image blob, an unknown type — is refused with
``-32602`` naming the block (``prompt[1].type``): nothing is sent to the session.
"""

from __future__ import annotations

import re
from typing import Any

from ...model import ContentBlock, InputImage, InputText, OutputText
from ._params import Params, invalid

__all__ = ["acp_blocks", "prompt_content", "prompt_title"]

_MIME = re.compile(r"^image/[A-Za-z0-9.+-]{1,100}$")
_BASE64 = re.compile(r"^[A-Za-z0-9+/=\s]*$")
_DATA_URL = re.compile(r"^data:(image/[A-Za-z0-9.+-]+);base64,(.*)$", re.DOTALL)
_MAX_BLOCKS = 1000
_MAX_BLOCK_TEXT = 64 * 1024 * 1024


def prompt_content(blocks: Any) -> list[dict[str, Any]]:
    """omnigent content blocks (wire form) for an ACP ``prompt``.

    Raises:
        RpcError: ``-32602`` naming the first block omnigent cannot take.
    """
    if not isinstance(blocks, list) or not blocks:
        raise invalid("prompt", "expected a non-empty array of content blocks")
    if len(blocks) > _MAX_BLOCKS:
        raise invalid("prompt", f"more than {_MAX_BLOCKS} blocks")
    return [_block(Params(b, f"prompt[{i}]")) for i, b in enumerate(blocks)]


def _block(block: Params) -> dict[str, Any]:
    kind = block.string("type", max_len=64)
    if kind == "text":
        return {"type": "input_text", "text": block.string("text", max_len=_MAX_BLOCK_TEXT)}
    if kind == "image":
        return _image(block, "data")
    if kind == "resource_link":
        name = block.string("name", required=False) or block.string("uri")
        return {"type": "input_text", "text": f"[@{name}]({block.string('uri')})"}
    if kind == "resource":
        resource = block.object("resource")
        if resource.has("text"):
            uri = resource.string("uri")
            text = resource.string("text", max_len=_MAX_BLOCK_TEXT)
            return {"type": "input_text", "text": f'<context ref="{uri}">\n{text}\n</context>'}
        if resource.has("blob"):
            return _image(resource, "blob")
        raise invalid(resource.loc("text"), "a resource needs text (or an image blob)")
    if kind == "audio":
        raise invalid(block.loc("type"), "audio is not supported (promptCapabilities.audio)")
    raise invalid(block.loc("type"), f"unknown content block type {kind!r}")


def _image(block: Params, field: str) -> dict[str, Any]:
    mime = block.string("mimeType", max_len=128)
    if not _MIME.fullmatch(mime):
        raise invalid(block.loc("mimeType"), "only images are supported (image/…)")
    data = block.string(field, max_len=_MAX_BLOCK_TEXT)
    if not _BASE64.fullmatch(data):
        raise invalid(block.loc(field), "expected base64 data")
    return {"type": "input_image", "image_url": f"data:{mime};base64,{data}"}


def prompt_title(blocks: list[dict[str, Any]], limit: int = 80) -> str | None:
    """A session title from a first prompt: its first line of text, shortened."""
    for block in blocks:
        if block.get("type") == "input_text":
            text = str(block.get("text", "")).strip()
            first = text.splitlines()[0].strip() if text else ""
            if first and not first.startswith("<context"):
                return first if len(first) <= limit else first[: limit - 1] + "…"
    return None


def acp_blocks(content: tuple[ContentBlock, ...]) -> list[dict[str, Any]]:
    """ACP content blocks for the blocks of a stored message (for ``session/load``)."""
    out: list[dict[str, Any]] = []
    for block in content:
        if isinstance(block, InputText | OutputText):
            if block.text:
                out.append({"type": "text", "text": block.text})
        elif isinstance(block, InputImage):
            match = _DATA_URL.fullmatch(block.image_url or "")
            if match:
                out.append({"type": "image", "mimeType": match[1], "data": match[2]})
            else:
                where = block.image_url or block.file_id
                out.append({"type": "text", "text": f"[image: {where}]"})
    return out
