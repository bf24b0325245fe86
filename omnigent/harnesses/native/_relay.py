"""What a native coding agent's stream means for the session, and the relay that does it.

Each native protocol module (:mod:`omnigent.harnesses.claude._protocol`,
:mod:`omnigent.harnesses.codex._protocol`) reads its CLI's messages into the small,
frozen **actions** defined here — a piece of assistant text, a tool call, its output,
the end of the turn, what a model call used — without any I/O. :class:`ItemRelay`
applies them to a turn's context: text is streamed into assistant messages (one open at
a time), tool calls and their outputs become ``function_call`` /
``function_call_output`` items, recorded the way the core records the tools it runs
itself (``action_required``, then ``completed`` under the same item id, then the
output), and a call's usage goes to ``record_usage``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import AsyncExitStack
from types import TracebackType
from typing import Any

import attrs
import trio

from ...model import FunctionCallItem, FunctionCallOutputItem, Usage
from ..base import MessageWriter, TurnContext

__all__ = [
    "Action",
    "Call",
    "CallOutput",
    "EndMessage",
    "Finished",
    "ItemRelay",
    "Say",
    "Used",
    "merge_text",
    "reported_usage",
]


@attrs.frozen
class Say:
    """Assistant text: ``text`` goes on the message ``key`` (opened if it is not)."""

    key: str
    text: str


@attrs.frozen
class EndMessage:
    """The open assistant message is complete."""


@attrs.frozen
class Call:
    """The agent calls one of its own tools (the CLI runs it)."""

    call_id: str
    name: str
    arguments: str


@attrs.frozen
class CallOutput:
    """What a tool call returned (an ``Error: …`` string when it failed or was refused)."""

    call_id: str
    output: str


@attrs.frozen
class Finished:
    """The turn ended: ``error`` is ``None`` on success, else why it failed."""

    error: str | None = None


@attrs.frozen
class Used:
    """One model call's usage, as the CLI reported it (``model``: the call's, if said)."""

    usage: Usage
    model: str | None = None


Action = Say | EndMessage | Call | CallOutput | Finished | Used


def reported_usage(
    counts: Mapping[str, Any], *, prompt: Sequence[str], cached: str, output: str, model: Any
) -> Used | None:
    """One model call's usage from a CLI's counts, or ``None`` if it reported none.

    ``prompt``: the keys whose sum is the whole prompt (a CLI may split it by cache
    use); ``cached``: the key of its part read from the cache. Counts that are not
    non-negative integers, or all zero (a call that reported nothing), give ``None``.
    """
    keys = [*prompt, cached, output]
    values = [counts.get(key) for key in keys]
    numbers = [n for n in values if isinstance(n, int) and not isinstance(n, bool) and n >= 0]
    if len(numbers) != len(values) or not any(numbers):
        return None
    by_key = dict(zip(keys, numbers, strict=True))
    usage = Usage.of_call(sum(by_key[key] for key in prompt), by_key[output], by_key[cached])
    return Used(usage, model if isinstance(model, str) and model else None)


def merge_text(actions: list[Action]) -> list[Action]:
    """Adjacent ``Say`` of one message merged, so a burst of deltas is one publish."""
    out: list[Action] = []
    for action in actions:
        last = out[-1] if out else None
        if isinstance(action, Say) and isinstance(last, Say) and last.key == action.key:
            out[-1] = Say(action.key, last.text + action.text)
        else:
            out.append(action)
    return out


class ItemRelay:
    """Applies actions to one turn's context; use it as ``async with ItemRelay(ctx)``.

    Args:
        ctx: the turn.
        bridged: which tool names are omnigent's own, reached through the tool bridge:
            the turn records those calls as it runs them, so the CLI's report of them
            is not recorded again.

    Cancellation: a message still open when the block is left by an exception (the
    turn cancelled, the CLI gone) is kept as ``incomplete`` by the core
    (:meth:`TurnContext.open_message`); left normally, it is completed.
    """

    def __init__(self, ctx: TurnContext, *, bridged: Callable[[str], bool] | None = None) -> None:
        self._ctx = ctx
        self._bridged = bridged
        self._stack = AsyncExitStack()
        self._writer: MessageWriter | None = None
        self._key: str | None = None
        self._calls: dict[str, FunctionCallItem] = {}
        self._elsewhere: set[str] = set()  # ids of calls the bridge records
        # The stream's actions and the bridge's calls come from different tasks.
        self._lock = trio.Lock()

    async def apply(self, action: object) -> None:
        """Relay one action; anything else (``Finished``, a protocol's own messages) is
        the caller's to act on and ignored here."""
        async with self._lock:
            if isinstance(action, Say):
                await self._say(action.key, action.text)
            elif isinstance(action, EndMessage):
                await self._end_message()
            elif isinstance(action, Call):
                await self._call(action.call_id, action.name, action.arguments)
            elif isinstance(action, CallOutput):
                await self._output(action.call_id, action.output)
            elif isinstance(action, Used):
                self._ctx.record_usage(action.usage, action.model)

    async def end_message(self) -> None:
        """Complete the open message, if any: before a tool call the bridge runs is
        recorded, so the history keeps the order the model spoke in."""
        async with self._lock:
            await self._end_message()

    async def _say(self, key: str, text: str) -> None:
        if self._writer is None or key != self._key:
            await self._end_message()
            self._writer = await self._stack.enter_async_context(self._ctx.open_message())
            self._key = key
        await self._writer.write(text)

    async def _end_message(self) -> None:
        if self._writer is not None:
            self._writer, self._key = None, None
            await self._stack.aclose()  # persists the message
            self._stack = AsyncExitStack()

    async def _call(self, call_id: str, name: str, arguments: str) -> None:
        await self._end_message()
        if self._bridged is not None and self._bridged(name):
            self._elsewhere.add(call_id)
            return
        if call_id in self._calls:
            return  # the CLI repeated it (a retried stream)
        item = FunctionCallItem(call_id=call_id, name=name, arguments=arguments)
        self._calls[call_id] = item
        await self._ctx.add_item(item)

    async def _output(self, call_id: str, output: str) -> None:
        await self._end_message()
        if call_id in self._elsewhere:
            self._elsewhere.discard(call_id)
            return
        call = self._calls.pop(call_id, None)
        if call is not None:
            await self._ctx.add_item(attrs.evolve(call, status="completed"))
        await self._ctx.add_item(FunctionCallOutputItem(call_id=call_id, output=output))

    async def __aenter__(self) -> ItemRelay:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._writer, self._key = None, None
        await self._stack.__aexit__(exc_type, exc, tb)
