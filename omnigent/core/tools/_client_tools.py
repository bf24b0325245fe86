"""Client tools: implementations a client supplies for some of one session's tools.

A connection (the ACP transports) may run some of a session's tools itself — read and
write files through the editor, run a command in the editor's terminal — for as long
as it is connected (:meth:`~omnigent.Runtime.open_client_tools`). :class:`ClientTools`
keeps, per session and tool name, the implementations currently supplied; the most
recently opened one wins and the one before comes back when it closes, so nested or
overlapping connections behave.

A client tool replaces only the *running* of the tool: the arguments are decoded and
the policies applied before it is called, and its output goes through the result
policies after, exactly as for the built-in implementation.

Resource handling: an entry lives exactly as long as the ``with`` block of
:meth:`ClientTools.supply` that added it; nothing here owns a task.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import trio

__all__ = ["ClientTool", "ClientTools", "run_client_tool"]

log = logging.getLogger(__name__)

ClientTool = Callable[[dict[str, Any]], Awaitable[str]]
"""Runs one call: the decoded argument object in, the tool's output string out."""


class ClientTools:
    """Client-supplied tool implementations by session. One per runtime."""

    def __init__(self) -> None:
        self._stacks: dict[tuple[str, str], list[ClientTool]] = {}

    def get(self, session_id: str, name: str) -> ClientTool | None:
        """The implementation of ``name`` supplied for the session now, if any."""
        stack = self._stacks.get((session_id, name))
        return stack[-1] if stack else None

    @contextmanager
    def supply(self, session_id: str, tools: Mapping[str, ClientTool]) -> Iterator[None]:
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


async def run_client_tool(name: str, fn: ClientTool, args: dict[str, Any]) -> str:
    """Call a client tool; whatever it raises becomes an ``Error: …`` output.

    Cancellation: propagates.
    """
    try:
        output = await fn(args)
    except trio.Cancelled:
        raise
    except Exception as exc:
        log.warning("the client tool %s failed", name, exc_info=True)
        return f"Error: {name} failed in the client: {exc}"
    if not isinstance(output, str):
        log.warning("the client tool %s answered %s, not a string", name, type(output).__name__)
        return f"Error: {name} answered no output"
    return output
