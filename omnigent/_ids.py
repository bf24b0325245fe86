"""Identifiers: generated ones (a prefix naming the kind, then 24 hex digits of
randomness), and the names a runner goes by (chosen by its operator)."""

from __future__ import annotations

import re
import secrets
import time

__all__ = ["RUNNER_ID_PATTERN", "new_id", "now", "runner_id_problem"]

RUNNER_ID_PATTERN = "[A-Za-z0-9][A-Za-z0-9._-]{0,63}"
"""What a runner's name (a session's ``runner_id``) must be, whole."""
_RUNNER_ID = re.compile(RUNNER_ID_PATTERN)


def runner_id_problem(name: object) -> str | None:
    """Why ``name`` cannot be a runner's name, or ``None`` if it can."""
    if not isinstance(name, str) or _RUNNER_ID.fullmatch(name) is None:
        return "must be 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit"
    return None


def new_id(prefix: str) -> str:
    """A new unique id such as ``conv_3f9c…``; ``prefix`` names the kind of object."""
    return f"{prefix}_{secrets.token_hex(12)}"


def now() -> float:
    """Wall-clock time in Unix seconds, rounded to milliseconds, for ``created_at``."""
    return round(time.time(), 3)
