"""Session histories kept in memory, so a turn does not re-read what it already knows.

A turn's request carries the session's whole history. Reading and parsing it from the
store for every turn would make each turn cost more than the last; instead a
:class:`History` is loaded once and then kept current by the writes the runtime makes
itself — items a turn persists (:meth:`History.record`, in store order) and messages a
turn takes (appended when taken, which is when the store moves them to the end).

Pending messages (stored, not yet taken by any turn) are never part of a loaded
history: they join it when a turn takes them.

:class:`HistoryCache` keeps the histories of recently active sessions, bounded by a
number of items and by their size in bytes (:func:`item_bytes`: the text they hold),
so memory grows neither with the number of sessions a process touches nor with the
size of their messages. Whatever is evicted (or made doubtful by a failed write) is
simply read again from the store next time. The most recently used history is kept
whatever its item count, but not past the byte bound: a session of a few huge
messages is read again per turn rather than held while idle (once it held ~25 MiB of
memory per 20 MiB message, for good).

Contract for code that writes items: go through a turn's ``add_item`` or a message,
or call :meth:`HistoryCache.drop` for the session.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Collection, Iterable
from typing import Any

import attrs

from ...model import InputImage, Item, MessageItem, structure
from ...stores import Store

__all__ = [
    "MAX_CACHED_BYTES",
    "MAX_CACHED_ITEMS",
    "MAX_CACHED_SESSIONS",
    "History",
    "HistoryCache",
    "item_bytes",
]

MAX_CACHED_ITEMS = 50_000
MAX_CACHED_SESSIONS = 1024
MAX_CACHED_BYTES = 128 * 1024 * 1024
"""The most text (and inline image data) the kept histories hold together."""

_OBJECT = 64  # what an attrs object, a tuple or a dict costs beyond what it holds


def item_bytes(item: Any) -> int:
    """About what ``item`` costs to keep: the length of every string (and bytes) in it,
    plus a small constant per object. Iterative; one visit per value."""
    total = 0
    stack: list[Any] = [item]
    while stack:
        value = stack.pop()
        if isinstance(value, str | bytes):
            total += len(value)
        elif attrs.has(type(value)):
            total += _OBJECT
            stack.extend(getattr(value, field.name) for field in attrs.fields(type(value)))
        elif isinstance(value, dict):
            total += _OBJECT
            stack.extend(value.keys())
            stack.extend(value.values())
        elif isinstance(value, list | tuple):
            total += _OBJECT
            stack.extend(value)
        else:
            total += 16
    return total


def _has_file_image(item: Item) -> bool:
    return isinstance(item, MessageItem) and any(
        isinstance(block, InputImage) and block.file_id is not None for block in item.content
    )


class History:
    """One session's items in store order, and where the uploaded images are."""

    def __init__(
        self,
        items: Iterable[Item],
        on_doubt: Callable[[], None] = lambda: None,
        on_growth: Callable[[int, int], None] = lambda items, size: None,
    ) -> None:
        self._items: list[Item] = []
        self._sizes: list[int] = []
        self._index: dict[str, int] = {}
        self._images: set[int] = set()
        self._authors: set[str] = set()
        self.bytes = 0
        self._on_doubt = on_doubt
        self._on_growth: Callable[[int, int], None] = lambda items, size: None
        for item in items:
            self.record(item)
        self._on_growth = on_growth  # from now on: the loaded items are counted by the caller

    def __len__(self) -> int:
        return len(self._items)

    def record(self, item: Item) -> None:
        """Add an item at the end, or replace the one with its id where it stands."""
        size = item_bytes(item)
        position = self._index.get(item.id)
        if position is None:
            position = len(self._items)
            self._index[item.id] = position
            self._items.append(item)
            self._sizes.append(size)
            self.bytes += size
            self._on_growth(1, size)
        else:
            self._items[position] = item
            grown = size - self._sizes[position]
            self._sizes[position] = size
            self.bytes += grown
            self._on_growth(0, grown)
        if _has_file_image(item):
            self._images.add(position)
        else:
            self._images.discard(position)
        if isinstance(item, MessageItem) and item.created_by is not None:
            self._authors.add(item.created_by)

    def doubt(self) -> None:
        """A write this history recorded may not have reached the store: reload next time."""
        self._on_doubt()

    def items(self) -> list[Item]:
        """A copy of the items, oldest first."""
        return list(self._items)

    @property
    def authors(self) -> frozenset[str]:
        """Every user who sent a message of this history (``created_by``)."""
        return frozenset(self._authors)

    def image_positions(self) -> list[int]:
        """Positions of items with ``file_id`` images (those a request must resolve)."""
        return sorted(self._images)


class HistoryCache:
    """Histories of recently active sessions: at most ``max_sessions`` of them,
    ``max_items`` items and ``max_bytes`` bytes (:func:`item_bytes`) in all.

    Items are checked whenever a history is loaded, bytes whenever one grows too. The
    most recently used history is kept whatever its item count, but not past
    ``max_bytes``. A history in use by an actor stays valid if it is evicted meanwhile
    (the actor keeps updating it); the next actor of that session then reads the store
    again.
    """

    def __init__(
        self,
        store: Store,
        *,
        max_items: int = MAX_CACHED_ITEMS,
        max_sessions: int = MAX_CACHED_SESSIONS,
        max_bytes: int = MAX_CACHED_BYTES,
    ) -> None:
        self._store = store
        self._max_items = max_items
        self._max_sessions = max_sessions
        self._max_bytes = max_bytes
        self._entries: OrderedDict[str, History] = OrderedDict()
        self._size = 0  # items in the kept histories
        self._bytes = 0  # their size

    async def get(self, session_id: str, exclude: Collection[str] = ()) -> History:
        """The session's history, read from the store if it is not kept.

        ``exclude``: ids of messages a loaded history must leave out (the turn's own
        input, which joins it once the request is built).
        """
        cached = self._entries.get(session_id)
        if cached is not None:
            self._entries.move_to_end(session_id)
            return cached
        page = await self._store.list_items(session_id, include_pending=False)
        kept = self._entries.get(session_id)  # loaded by another task meanwhile
        if kept is not None:
            return kept
        items = [structure(row, Item) for row in page.rows if row["id"] not in exclude]
        history = History(
            items,
            on_doubt=lambda: self._forget(session_id, history),
            on_growth=lambda added, size: self._grew(session_id, history, added, size),
        )
        self._entries[session_id] = history
        self._size += len(history)
        self._bytes += history.bytes
        self._evict()
        return history

    def kept(self, session_id: str) -> History | None:
        """The session's history if it is kept, without reading the store (nor
        counting as a use: only the session's actor loads its history)."""
        return self._entries.get(session_id)

    def drop(self, session_id: str) -> None:
        """Forget a session's history (it was deleted, say)."""
        history = self._entries.get(session_id)
        if history is not None:
            self._forget(session_id, history)

    def _forget(self, session_id: str, history: History) -> None:
        if self._entries.get(session_id) is history:
            del self._entries[session_id]
            self._size -= len(history)
            self._bytes -= history.bytes

    def _grew(self, session_id: str, history: History, added: int, size: int) -> None:
        if self._entries.get(session_id) is history:
            self._size += added
            self._bytes += size
            if self._bytes > self._max_bytes:
                self._evict()

    def _evict(self) -> None:
        while self._entries and (
            self._bytes > self._max_bytes
            or (
                len(self._entries) > 1
                and (self._size > self._max_items or len(self._entries) > self._max_sessions)
            )
        ):
            _, oldest = self._entries.popitem(last=False)
            self._size -= len(oldest)
            self._bytes -= oldest.bytes

    def statistics(self) -> dict[str, int]:
        return {"sessions": len(self._entries), "items": self._size, "bytes": self._bytes}
