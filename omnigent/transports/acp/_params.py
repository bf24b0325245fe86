"""Reading ACP request params: lenient about what it does not know, strict about the rest.

ACP grows by adding optional fields (``_meta``, ``additionalDirectories``, …), so
unknown keys are ignored here — unlike the HTTP API, which refuses them. Every field
omnigent reads is checked for its type (no coercion) and size; a bad one is a
``-32602`` error whose ``data.details`` name it (``[{"loc": "prompt[2].type", "msg":
"…"}]``), and nothing has happened yet when it is raised.
"""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Any

from ...rpc import RpcError

__all__ = ["MAX_PATH", "MAX_TEXT", "Params", "invalid"]

MAX_PATH = 4096
# A prompt's text blocks together are bounded by the message size (64 MiB); this caps
# the short strings (ids, names, values).
MAX_TEXT = 4096


def invalid(loc: str, msg: str) -> RpcError:
    """A ``-32602`` naming one field."""
    return RpcError.invalid_params(f"{msg} @ {loc}", {"details": [{"loc": loc, "msg": msg}]})


class Params:
    """Typed reads from one params object (``root`` prefixes the field paths)."""

    def __init__(self, params: Any, root: str = "") -> None:
        if params is None:
            params = {}
        if not isinstance(params, dict):
            raise invalid(root or "params", "params must be an object")
        self._data = params
        self._root = root

    def loc(self, key: str) -> str:
        return f"{self._root}.{key}" if self._root else key

    def has(self, key: str) -> bool:
        return self._data.get(key) is not None

    def raw(self, key: str) -> Any:
        return self._data.get(key)

    def string(self, key: str, *, required: bool = True, max_len: int = MAX_TEXT) -> str:
        value = self._data.get(key)
        if value is None and not required:
            return ""
        if not isinstance(value, str):
            raise invalid(self.loc(key), "expected a string")
        if len(value) > max_len:
            raise invalid(self.loc(key), f"longer than {max_len} characters")
        return value

    def optional_string(self, key: str, *, max_len: int = MAX_TEXT) -> str | None:
        if self._data.get(key) is None:
            return None
        return self.string(key, max_len=max_len)

    def session_id(self) -> str:
        value = self.string("sessionId", max_len=200)
        if not value:
            raise invalid(self.loc("sessionId"), "must not be empty")
        return value

    def absolute_path(self, key: str, *, required: bool = True) -> str | None:
        if self._data.get(key) is None and not required:
            return None
        value = self.string(key, max_len=MAX_PATH)
        if "\x00" in value or not PurePosixPath(value).is_absolute():
            raise invalid(self.loc(key), "must be an absolute path")
        return value

    def integer(self, key: str, *, low: int = 0, high: int = 2**31) -> int | None:
        value = self._data.get(key)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise invalid(self.loc(key), f"expected an integer between {low} and {high}")
        return value

    def array(self, key: str, *, required: bool = True, max_len: int = 10_000) -> list[Any]:
        value = self._data.get(key)
        if value is None and not required:
            return []
        if not isinstance(value, list):
            raise invalid(self.loc(key), "expected an array")
        if len(value) > max_len:
            raise invalid(self.loc(key), f"more than {max_len} entries")
        return value

    def object(self, key: str) -> Params:
        """A nested object (an empty one when absent)."""
        value = self._data.get(key)
        if value is not None and not isinstance(value, dict):
            raise invalid(self.loc(key), "expected an object")
        return Params(value or {}, self.loc(key))

    def flag(self, key: str) -> bool:
        """A boolean that is ``false`` when absent."""
        value = self._data.get(key)
        if value is None:
            return False
        if not isinstance(value, bool):
            raise invalid(self.loc(key), "expected a boolean")
        return value
