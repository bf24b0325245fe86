"""The client's errors: what an omnigent server answered when it refused."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["ApiError", "StreamError"]


class ApiError(Exception):
    """The server answered an error: ``status``, ``code``, ``message``, ``details``."""

    def __init__(
        self, status: int, code: str, message: str, details: Sequence[dict[str, Any]] = ()
    ) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.details = tuple(details)


class StreamError(ApiError):
    """An event stream could not be opened, or ended with an ``event: error`` frame."""
