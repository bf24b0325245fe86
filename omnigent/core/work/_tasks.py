"""Background tool tasks (``sys_call_async``) and the session inbox.

A background task runs a tool in the *session's* nursery, in its own cancel scope, so
it outlives the turn that started it but never the session: ``stop_session``, session
delete and runtime shutdown cancel it (and the tool's processes die with it). Whatever
ends it — completion, failure, ``sys_cancel_async``, a stop — its ``finally`` writes
exactly one inbox item, persisted, so a restart never loses an undelivered result.

Other session work writes to the inbox too: a terminal that goes quiet after activity
its agent has not read posts a ``terminal_idle`` item (see
:mod:`omnigent.core.work._terminals`).

``sys_read_inbox`` drains the inbox into lines a model can read. When an item arrives
while the session has no turn running, the session is woken with a turn whose input is
those lines (see :class:`~omnigent.core.session._actor.SessionActor`). The inbox also holds
the results of sub-agent work (``type: sub_agent``, see :mod:`._subagents`), rendered
as the original omnigent did: ``[System: sub-agent task <id> completed — agent:title
returned: …]``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import attrs
import trio

from ..._ids import new_id
from ...model import InboxUpdated
from ...stores import Store
from ..bus import EventBus

if TYPE_CHECKING:
    from ..tools import Verdict

__all__ = [
    "INBOX_OUTPUT_MAX_CHARS",
    "MAX_BACKGROUND_TASKS",
    "POLICY_FAILED",
    "BackgroundTasks",
    "format_inbox",
    "vet_inbox",
]

log = logging.getLogger(__name__)

MAX_BACKGROUND_TASKS = 1024
INBOX_OUTPUT_MAX_CHARS = 12000
POLICY_FAILED = "[Result suppressed by policy: policy evaluation failed]"


@attrs.define(eq=False)
class _Task:
    handle_id: str
    tool: str
    scope: trio.CancelScope


def _bounded(output: str) -> str:
    if len(output) <= INBOX_OUTPUT_MAX_CHARS:
        return output
    cut = len(output) - INBOX_OUTPUT_MAX_CHARS
    return output[:INBOX_OUTPUT_MAX_CHARS].rstrip() + f"\n...[truncated {cut} chars]"


def _sub_agent_line(item: dict[str, Any]) -> str:
    handle, status = item["task_id"], item["status"]
    agent, title = item.get("agent") or "sub_agent", item.get("title") or ""
    output = item.get("output") or ""
    if not isinstance(handle, str) or not isinstance(output, str):
        raise TypeError("malformed inbox item")
    output = _bounded(output)
    target = f"{agent}:{title}" if title else str(agent)
    said = bool(output.strip())
    if status == "completed":
        if not said:
            return f"[System: sub-agent task {handle} completed — {target} produced no output]"
        return f"[System: sub-agent task {handle} completed — {target} returned: {output}]"
    if status == "failed":
        return f"[System: sub-agent task {handle} failed — {target} error: {output}]"
    if status == "cancelled":
        if said:
            return (
                f"[System: sub-agent task {handle} cancelled — {target}; "
                f"output before cancellation: {output}]"
            )
        return f"[System: sub-agent task {handle} cancelled — {target}]"
    raise ValueError(f"unknown inbox status {status!r}")


class _MalformedIdle(ValueError):
    """A ``terminal_idle`` item without a terminal or session name (says which)."""


def _idle_line(item: dict[str, Any]) -> str:
    for key in ("terminal", "session"):
        if not isinstance(item.get(key), str):
            raise _MalformedIdle(f"'{key}' must be a string, got {item.get(key)!r}")
    return (
        f"[System: terminal {item['terminal']} (session {item['session']}) is idle — its "
        "screen stopped changing; read it with sys_terminal_read]"
    )


def _output_line(item: Any) -> str:
    if not isinstance(item, dict):
        raise TypeError("an inbox item must be an object")
    if item.get("type") == "terminal_idle":
        return _idle_line(item)
    if item.get("type") == "sub_agent":
        return _sub_agent_line(item)
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
        except _MalformedIdle as exc:  # the original omnigent's words
            log.warning("malformed terminal_idle inbox item %s ignored: %s", row_id, exc)
            lines.append(f"[System: malformed terminal_idle inbox item ignored — {exc}]")
        except (ValueError, TypeError, KeyError):
            log.warning("malformed inbox item %s", row_id)
            lines.append(f"[System: inbox item {row_id} is malformed and was skipped]")
    return lines


async def vet_inbox(
    rows: list[tuple[str, str]], vet: Callable[[dict[str, Any]], Awaitable[Verdict]]
) -> tuple[list[tuple[str, str]], list[str]]:
    """Pass each sub-agent result in ``rows`` through ``vet`` (the result policies).

    Returns the rows to show (outputs replaced or suppressed as the verdicts say) and
    the ids that may be marked read: a row whose vetting raised is shown with its
    output hidden (:data:`POLICY_FAILED`) and stays unread, for the next read.

    Cancellation: propagates; nothing is marked read.
    """
    shown: list[tuple[str, str]] = []
    read: list[str] = []
    for row_id, data in rows:
        try:
            payload = json.loads(data)
        except ValueError:
            payload = None
        if (
            not isinstance(payload, dict)
            or payload.get("type") != "sub_agent"
            or payload.get("status") not in ("completed", "failed")
        ):
            shown.append((row_id, data))
            read.append(row_id)
            continue
        try:
            verdict = await vet(payload)
        except Exception:
            log.warning("the result policies failed on inbox item %s", row_id, exc_info=True)
            shown.append((row_id, json.dumps({**payload, "output": POLICY_FAILED})))
            continue
        if verdict.action in ("DENY", "ASK"):
            reason = verdict.reason or "no reason given"
            payload["output"] = f"[Result suppressed by policy: {reason}]"
        elif verdict.data is not None:
            data_out = verdict.data
            payload["output"] = data_out if isinstance(data_out, str) else json.dumps(data_out)
        shown.append((row_id, json.dumps(payload)))
        read.append(row_id)
    return shown, read


class BackgroundTasks:
    """The background tool tasks of one session actor.

    Args:
        session_id: the session.
        nursery: the session's nursery (tasks are its children).
        store, bus: where inbox items and ``session.inbox.updated`` go.
        on_inbox: called after an inbox item is written (wakes the session).
        on_work_done: called when work started with :meth:`start_owned` ends (the
            session may have nothing left to do).
    """

    def __init__(
        self,
        session_id: str,
        nursery: trio.Nursery,
        store: Store,
        bus: EventBus,
        on_inbox: Callable[[], None],
        on_work_done: Callable[[], None] = lambda: None,
    ) -> None:
        self.session_id = session_id
        self._nursery = nursery
        self._store = store
        self._bus = bus
        self._on_inbox = on_inbox
        self._on_work_done = on_work_done
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
                await self._store.add_running_task(self.session_id, task.handle_id, task.tool)
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
        await self._add_to_inbox(item, task_id=task.handle_id)

    async def _add_to_inbox(self, item: dict[str, Any], task_id: str | None = None) -> None:
        count = await self._store.add_inbox_item(
            self.session_id, new_id("inbox"), json.dumps(item), task_id=task_id
        )
        await self._bus.publish(self.session_id, InboxUpdated(count=count))

    async def post_inbox(self, item: dict[str, Any]) -> None:
        """Persist one inbox item (e.g. ``terminal_idle``), announce it, wake the session.

        Cancellation: the session is woken even if the write is cancelled.
        """
        try:
            await self._add_to_inbox(item)
        finally:
            self._on_inbox()

    async def start_owned(self, run: Callable[..., Awaitable[Any]], *args: Any, name: str) -> Any:
        """Start long-lived session work (a terminal) in the session's nursery.

        ``run(*args, task_status=...)`` is started as :meth:`trio.Nursery.start` does:
        this returns what it passes to ``task_status.started()``, and raises what it
        raises before that. From then on it belongs to the session — a stop, delete or
        shutdown cancels it — and the session is told when it ends.
        """
        return await self._nursery.start(self._run_owned, run, args, name=name)

    async def _run_owned(
        self,
        run: Callable[..., Awaitable[Any]],
        args: tuple[Any, ...],
        *,
        task_status: trio.TaskStatus[Any] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        try:
            await run(*args, task_status=task_status)
        finally:
            # Last, with no checkpoint after it: by the time the woken actor runs,
            # this task has left the nursery, so the actor sees it gone.
            self._on_work_done()
