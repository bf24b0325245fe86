"""``open_streamed_message``: the ``open_message`` the server's turn and a runner's turn
share — deltas sent on under the message's id, the whole text added once on exit,
``incomplete`` (never masking why) when an error or a cancel leaves the block."""

from __future__ import annotations

import logging

import pytest
import trio

from omnigent.harnesses import open_streamed_message
from omnigent.model import Item, MessageItem, item_text


class Context:
    """What a turn context gives the helper: where deltas and items go."""

    def __init__(self, *, add_fails: bool = False) -> None:
        self.deltas: list[tuple[str, str]] = []
        self.items: list[Item] = []
        self.add_fails = add_fails

    async def send_delta(self, item_id: str, delta: str) -> None:
        self.deltas.append((item_id, delta))

    async def add_item(self, item: Item) -> None:
        await trio.lowlevel.checkpoint()  # as a store write: a cancel would land here
        if self.add_fails:
            raise OSError("the store is gone")
        self.items.append(item)


log = logging.getLogger("tests.streamed_message")


async def test_deltas_go_on_and_the_whole_message_is_added_completed() -> None:
    ctx = Context()
    with trio.fail_after(5):
        async with open_streamed_message(ctx.send_delta, ctx.add_item, log=log) as message:
            await message.write("hel")
            await message.write("")  # nothing to send
            await message.write("lo")
    [item] = ctx.items
    assert isinstance(item, MessageItem) and item.role == "assistant"
    assert (item.id, item.status, item_text(item)) == (message.item_id, "completed", "hello")
    assert ctx.deltas == [(message.item_id, "hel"), (message.item_id, "lo")]


async def test_a_message_that_streamed_nothing_is_not_added() -> None:
    ctx = Context()
    with trio.fail_after(5), pytest.raises(ValueError):
        async with open_streamed_message(ctx.send_delta, ctx.add_item, log=log):
            raise ValueError("before any text")
    async with open_streamed_message(ctx.send_delta, ctx.add_item, log=log) as message:
        await message.write("")
    assert ctx.items == [] and ctx.deltas == []


async def test_an_error_keeps_what_streamed_incomplete_and_is_raised() -> None:
    ctx = Context()
    with trio.fail_after(5), pytest.raises(ValueError, match="exploded"):
        async with open_streamed_message(ctx.send_delta, ctx.add_item, log=log) as message:
            await message.write("half an ")
            raise ValueError("exploded")
    [item] = ctx.items
    assert isinstance(item, MessageItem)
    assert (item.status, item_text(item)) == ("incomplete", "half an ")


async def test_a_cancel_keeps_what_streamed_incomplete_shielded() -> None:
    ctx = Context()
    with trio.fail_after(5):
        with trio.CancelScope() as scope:
            async with open_streamed_message(ctx.send_delta, ctx.add_item, log=log) as message:
                await message.write("interrupted")
                scope.cancel()
                await trio.sleep_forever()
        assert scope.cancelled_caught
    [item] = ctx.items
    assert isinstance(item, MessageItem)
    assert (item.status, item_text(item)) == ("incomplete", "interrupted")


@pytest.mark.parametrize("level", [None, logging.DEBUG])
async def test_a_partial_message_that_cannot_be_kept_is_logged_never_raised(
    level: int | None, caplog: pytest.LogCaptureFixture
) -> None:
    """Logged at a warning (it is lost), or at the level the caller gives."""
    ctx = Context(add_fails=True)
    caplog.set_level(logging.DEBUG, logger=log.name)
    levels = {} if level is None else {"unkept_level": level}
    with trio.fail_after(5), pytest.raises(ValueError, match="the reason"):
        async with open_streamed_message(
            ctx.send_delta, ctx.add_item, log=log, **levels
        ) as message:
            await message.write("lost")
            raise ValueError("the reason")
    [record] = [r for r in caplog.records if r.name == log.name]
    assert (
        record.levelno == (logging.WARNING if level is None else level)
        and record.getMessage() == "could not keep a partial message"
    )
    assert record.exc_info is not None and isinstance(record.exc_info[1], OSError)


async def test_a_failure_to_add_a_finished_message_is_raised() -> None:
    ctx = Context(add_fails=True)
    with trio.fail_after(5), pytest.raises(OSError, match="the store is gone"):
        async with open_streamed_message(ctx.send_delta, ctx.add_item, log=log) as message:
            await message.write("done")
