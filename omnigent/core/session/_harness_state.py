"""A session's harness state, kept in the store (see :class:`~omnigent.harnesses.HarnessState`).

One :class:`StoredHarnessState` per harness instance: it reads the session's values for
its harness once, then serves them from memory and writes each change through. A
harness instance lives within one actor of one session, so nobody else writes them
meanwhile.
"""

from __future__ import annotations

from ...errors import InvalidInput
from ...stores import Store

__all__ = ["MAX_KEY", "MAX_VALUE", "StoredHarnessState"]

MAX_KEY = 100
MAX_VALUE = 4096


class StoredHarnessState:
    """Values ``harness`` keeps on ``session_id``, read once and written through."""

    def __init__(self, store: Store, session_id: str, harness: str) -> None:
        self._store = store
        self._session_id = session_id
        self._harness = harness
        self._values: dict[str, str] | None = None

    async def _loaded(self) -> dict[str, str]:
        if self._values is None:
            self._values = await self._store.get_harness_state(self._session_id, self._harness)
        return self._values

    async def get(self, key: str) -> str | None:
        return (await self._loaded()).get(key)

    async def set(self, key: str, value: str | None) -> None:
        if not key or len(key) > MAX_KEY:
            raise InvalidInput.at("key", f"must be 1 to {MAX_KEY} characters")
        if value is not None and len(value) > MAX_VALUE:
            raise InvalidInput.at("value", f"must be at most {MAX_VALUE} characters")
        values = await self._loaded()
        await self._store.put_harness_state(self._session_id, self._harness, key, value)
        if value is None:
            values.pop(key, None)
        else:
            values[key] = value
