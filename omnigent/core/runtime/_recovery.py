"""Recovery at start: finish what a process that died (``kill -9``) left in flight.

A process killed mid-turn runs no ``finally``. The next :func:`recover` (run by
``open_runtime`` when it owns the database, before anything else starts) puts the
store back into a state every guarantee holds for:

* **Process groups** its tools started and that still run are killed (the same
  group only: see :func:`omnigent.tools.kill_orphaned_group`).
* **Interrupted turns** (sessions left ``running`` or ``waiting``) end with the
  terminal pair, ``response.failed`` + ``session.status failed`` with code
  ``runtime_restarted``. Each tool call of theirs that has no output gets one
  saying it was interrupted (the call is marked ``completed`` with that
  ``Error: …`` output, as any failed call), so a model reading the history sees
  every call answered.
* **Pending elicitations** are expired: their waiters died with the process.
* **Background tasks** that were running each get a ``failed`` inbox item
  (``interrupted by a restart``), and their session is woken, so the agent that
  started them learns of it.
* **Undelivered inbox items** — a result that arrived while a turn ran, whose
  session died before the turn ended and read it — wake their session too: an idle
  session with an unread result runs a turn for it, as it would have live.
* **Unanswered messages** — stored, but taken by no turn (buffered during the killed
  turn, or accepted just before the kill) — are answered: each session with any
  runs a continuation turn for them, exactly as when a turn ends with messages
  still buffered. A message is taken when a turn starts, so a second crash during
  that turn does not run it a third time. The exception is a sub-agent dispatch
  still open: the sub-agent recovery delivers it ``failed`` to the parent, which
  decides whether to send it again, so its message is not run as well.
"""

from __future__ import annotations

import json
import logging
from collections import defaultdict
from collections.abc import Iterable, Mapping

import attrs
import trio

from ..._ids import new_id
from ...model import (
    ErrorInfo,
    FunctionCallItem,
    FunctionCallOutputItem,
    InboxUpdated,
    Item,
    MessageItem,
    OutputItemDone,
    ResponseFailed,
    ResponseInfo,
    SessionStatus,
    SessionStatusChanged,
    TurnStatus,
    structure,
    unstructure,
)
from ...processes import kill_orphaned_group
from ...stores import ProcessGroupRow, Store
from ..bus import EventBus
from ._actors import Actors

__all__ = ["INTERRUPTED_CALL", "INTERRUPTED_TASK", "Resumption", "recover"]

log = logging.getLogger(__name__)

INTERRUPTED_CALL = (
    "Error: this call was interrupted: the runtime restarted while it ran, so its "
    "effects are unknown; check before calling it again"
)
INTERRUPTED_TASK = "interrupted by a restart"

_UNFINISHED = tuple(status for status in SessionStatus if status.active)
_RESPONSE_EVENTS = (
    "response.created",
    "response.completed",
    "response.failed",
    "response.cancelled",
)
_KILL_GRACE = 2.0


@attrs.frozen
class Resumption:
    """The work a recovery found for the sessions' actors, started by :meth:`start`.

    Kept apart from :func:`recover` so that no actor starts until every store repair
    (the sub-agent recovery's too) is done, and then all start at once, before the
    runtime is handed to its user — who may register the harnesses they need.
    """

    messages: Mapping[str, tuple[MessageItem, ...]]
    inbox: frozenset[str]

    def start(self, actors: Actors, also_inbox: Iterable[str] = ()) -> None:
        """Hand each session its unanswered messages; wake those with unread results.

        Synchronous: no actor runs before every one has its work.
        """
        for session_id, messages in self.messages.items():
            actor = actors.actor(session_id)
            for message in messages:
                actor.enqueue(message)
            log.info("answering %d unanswered messages of %s", len(messages), session_id)
        for session_id in self.inbox.union(also_inbox):
            actors.actor(session_id).note_inbox()


async def recover(store: Store, bus: EventBus, sessions: set[str] | None = None) -> Resumption:
    """Finish what the previous process left in flight (see the module docstring).

    ``sessions`` limits it to those sessions: a tree taken over from a dead server,
    beside other servers whose work is alive (``None``: the whole database, which this
    process owns). Returns the work to give the sessions' actors
    (:meth:`Resumption.start`).
    """
    scope = None if sessions is None else sorted(sessions)
    await _kill_orphaned_groups(store, scope)
    await store.expire_pending_elicitations(scope)
    for session_id in await store.sessions_with_status(_UNFINISHED):
        if sessions is None or session_id in sessions:
            await _end_interrupted_turn(store, bus, session_id)
    await _fail_interrupted_tasks(store, bus, scope)
    # A parent's dispatch still open is settled by the sub-agent recovery (delivered
    # ``failed``: the parent decides whether to send again); its message is not run.
    dispatched = {w.message_id for w in await store.list_work() if w.message_id is not None}
    pending: defaultdict[str, list[MessageItem]] = defaultdict(list)
    for row in await store.pending_items(scope):
        item = structure(row.item, Item)
        if item.id in dispatched:
            await store.settle_items(row.session_id, [item.id])
        elif isinstance(item, MessageItem):
            pending[row.session_id].append(item)
    # Every unread result wakes its session: the interrupted tasks' own, and those
    # that arrived during a turn the crash cut short (the live actor would have run a
    # turn for them once that turn ended).
    unread = frozenset(
        s for s in await store.sessions_with_inbox() if sessions is None or s in sessions
    )
    return Resumption({sid: tuple(m) for sid, m in pending.items()}, unread)


async def _kill_orphaned_groups(store: Store, scope: list[str] | None) -> None:
    async def kill(row: ProcessGroupRow) -> None:
        try:
            if await kill_orphaned_group(row.pgid, row.start_time, row.boot_id, grace=_KILL_GRACE):
                log.warning(
                    "killed process group %d that a tool of session %s left running",
                    row.pgid,
                    row.session_id,
                )
        except OSError:
            log.warning("could not kill process group %d", row.pgid, exc_info=True)
        await store.delete_process_group(row.pgid, row.start_time)

    async with trio.open_nursery() as nursery:
        for row in await store.process_groups(scope):
            nursery.start_soon(kill, row)


async def _end_interrupted_turn(store: Store, bus: EventBus, session_id: str) -> None:
    error = ErrorInfo("the runtime stopped while this turn was running", "runtime_restarted")
    last = await store.newest_event(session_id, _RESPONSE_EVENTS)
    response_id = None
    if last is not None and last.get("type") == "response.created":
        response_id = str(last["response"]["id"])
    await _answer_interrupted_calls(store, bus, session_id, response_id)
    ended = SessionStatusChanged(status=SessionStatus.FAILED, error=error)
    if response_id is None:
        await bus.publish_now(session_id, ended)
    else:
        info = ResponseInfo(id=response_id, status=TurnStatus.FAILED)
        await bus.publish_now(session_id, ResponseFailed(response=info, error=error), ended)
    log.warning("session %s: its turn was interrupted by the restart", session_id)


async def _answer_interrupted_calls(
    store: Store, bus: EventBus, session_id: str, response_id: str | None
) -> None:
    """Give every tool call without an output one saying it was interrupted."""
    items = [structure(row, Item) for row in (await store.list_items(session_id)).rows]
    answered = {i.call_id for i in items if isinstance(i, FunctionCallOutputItem)}
    for call in items:
        if not isinstance(call, FunctionCallItem) or call.call_id in answered:
            continue
        done = attrs.evolve(call, status="completed")
        output = FunctionCallOutputItem(call_id=call.call_id, output=INTERRUPTED_CALL)
        await store.put_items(session_id, [unstructure(done, Item), unstructure(output, Item)])
        for item in (done, output):
            await bus.publish(session_id, OutputItemDone(item=item, response_id=response_id))


async def _fail_interrupted_tasks(store: Store, bus: EventBus, scope: list[str] | None) -> None:
    """A ``failed`` inbox item for every task that was running."""
    for task in await store.running_tasks(scope):
        data = {
            "handle_id": task.handle_id,
            "tool": task.tool,
            "status": "failed",
            "output": INTERRUPTED_TASK,
        }
        count = await store.add_inbox_item(
            task.session_id, new_id("inbox"), json.dumps(data), task_id=task.handle_id
        )
        await bus.publish(task.session_id, InboxUpdated(count=count))
