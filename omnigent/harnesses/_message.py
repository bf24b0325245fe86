"""A streamed assistant message: the one ``open_message`` every turn context shares.

A harness writes a message's text in deltas (:class:`~.base.MessageWriter`); the turn
context sends each on — the server's turn publishes ``response.output_text.delta``, a
runner's turn buffers it for the link — and when the block exits adds the whole text
as one item: ``completed``, or ``incomplete`` if an error or a cancel left the block,
so what the user saw streamed is kept in the history and the turn still ends for the
reason it ended. A message that streamed nothing is not added at all.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Literal

import trio

from .._ids import new_id
from ..model import Item, MessageItem, OutputText
from .base import MessageWriter

__all__ = ["open_streamed_message"]

_KEEP_TIMEOUT = 10.0
"""Seconds keeping a partial message may take (shielded: the turn may be cancelled)."""


class _StreamedMessage:
    """The :class:`~.base.MessageWriter` of :func:`open_streamed_message`."""

    def __init__(self, send_delta: Callable[[str, str], Awaitable[None]]) -> None:
        self.item_id = new_id("item")
        self.parts: list[str] = []
        self._send_delta = send_delta

    async def write(self, delta: str) -> None:
        if not delta:
            return
        self.parts.append(delta)
        await self._send_delta(self.item_id, delta)

    def item(self, status: Literal["completed", "incomplete"]) -> MessageItem:
        text = "".join(self.parts)
        return MessageItem(
            role="assistant", content=(OutputText(text),), id=self.item_id, status=status
        )


@asynccontextmanager
async def open_streamed_message(
    send_delta: Callable[[str, str], Awaitable[None]],
    add_item: Callable[[Item], Awaitable[None]],
    *,
    log: logging.Logger,
    unkept_level: int = logging.WARNING,
) -> AsyncIterator[MessageWriter]:
    """Stream an assistant message; on exit add it (see the module docstring).

    This is :meth:`~.base.TurnContext.open_message` for a context that can send a
    delta and add an item.

    Args:
        send_delta: sends one non-empty delta on, given the message's item id.
        add_item: adds the finished message (the context's ``add_item``).
        log: where a partial message that could not be kept is logged.
        unkept_level: the level it is logged at. Warning by default: the text is
            lost. Debug where someone else keeps it: a runner's turn, whose server
            keeps what streamed when the runner's add does not arrive (it cannot after
            an interrupt, when the server's turn has ended).

    Raises:
        Whatever left the block, unchanged: a failure to keep the partial message is
        logged, never raised over it. Whatever ``add_item`` raises for a message
        the block finished.

    Cancellation: a cancel that leaves the block still adds what streamed, shielded
    for at most ten seconds.
    """
    message = _StreamedMessage(send_delta)
    try:
        yield message
    except BaseException:
        if message.parts:
            # Keep what was streamed, but never let that mask why the turn ended.
            with trio.move_on_after(_KEEP_TIMEOUT, shield=True):
                try:
                    await add_item(message.item("incomplete"))
                except Exception:
                    log.log(unkept_level, "could not keep a partial message", exc_info=True)
        raise
    if message.parts:
        await add_item(message.item("completed"))
