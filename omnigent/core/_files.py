"""Uploaded files, and resolving ``input_image`` ``file_id`` blocks to ``data:`` URLs.

No harness ever sees a ``file_id``: before a turn starts, every image block that names
an uploaded file is rewritten to carry the file as a ``data:<type>;base64,…`` URL.
"""

from __future__ import annotations

import base64
import mimetypes
from collections.abc import Awaitable, Callable, Sequence

import attrs

from .._ids import new_id, now
from ..errors import FileNotFound, InvalidInput
from ..model import ContentBlock, InputImage, Item, MessageItem
from ..stores import FileRow, Store
from ._records import FileInfo

__all__ = ["MAX_FILE_BYTES", "FileService"]

MAX_FILE_BYTES = 20 * 1024 * 1024


def _info(row: FileRow) -> FileInfo:
    return FileInfo(row.id, row.filename, row.content_type, row.bytes, row.created_at)


class FileService:
    """Files kept in the store."""

    def __init__(self, store: Store) -> None:
        self._store = store

    async def upload(
        self, content: bytes, filename: str, content_type: str | None, owner: str
    ) -> FileInfo:
        """Store ``content``. Raises InvalidInput when it is empty or too large."""
        if not content:
            raise InvalidInput.at("file", "the file is empty")
        if len(content) > MAX_FILE_BYTES:
            raise InvalidInput.at("file", f"the file is larger than {MAX_FILE_BYTES} bytes")
        kind = content_type or mimetypes.guess_type(filename)[0] or "application/octet-stream"
        row = FileRow(new_id("file"), filename or "upload", kind, len(content), owner, now())
        await self._store.put_file(row, content)
        return _info(row)

    async def info(self, file_id: str, viewer: str | None = None) -> FileInfo:
        return _info(await self.row(file_id, viewer))

    async def row(self, file_id: str, viewer: str | None = None) -> FileRow:
        """The file's row; to a ``viewer`` other than its uploader it does not exist.

        Raises:
            FileNotFound: no such file, or ``viewer`` is not its owner.
        """
        row = await self._store.get_file(file_id)
        if row is None or (viewer is not None and row.owner != viewer):
            raise FileNotFound(file_id)
        return row

    async def content(self, file_id: str, viewer: str | None = None) -> bytes:
        await self.row(file_id, viewer)
        data = await self._store.get_file_content(file_id)
        if data is None:
            raise FileNotFound(file_id)
        return data

    async def check_references(
        self, blocks: Sequence[ContentBlock], *, root: str, viewer: str | None = None
    ) -> None:
        """Every ``file_id`` in ``blocks`` names an uploaded image, else InvalidInput.

        With ``viewer``, the file must also be theirs; another user's file is refused
        exactly as a missing one is, so a refusal does not tell whether it exists.
        """
        for index, block in enumerate(blocks):
            if isinstance(block, InputImage) and block.file_id is not None:
                row = await self._store.get_file(block.file_id)
                loc = f"{root}[{index}].file_id"
                if row is None or (viewer is not None and row.owner != viewer):
                    raise InvalidInput.at(loc, f"unknown file {block.file_id!r}")
                if not row.content_type.startswith("image/"):
                    raise InvalidInput.at(loc, f"file {block.file_id!r} is not an image")

    def resolver(self) -> Callable[[Item], Awaitable[Item]]:
        """A function that rewrites an item's ``file_id`` images to ``data:`` URLs.

        It caches what it read, so one turn reads each file once.
        """
        cache: dict[str, str] = {}

        async def data_url(file_id: str) -> str:
            if file_id not in cache:
                row = await self.row(file_id)
                encoded = base64.b64encode(await self.content(file_id)).decode("ascii")
                cache[file_id] = f"data:{row.content_type};base64,{encoded}"
            return cache[file_id]

        async def resolve(item: Item) -> Item:
            if not isinstance(item, MessageItem) or not any(
                isinstance(b, InputImage) and b.file_id for b in item.content
            ):
                return item
            blocks: list[ContentBlock] = []
            for block in item.content:
                if isinstance(block, InputImage) and block.file_id is not None:
                    url = await data_url(block.file_id)
                    block = InputImage(image_url=url, detail=block.detail)
                blocks.append(block)
            return attrs.evolve(item, content=tuple(blocks))

        return resolve
