"""Held tool calls kept as durable tasks (MCP's tasks): :class:`ToolTasks`.

A held tool call (:meth:`Runtime.start_tool_call`) lives in its session actor and ends
with its collection. *Keeping* one makes it a task: its start is written to the
session's event log (``session.tool_task.updated``, ``working``) before anyone is told
its id, and its end (``completed`` with its output, or ``cancelled``) when it ends —
the actor's :class:`~omnigent.core.session.HeldWork` writes that — so whoever holds the
id finds the task live here, or in the log: after its request is gone, after a
reconnect, after the server restarted. A call the log shows started but not ended,
which runs nowhere any more (its server went away, its session was stopped), is
``failed``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Literal

from ..._ids import now
from ...errors import ToolCallNotFound
from ...model import ToolTaskUpdated, event_from_dict
from ...stores import SessionRow, Store
from ..bus import EventBus
from ..cluster import Tenure
from ..work import INTERRUPTED, HeldToolCall, ToolTask

__all__ = ["ToolTasks"]


class ToolTasks:
    """Keeps held calls as tasks and finds them again. Owned by the ``Runtime``.

    Args:
        store: where a task's log entries are read back.
        bus: where a kept call's start is written.
        held: the held call of a session by id, if it runs here.
        here: hold the session's tree in this process (raises ``SessionElsewhere``
            when another server holds it: a live call would be there).
    """

    def __init__(
        self,
        *,
        store: Store,
        bus: EventBus,
        held: Callable[[str, str], HeldToolCall | None],
        here: Callable[[SessionRow], Awaitable[Tenure]],
    ) -> None:
        self._store = store
        self._bus = bus
        self._held = held
        self._here = here

    async def keep(self, session_id: str, call_id: str) -> ToolTask:
        """Keep a held call as a task (once); its state as a task.

        Raises:
            ToolCallNotFound: no such held call on the session here.
        """
        call = self._held(session_id, call_id)
        if call is None:
            raise ToolCallNotFound(call_id)
        if not call.kept:
            call.kept = True
            started = ToolTaskUpdated(
                call_id=call.call_id, name=call.name, status="working", started_at=call.started_at
            )
            try:
                await self._bus.publish(session_id, started)
                await self._bus.flush()
            finally:
                call.announced.set()  # its end may be written now, after its start
                call.collected.set()  # the log holds its end: nobody collects it
        return _live_task(call)

    async def find(self, row: SessionRow, call_id: str) -> ToolTask | None:
        """A kept call by id: live here, else as the log has it (``None``: none such).

        Raises:
            SessionElsewhere: another server holds the session's tree.
        """
        call = self._held(row.id, call_id)
        if call is not None and call.kept:
            return _live_task(call)
        logged = await self._store.newest_event(
            row.id, [ToolTaskUpdated.type], match=("call_id", call_id)
        )
        if logged is None:
            return None
        entry = event_from_dict(logged)
        assert isinstance(entry, ToolTaskUpdated)
        if entry.status != "working":
            return ToolTask(
                entry.call_id,
                entry.name,
                entry.status,
                entry.started_at,
                entry.created_at,
                output=entry.output,
            )
        (await self._here(row)).release()  # held elsewhere: there it may run still
        if (call := self._held(row.id, call_id)) is not None:
            return _live_task(call)
        return ToolTask(
            entry.call_id, entry.name, "failed", entry.started_at, now(), error=INTERRUPTED
        )

    def cancel(self, session_id: str, call_id: str) -> bool:
        """Cancel a held call that runs here; whether there was one still running."""
        call = self._held(session_id, call_id)
        if call is None or call.done:
            return False
        call.cancel()
        return True


def _live_task(call: HeldToolCall) -> ToolTask:
    """A kept call that runs here, as a task."""
    if call.output is not None:
        status: Literal["completed", "cancelled"] = "cancelled" if call.cancelled else "completed"
        return ToolTask(call.call_id, call.name, status, call.started_at, now(), call.output)
    if call.asking is not None:
        return ToolTask(
            call.call_id, call.name, "input_required", call.started_at, now(), asking=call.asking
        )
    return ToolTask(call.call_id, call.name, "working", call.started_at, now())
