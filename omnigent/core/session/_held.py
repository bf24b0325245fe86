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

from collections.abc import Awaitable, Callable

import attrs
import trio

from ...errors import HarnessError
from ...model import ElicitationParams
from ..asking import Elicitations
from ..tools import SessionTools
from ..work import EXPIRED, HeldToolCall

__all__ = ["HeldElicitation", "HeldWork"]

_STOPPED = "Error: the session was stopped before the tool call ran"


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
        tools: the session's tool set (built on first use by the actor).
        wake: wakes the actor's loop (something waits to be started, or ended).
    """

    def __init__(
        self,
        session_id: str,
        elicitations: Elicitations,
        *,
        tools: Callable[[], Awaitable[SessionTools]],
        wake: Callable[[], None],
    ) -> None:
        self._session_id = session_id
        self._elicitations = elicitations
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

        Outside any turn: its ASKs do not change the session's status.
        """
        try:
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
                await call.collected.wait()
        finally:
            if not call.done:
                call.finish(EXPIRED)
            self.calls.pop(call.call_id, None)
            self._wake()  # the actor may have no work left
