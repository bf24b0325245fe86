"""Tools a client supplies for one session: an editor reading its own unsaved buffers.

A connection (the ACP transports) may run some of a session's tools itself — read and
write files through the editor, run a command in the editor's terminal — for as long
as it is connected. :class:`ToolProviders` keeps, per session and tool name, the
implementations currently supplied; the most recently opened one wins and the one
before comes back when it closes, so nested or overlapping connections behave.

A provided tool replaces only the *running* of the tool: the arguments are decoded
and the policies applied before it is called, and its output goes through the
result policies after, exactly as for the built-in implementation.

Resource handling: an entry lives exactly as long as the ``with`` block of
:meth:`ToolProviders.provide` that added it; nothing here owns a task.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import trio

__all__ = ["ProvidedTool", "ToolProviders", "run_provided"]

log = logging.getLogger(__name__)

ProvidedTool = Callable[[dict[str, Any]], Awaitable[str]]
"""Runs one call: the decoded argument object in, the tool's output string out."""


class ToolProviders:
    """Client-supplied tool implementations by session. One per runtime."""

    def __init__(self) -> None:
        self._stacks: dict[tuple[str, str], list[ProvidedTool]] = {}

    def get(self, session_id: str, name: str) -> ProvidedTool | None:
        """The implementation of ``name`` supplied for the session now, if any."""
        stack = self._stacks.get((session_id, name))
        return stack[-1] if stack else None

    @contextmanager
    def provide(self, session_id: str, tools: Mapping[str, ProvidedTool]) -> Iterator[None]:
        """Supply ``tools`` for the session while the block runs."""
        added = [((session_id, name), fn) for name, fn in tools.items()]
        for key, fn in added:
            self._stacks.setdefault(key, []).append(fn)
        try:
            yield
        finally:
            for key, fn in added:
                stack = self._stacks[key]
                stack.remove(fn)
                if not stack:
                    del self._stacks[key]


async def run_provided(name: str, fn: ProvidedTool, args: dict[str, Any]) -> str:
    """Call a provided tool; whatever it raises becomes an ``Error: …`` output.

    Cancellation: propagates.
    """
    try:
        output = await fn(args)
    except trio.Cancelled:
        raise
    except Exception as exc:
        log.warning("the provided %s failed", name, exc_info=True)
        return f"Error: {name} failed in the client: {exc}"
    if not isinstance(output, str):
        log.warning("the provided %s answered %s, not a string", name, type(output).__name__)
        return f"Error: {name} answered no output"
    return output
