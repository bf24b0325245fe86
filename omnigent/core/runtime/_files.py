"""Uploaded files, and resolving ``input_image`` ``file_id`` blocks to ``data:`` URLs.

No harness ever sees a ``file_id``: before a turn starts, every image block that names
an uploaded file is rewritten to carry the file as a ``data:<type>;base64,…`` URL.

Encoding a large image takes a while (~130 ms for 20 MiB), so it runs in a worker
thread, and the URLs are kept in a cache keyed by file id (a file never changes),
bounded by :data:`DATA_URL_CACHE_BYTES`: a session's images are encoded once, not on
every turn.
"""

from __future__ import annotations

import base64
import mimetypes
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence

import attrs
import trio

from ..._ids import new_id, now
from ...errors import FileNotFound, InvalidInput
from ...model import ContentBlock, FileInfo, InputImage, Item, MessageItem
from ...stores import FileRow, Store

__all__ = ["DATA_URL_CACHE_BYTES", "MAX_FILE_BYTES", "FileService"]

MAX_FILE_BYTES = 20 * 1024 * 1024
DATA_URL_CACHE_BYTES = 64 * 1024 * 1024


def _info(row: FileRow) -> FileInfo:
    return FileInfo(row.id, row.filename, row.content_type, row.bytes, row.created_at)


class FileService:
    """Files kept in the store."""

    def __init__(self, store: Store, *, cache_bytes: int = DATA_URL_CACHE_BYTES) -> None:
        self._store = store
        self._cache_bytes = cache_bytes
        self._urls: OrderedDict[str, str] = OrderedDict()
        self._cached = 0
        self.encodings = 0  # how many files were base64-encoded (for tests)

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

    async def data_url(self, file_id: str) -> str:
        """The file as a ``data:<type>;base64,…`` URL (cached; encoded off the loop).

        Raises:
            FileNotFound.
        """
        url = self._urls.get(file_id)
        if url is not None:
            self._urls.move_to_end(file_id)
            return url
        row = await self.row(file_id)
        content = await self.content(file_id)
        encoded = await trio.to_thread.run_sync(_encode, row.content_type, content)
        self.encodings += 1
        self._remember(file_id, encoded)
        return encoded

    def _remember(self, file_id: str, url: str) -> None:
        if len(url) > self._cache_bytes or file_id in self._urls:
            return
        self._urls[file_id] = url
        self._cached += len(url)
        while self._cached > self._cache_bytes:
            _, old = self._urls.popitem(last=False)
            self._cached -= len(old)

    def resolver(self) -> Callable[[Item], Awaitable[Item]]:
        """A function that rewrites an item's ``file_id`` images to ``data:`` URLs."""

        async def resolve(item: Item) -> Item:
            if not isinstance(item, MessageItem) or not any(
                isinstance(b, InputImage) and b.file_id for b in item.content
            ):
                return item
            blocks: list[ContentBlock] = []
            for block in item.content:
                if isinstance(block, InputImage) and block.file_id is not None:
                    url = await self.data_url(block.file_id)
                    block = InputImage(image_url=url, detail=block.detail)
                blocks.append(block)
            return attrs.evolve(item, content=tuple(blocks))

        return resolve


def _encode(content_type: str, content: bytes) -> str:
    return f"data:{content_type};base64,{base64.b64encode(content).decode('ascii')}"
