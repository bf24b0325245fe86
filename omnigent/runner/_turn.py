"""A turn as the runner's harness sees it: a :class:`~omnigent.harnesses.base.TurnContext`
whose every call goes back to the server over the link.

:class:`RemoteTurn` is what ``turn/run`` hands the real harness. Deltas are the hot
path: a message's ``write`` only appends to a buffer (:meth:`RemoteTurn.buffer`), and
the turn's flusher sends everything buffered as one ``turn/deltas`` notification (a few
milliseconds after the first delta of a batch, or at once when the buffer is large), so
a 20,000-delta answer crosses the link in a few dozen frames. Every other call first
sends what is buffered, so the server sees deltas and the items after them in the order
the harness made them. An in-stream outcome (``report_response_status``) travels back
with ``turn/run``'s answer: the server's turn reads only the last one, when the harness
returns. A model call's usage (``record_usage``) is sent with the next flush as
``turn/usage``, whose answer says whether the session's budget allows another call
(``check_budget``).

A message the harness streams is also remembered here; when its block exits it is added
(``completed``, or ``incomplete`` with what streamed if the block was left by an error
or a cancel) by the same :func:`~omnigent.harnesses.open_streamed_message` as the
server's own turn.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import trio

from ..errors import BudgetExceeded, InvalidInput
from ..harnesses import MessageWriter, open_streamed_message
from ..model import (
    ElicitationParams,
    Event,
    Item,
    MessageItem,
    Usage,
    item_from_dict,
    unstructure,
)
from ..rpc import RpcConnection

__all__ = ["RemoteTurn"]

log = logging.getLogger("omnigent.runner")

_FLUSH_WINDOW = 0.002
"""Seconds the flusher waits after a batch's first delta for more to join it."""
_MAX_BATCH = 4096
_MAX_BATCH_CHARS = 1 << 20


class RemoteTurn:
    """The context of one turn the server asked this runner to run.

    Args:
        connection: the link's JSON-RPC connection to the server.
        turn_id: the server's name for the turn (every call carries it).
    """

    def __init__(
        self, connection: RpcConnection, turn_id: str, session_id: str, response_id: str
    ) -> None:
        self.session_id = session_id
        self.response_id = response_id
        self.turn_id = turn_id
        self._connection = connection
        self._pending: list[tuple[str, str]] = []
        self._pending_chars = 0
        self._flushing = trio.Lock()
        self._wake = trio.Event()
        self.reported: tuple[str, str | None] | None = None
        """The harness's last in-stream outcome report, if any."""
        self._usages: list[tuple[Usage, str | None]] = []
        self._over_budget: str | None = None

    # -- deltas ------------------------------------------------------------------------

    async def buffer(self, item_id: str, delta: str) -> None:
        """Queue one delta for the next ``turn/deltas`` frame."""
        self._pending.append((item_id, delta))
        self._pending_chars += len(delta)
        self._wake.set()
        if len(self._pending) >= _MAX_BATCH or self._pending_chars >= _MAX_BATCH_CHARS:
            await self.flush()
        else:
            await trio.lowlevel.checkpoint()  # as a local publish: an interrupt lands here

    async def flush(self) -> None:
        """Send every buffered delta (one frame per run of one message's deltas), then
        every model call's usage recorded since the last flush."""
        async with self._flushing:
            await self._send_deltas()
            await self._send_usage()

    async def _send_usage(self) -> None:
        """Record each buffered usage on the server (``turn/usage``), which answers
        whether the session's budget allows the next model call."""
        usages, self._usages = self._usages, []
        for usage, model in usages:
            answer = await self._connection.request(
                "turn/usage", {"turn": self.turn_id, "usage": unstructure(usage), "model": model}
            )
            over = answer.get("budget_exceeded") if isinstance(answer, dict) else None
            if isinstance(over, str):
                self._over_budget = over

    async def _send_deltas(self) -> None:
        if not self._pending:
            return
        batch, self._pending, self._pending_chars = self._pending, [], 0
        start = 0
        for end in range(1, len(batch) + 1):
            if end == len(batch) or batch[end][0] != batch[start][0]:
                await self._connection.notify(
                    "turn/deltas",
                    {
                        "turn": self.turn_id,
                        "item_id": batch[start][0],
                        "deltas": [delta for _, delta in batch[start:end]],
                    },
                )
                start = end

    async def run_flusher(self) -> None:
        """Send buffered deltas shortly after they arrive; runs for the turn's length."""
        while True:
            await self._wake.wait()
            self._wake = trio.Event()
            await trio.sleep(_FLUSH_WINDOW)
            await self.flush()

    async def _call(self, method: str, **params: Any) -> Any:
        await self.flush()
        return await self._connection.request(method, {"turn": self.turn_id, **params})

    # -- TurnContext -------------------------------------------------------------------

    def open_message(self) -> AbstractAsyncContextManager[MessageWriter]:
        # A partial message this runner could not add is kept by the server (its
        # ServedTurn), and after an interrupt it never can: only a debug line.
        return open_streamed_message(
            self.buffer, self.add_item, log=log, unkept_level=logging.DEBUG
        )

    async def add_item(self, item: Item) -> None:
        await self._call("turn/add_item", item=unstructure(item, Item))

    async def emit(self, event: Event) -> None:
        await self._call("turn/emit", event=event.to_dict())

    async def call_tool(
        self, name: str, arguments: str | Mapping[str, Any], *, call_id: str | None = None
    ) -> str:
        args: str | dict[str, Any] = arguments if isinstance(arguments, str) else dict(arguments)
        answer = await self._call("turn/call_tool", name=name, arguments=args, call_id=call_id)
        output = answer.get("output") if isinstance(answer, dict) else None
        if not isinstance(output, str):
            raise InvalidInput.at("output", "the server's tool answer has no output string")
        return output

    async def take_injections(self) -> list[MessageItem]:
        answer = await self._call("turn/take_injections")
        messages = answer.get("messages") if isinstance(answer, dict) else None
        taken = [item_from_dict(m) for m in messages or []]
        return [m for m in taken if isinstance(m, MessageItem)]

    async def wait_for_injection(self) -> None:
        await self._call("turn/wait_for_injection")

    @asynccontextmanager
    async def launching(self) -> AsyncIterator[None]:
        await self._call("turn/launching", phase="start")
        yield
        await self._call("turn/launching", phase="end")

    async def elicit(self, params: ElicitationParams) -> tuple[str, Any]:
        answer = await self._call("turn/elicit", params=unstructure(params, ElicitationParams))
        action = answer.get("action") if isinstance(answer, dict) else None
        if not isinstance(action, str):
            raise InvalidInput.at("action", "the server's answer has no action")
        return action, answer.get("content")

    async def evaluate_policy(
        self, event: Mapping[str, Any], *, ask: ElicitationParams | None = None
    ) -> Mapping[str, Any]:
        raw_ask = None if ask is None else unstructure(ask, ElicitationParams)
        answer = await self._call("turn/evaluate_policy", event=dict(event), ask=raw_ask)
        if not isinstance(answer, dict):
            raise InvalidInput.at("result", "the server's verdict is not an object")
        return answer

    def record_usage(self, usage: Usage, model: str | None = None) -> None:
        # Sent with the next flush (before any other call, so before the next model
        # call): the server prices and sums it, and says if the budget is used up.
        self._usages.append((usage, model))
        self._wake.set()

    def check_budget(self) -> None:
        """Raise if the server said the session's budget allows no further model call.

        Every usage the harness recorded was flushed — and answered — before any call
        it makes to the server, and a model call follows only the tool calls of the
        last one; so the answer is in before the next model call.

        Raises:
            BudgetExceeded: as the server's turn would have.
        """
        if self._over_budget is not None:
            raise BudgetExceeded(self._over_budget)

    def report_response_status(self, status: str, error: str | None = None) -> None:
        # Only the last report counts, and only when the harness returns: it goes back
        # with turn/run's answer (see :attr:`reported`).
        self.reported = (status, error)
