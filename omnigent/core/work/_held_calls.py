"""Tool calls a session runs for a caller outside its turns, across several requests.

MCP's multi-round-trip tool calls (``POST /v1/sessions/{id}/mcp``) need a call that
can stop at an approval, answer the caller "input required", and go on when the
caller comes back with the answer. A :class:`HeldToolCall` is that call: it runs in
its session actor's nursery (so a stop, a delete or shutdown cancels it) through the
session's one tool path, policies included. While a policy's ASK waits, ``asking``
is the pending elicitation; once the output is there, ``output`` is. The call stays
(and keeps its session's actor alive) until :meth:`HeldToolCall.collect` takes the
output, or its time to live runs out — then a pending ASK is withdrawn.

A call can be *kept* (:meth:`Runtime.keep_tool_call`, MCP's tasks): its start and its
end are then written to the session's event log (``session.tool_task.updated``), so
whoever holds its id finds its outcome there even after the server restarted, and
nobody needs to collect it. A kept call can be cancelled (:meth:`HeldToolCall.cancel`).
"""

from __future__ import annotations

from typing import Any, Literal

import attrs
import trio

from ..._ids import new_id, now
from ...model import ElicitationRequest

__all__ = ["CANCELLED", "DEFAULT_TTL", "INTERRUPTED", "HeldToolCall", "ToolTask"]

DEFAULT_TTL = 600.0
EXPIRED = "Error: the tool call expired before it was completed"
CANCELLED = "Error: the tool call was cancelled"
INTERRUPTED = (
    "the call was interrupted before it finished (its server restarted, or its session "
    "was stopped or deleted)"
)

TaskStatus = Literal["working", "input_required", "completed", "cancelled", "failed"]


@attrs.frozen
class ToolTask:
    """A kept tool call as its holder sees it: live, or as the session's log has it.

    ``asking`` is the elicitation it waits on (``input_required``); ``output`` the
    call's output (``completed``, and ``cancelled``); ``error`` why it ``failed``.
    """

    call_id: str
    name: str
    status: TaskStatus
    started_at: float
    updated_at: float
    output: str | None = None
    asking: ElicitationRequest | None = None
    error: str | None = None


@attrs.define(eq=False)
class HeldToolCall:
    """One held call; made by :meth:`Runtime.start_tool_call`."""

    session_id: str
    name: str
    arguments: dict[str, Any]
    ttl: float = DEFAULT_TTL
    call_id: str = attrs.field(factory=lambda: new_id("call"))
    asking: ElicitationRequest | None = None
    output: str | None = None
    collected: trio.Event = attrs.field(factory=trio.Event)
    started_at: float = attrs.field(factory=now)
    # Kept (a task): ``announced`` once its start is in the log; its end follows it.
    kept: bool = False
    announced: trio.Event = attrs.field(factory=trio.Event)
    cancelled: bool = False
    scope: trio.CancelScope = attrs.field(factory=trio.CancelScope)
    _changed: trio.Event = attrs.field(factory=trio.Event)

    @property
    def done(self) -> bool:
        return self.output is not None

    async def wait_settled(self, *, answered: str | None = None) -> None:
        """Return once the call is done or waits on an elicitation (at once if it is).

        ``answered`` is an elicitation the caller just resolved: the call is not
        settled on it while it has not moved on yet.

        Cancellation: safe; the call goes on in its session.
        """
        while self.output is None and (
            self.asking is None or self.asking.elicitation_id == answered
        ):
            self._changed = trio.Event()
            await self._changed.wait()

    async def wait_done(self) -> None:
        """Return once the output is there (whatever ASKs it waited on)."""
        while self.output is None:
            self._changed = trio.Event()
            await self._changed.wait()

    def collect(self) -> str:
        """The output, taken: the call then ends. Only valid once :attr:`done`."""
        assert self.output is not None
        self.collected.set()
        return self.output

    def cancel(self) -> None:
        """End the call now (its output says it was cancelled); nothing if it is done."""
        if self.output is None:
            self.cancelled = True
            self.scope.cancel()

    # -- called by the session actor ---------------------------------------------------

    def note_ask(self, request: ElicitationRequest | None) -> None:
        """An ASK opened (``request``) or was answered (``None``)."""
        self.asking = request
        self._changed.set()

    def finish(self, output: str) -> None:
        self.output = output
        self.asking = None
        self._changed.set()
