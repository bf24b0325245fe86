"""Work a session actor holds for callers outside its turns.

Two kinds of work run in a session actor's nursery without belonging to any turn: an
elicitation held open until it is answered (``mcp_elicitation``, behind
:meth:`Runtime.hold_elicitation`) and a :class:`~omnigent.core.work._held_calls.HeldToolCall` (MCP's
multi-round-trip tool calls). Being in the actor's nursery, each keeps the actor alive
while it lasts and is cancelled by a stop, a delete or shutdown; one that a stop finds
not yet started is withdrawn.

:class:`HeldWork` is owned by its :class:`~._actor.SessionActor`: a job of its own with
state of its own (what waits to be started, the held calls by id). The actor's part is
to start what waits on each pass of its loop (:meth:`HeldWork.start_waiting`) and to
withdraw it on a stop (:meth:`HeldWork.withdraw`).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Literal

import attrs
import trio

from ...errors import HarnessError, OmnigentError
from ...model import ElicitationParams, ToolTaskUpdated
from ..asking import Elicitations
from ..bus import EventBus
from ..work import CANCELLED, EXPIRED, HeldToolCall

if TYPE_CHECKING:
    from ..tools.session import SessionTools

__all__ = ["HeldElicitation", "HeldWork"]

log = logging.getLogger(__name__)

_STOPPED = "Error: the session was stopped before the tool call ran"
# How long writing a task's end may take (a stop waits for it).
_LOG_TIMEOUT = 5.0


@attrs.define(eq=False)
class HeldElicitation:
    """An elicitation the session holds open until answered (``mcp_elicitation``)."""

    params: ElicitationParams
    started: trio.Event = attrs.field(factory=trio.Event)
    elicitation_id: str | None = None


class HeldWork:
    """The held elicitations and tool calls of one session actor.

    Args:
        session_id: the session.
        elicitations: where a held elicitation is opened.
        bus: where a kept call's end is written (its start is written by the runtime).
        tools: the session's tool set (built on first use by the actor).
        wake: wakes the actor's loop (something waits to be started, or ended).
    """

    def __init__(
        self,
        session_id: str,
        elicitations: Elicitations,
        bus: EventBus,
        *,
        tools: Callable[[], Awaitable[SessionTools]],
        wake: Callable[[], None],
    ) -> None:
        self._session_id = session_id
        self._elicitations = elicitations
        self._bus = bus
        self._tools = tools
        self._wake = wake
        self._to_hold: list[HeldElicitation] = []
        self._to_call: list[HeldToolCall] = []
        # Held tool calls by id, from start until collected or expired.
        self.calls: dict[str, HeldToolCall] = {}

    def hold_elicitation(self, params: ElicitationParams) -> HeldElicitation:
        """Open an elicitation held by the session's nursery until it is answered.

        Wait on ``held.started``; ``held.elicitation_id`` is then set, or stays None if
        the session was stopped first. A stop withdraws it (marked expired).
        """
        held = HeldElicitation(params)
        self._to_hold.append(held)
        self._wake()
        return held

    def hold_tool_call(self, call: HeldToolCall) -> None:
        """Run ``call`` in the session's nursery (see :class:`HeldToolCall`)."""
        self._to_call.append(call)
        self.calls[call.call_id] = call
        self._wake()

    def withdraw(self) -> None:
        """A stop: what waits to be started never runs (each waiter is told so)."""
        for held in self._to_hold:
            held.started.set()
        self._to_hold.clear()
        for call in self._to_call:
            call.finish(_STOPPED)
            self.calls.pop(call.call_id, None)
        self._to_call.clear()

    def start_waiting(self, nursery: trio.Nursery) -> None:
        """Start, in the actor's nursery, every held elicitation and call that waits."""
        while self._to_hold:
            nursery.start_soon(self._hold, self._to_hold.pop(0))
        while self._to_call:
            nursery.start_soon(self._run_call, self._to_call.pop(0), nursery)

    async def _hold(self, held: HeldElicitation) -> None:
        try:
            async with self._elicitations.open(
                self._session_id, held.params, mark_waiting=False
            ) as waiter:
                held.elicitation_id = waiter.request.elicitation_id
                held.started.set()
                await waiter.done.wait()
        finally:
            held.started.set()
            self._wake()  # the actor may have no work left

    async def _run_call(self, call: HeldToolCall, nursery: trio.Nursery) -> None:
        """Run a held call, then keep it until its output is collected (or it expires).

        Outside any turn: its ASKs do not change the session's status. A kept call
        (a task) needs no collecting: its end is written to the log instead, before it
        is let go, so it is always found live or in the log — unless a stop, a delete
        or shutdown interrupted it, which the log then shows as a start with no end.
        """
        ended = False  # ran to its output, expired, or was cancelled by its caller
        try:
            with call.scope:
                with trio.move_on_after(call.ttl):
                    tools = await self._tools()
                    try:
                        await tools.start_services(nursery)
                        output = await tools.call(
                            call.name, call.arguments, in_turn=False, on_ask=call.note_ask
                        )
                    except HarnessError as exc:
                        output = f"Error: {exc.message}"
                    call.finish(output)
                    ended = True
                    await call.collected.wait()
                if not call.done:
                    call.finish(EXPIRED)
                    ended = True
            if not call.done and call.cancelled:
                call.finish(CANCELLED)
                ended = True
        finally:
            if not call.done:
                call.finish(EXPIRED)
            if call.kept and ended:
                await self._log_task_end(call)
            self.calls.pop(call.call_id, None)
            self._wake()  # the actor may have no work left

    async def _log_task_end(self, call: HeldToolCall) -> None:
        """Write a kept call's end after its start (shielded, bounded: a stop runs it)."""
        bus = self._bus
        status: Literal["completed", "cancelled"] = "cancelled" if call.cancelled else "completed"
        end = ToolTaskUpdated(
            call_id=call.call_id,
            name=call.name,
            status=status,
            started_at=call.started_at,
            output=call.output,
        )
        with trio.move_on_after(_LOG_TIMEOUT, shield=True):
            try:
                await call.announced.wait()
                await bus.publish(self._session_id, end)
                await bus.flush()
            except OmnigentError as exc:  # the session is being deleted
                log.info("the end of task %s was not logged: %s", call.call_id, exc.message)
