"""URL allow-lists: the prefixes under which an operator lets clients name URLs.

A prefix is an ``http://`` or ``https://`` URL with a host (``https://mcp.example/v1``).
A URL is *under* it when it has the same scheme, host and port and a path at or below
the prefix's path. The comparison is on parsed parts, never on strings:
``https://ok.example.evil.test`` is not under ``https://ok.example``, nor is
``https://ok.example@evil.test/``, nor ``https://ok.example/v10`` under
``https://ok.example/v1``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final
from urllib.parse import SplitResult, urlsplit

import attrs

__all__ = ["DEFAULT_PORTS", "UrlAllowList", "url_prefix_problem"]

DEFAULT_PORTS: Final = {"http": 80, "https": 443}


def url_prefix_problem(prefix: str) -> str | None:
    """Why ``prefix`` cannot be an allow-list entry (``None`` if it can)."""
    try:
        parts = urlsplit(prefix)
        parts.port  # noqa: B018  # a port out of range raises
    except ValueError:
        return f"must be an http:// or https:// URL with a host, got {prefix!r}"
    if parts.scheme not in DEFAULT_PORTS or not parts.hostname:
        return f"must be an http:// or https:// URL with a host, got {prefix!r}"
    if parts.username or parts.password or parts.query or parts.fragment:
        return f"must be a plain URL prefix (no user, query or fragment), got {prefix!r}"
    return None


def _origin(parts: SplitResult) -> tuple[str, str, int] | None:
    try:
        port = parts.port or DEFAULT_PORTS.get(parts.scheme)
    except ValueError:
        return None
    if port is None or not parts.hostname:
        return None
    return parts.scheme, parts.hostname, port


def _as_tuple(prefixes: Iterable[str]) -> tuple[str, ...]:
    return tuple(prefixes)


@attrs.frozen
class UrlAllowList:
    """Prefixes an operator allowed (each checked with :func:`url_prefix_problem`).

    Raises:
        ValueError: (at construction) an entry that is not a URL prefix.
    """

    prefixes: tuple[str, ...] = attrs.field(default=(), converter=_as_tuple)

    def __attrs_post_init__(self) -> None:
        for prefix in self.prefixes:
            problem = url_prefix_problem(prefix)
            if problem is not None:
                raise ValueError(problem)

    @classmethod
    def of(cls, *lists: Iterable[str]) -> UrlAllowList:
        """One list of every prefix in ``lists`` (the model and MCP lists together)."""
        prefixes: tuple[str, ...] = tuple(p for entries in lists for p in entries)
        return cls(prefixes)

    def __bool__(self) -> bool:
        return bool(self.prefixes)

    def admits(self, url: str) -> bool:
        """Whether ``url`` is under one of the prefixes."""
        try:
            parts = urlsplit(url)
        except ValueError:
            return False
        if parts.username is not None or parts.password is not None:
            return False  # a prefix has none, so a URL with one is under no prefix
        origin = _origin(parts)
        if origin is None:
            return False
        for prefix in self.prefixes:
            allowed = urlsplit(prefix)
            base = allowed.path.rstrip("/")
            under = not base or parts.path == base or parts.path.startswith(base + "/")
            if origin == _origin(allowed) and under:
                return True
        return False

    def origins(self) -> tuple[str, ...]:
        """``scheme://host:port`` of each prefix, once each (for httpx mounts)."""
        found: dict[str, None] = {}
        for prefix in self.prefixes:
            origin = _origin(urlsplit(prefix))
            if origin is not None:
                scheme, host, port = origin
                shown = f"[{host}]" if ":" in host else host
                found[f"{scheme}://{shown}:{port}"] = None
        return tuple(found)
