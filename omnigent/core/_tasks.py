"""Background tool tasks (``sys_call_async``) and the session inbox.

A background task runs a tool in the *session's* nursery, in its own cancel scope, so
it outlives the turn that started it but never the session: ``stop_session``, session
delete and runtime shutdown cancel it (and the tool's processes die with it). Whatever
ends it — completion, failure, ``sys_cancel_async``, a stop — its ``finally`` writes
exactly one inbox item, persisted, so a restart never loses an undelivered result.

``sys_read_inbox`` drains the inbox into lines a model can read. When an item arrives
while the session has no turn running, the session is woken with a turn whose input is
those lines (see :class:`~omnigent.core._session.SessionActor`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import attrs
import trio

from .._ids import new_id
from ..model import InboxUpdated
from ..stores import Store
from ._bus import EventBus

__all__ = ["MAX_BACKGROUND_TASKS", "BackgroundTasks", "format_inbox"]

log = logging.getLogger(__name__)

MAX_BACKGROUND_TASKS = 1024


@attrs.define(eq=False)
class _Task:
    handle_id: str
    tool: str
    scope: trio.CancelScope


def _output_line(item: dict[str, Any]) -> str:
    handle, tool, status = item["handle_id"], item["tool"], item["status"]
    output = item.get("output", "")
    if not isinstance(handle, str) or not isinstance(tool, str) or not isinstance(output, str):
        raise TypeError("malformed inbox item")
    if status == "completed":
        said = output if output else "produced no output"
        verb = "returned: " + said if output else said
        return f"[System: task {handle} completed — {tool} {verb}]"
    if status == "failed":
        return f"[System: task {handle} failed — {tool}: {output or 'no error message'}]"
    if status == "cancelled":
        return f"[System: task {handle} was cancelled — {tool}]"
    raise ValueError(f"unknown inbox status {status!r}")


def format_inbox(rows: list[tuple[str, str]]) -> list[str]:
    """Lines a model can read, one per inbox row ``(id, json)``.

    A malformed row is reported in its place and skipped; it never aborts the drain.
    """
    lines = []
    for row_id, data in rows:
        try:
            lines.append(_output_line(json.loads(data)))
        except (ValueError, TypeError, KeyError):
            log.warning("malformed inbox item %s", row_id)
            lines.append(f"[System: inbox item {row_id} is malformed and was skipped]")
    return lines


class BackgroundTasks:
    """The background tool tasks of one session actor.

    Args:
        session_id: the session.
        nursery: the session's nursery (tasks are its children).
        store, bus: where inbox items and ``session.inbox.updated`` go.
        on_inbox: called after an inbox item is written (wakes the session).
    """

    def __init__(
        self,
        session_id: str,
        nursery: trio.Nursery,
        store: Store,
        bus: EventBus,
        on_inbox: Callable[[], None],
    ) -> None:
        self.session_id = session_id
        self._nursery = nursery
        self._store = store
        self._bus = bus
        self._on_inbox = on_inbox
        self._tasks: dict[str, _Task] = {}

    @property
    def running(self) -> int:
        return len(self._tasks)

    def start(self, tool: str, run: Callable[[], Awaitable[str]]) -> str:
        """Start ``run`` (one tool call) in the background; returns its handle id.

        Raises:
            OverflowError: the session already runs MAX_BACKGROUND_TASKS tasks.
        """
        if len(self._tasks) >= MAX_BACKGROUND_TASKS:
            raise OverflowError(f"too many background tasks (limit {MAX_BACKGROUND_TASKS})")
        task = _Task(new_id("task"), tool, trio.CancelScope())
        self._tasks[task.handle_id] = task
        self._nursery.start_soon(self._run, task, run, name=f"background {tool}")
        return task.handle_id

    def cancel(self, handle_id: str) -> bool:
        """Cancel one task; False if no such task is running."""
        task = self._tasks.get(handle_id)
        if task is None:
            return False
        task.scope.cancel()
        return True

    async def _run(self, task: _Task, run: Callable[[], Awaitable[str]]) -> None:
        status, output = "failed", "the task ended unexpectedly"
        try:
            with task.scope:
                output = await run()
                status = "failed" if output.startswith("Error:") else "completed"
            if task.scope.cancelled_caught:
                status, output = "cancelled", ""
        except BaseException as exc:
            if isinstance(exc, trio.Cancelled | KeyboardInterrupt) or not isinstance(
                exc, Exception
            ):
                status, output = "cancelled", ""
                raise
            log.warning("background task %s failed", task.handle_id, exc_info=True)
            status, output = "failed", f"{type(exc).__name__}: {exc}"
        finally:
            del self._tasks[task.handle_id]
            try:
                with trio.move_on_after(10, shield=True):
                    await self._deliver(task, status, output)
            finally:
                self._on_inbox()  # wake the session even if delivery failed

    async def _deliver(self, task: _Task, status: str, output: str) -> None:
        item = {"handle_id": task.handle_id, "tool": task.tool, "status": status, "output": output}
        count = await self._store.add_inbox_item(self.session_id, new_id("inbox"), json.dumps(item))
        await self._bus.publish(self.session_id, InboxUpdated(count=count))
