"""Identifier generation: a prefix naming the kind, then 24 hex digits of randomness."""

from __future__ import annotations

import secrets
import time

__all__ = ["new_id", "now"]


def new_id(prefix: str) -> str:
    """A new unique id such as ``conv_3f9c…``; ``prefix`` names the kind of object."""
    return f"{prefix}_{secrets.token_hex(12)}"


def now() -> float:
    """Wall-clock time in Unix seconds, rounded to milliseconds, for ``created_at``."""
    return round(time.time(), 3)
