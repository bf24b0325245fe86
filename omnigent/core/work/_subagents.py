"""Sub-agent work: dispatches to child sessions, watched and delivered exactly once.

A parent dispatches work to a child session (``sys_session_send``). The child is an
ordinary session with its own actor; the *dispatch* belongs to the parent. It is a work
entry in the store (:class:`~omnigent.stores.WorkRow`, guarded by its ``work_id``) and
a task in the parent's nursery (:class:`ChildWork`) in its own cancel scope — so
``sys_cancel_task``, stopping the parent and deleting it stop the child's work too, and
the parent's actor stays alive while its children work.

The life of one dispatch (:class:`Dispatch`):

``launching``
    the entry is stored, the message persisted and handed to the child.
``running``
    a turn of the child took the message (as its input or as an injection).
settled
    after that turn — and any continuation turn, inbox wake-up, background task or
    work of the child's own that followed it — the child has nothing left to do. Its
    *final* answer is the last turn's: the text of its last assistant message, or the
    error of a failed turn.
finished
    the watcher finishes the entry and writes the parent's inbox item in one store
    transaction, which changes nothing if the entry is no longer open: every dispatch
    is delivered exactly once. Then the parent is woken (an idle parent runs a turn).

A cancel settles the dispatch ``cancelled`` first and then stops the child, so a
completion that arrives late is dropped. When the runtime shuts down, a dispatch that
has not settled stays open in the store; the next start settles it from what the store
says (:func:`recover_work`): a child that had finished delivers its answer, any other
delivers ``failed`` (interrupted by a restart), and its parent is woken.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import attrs
import trio

from ..._cancellation import only_exceptions, split_cancellation
from ..._ids import new_id
from ...errors import NotFound
from ...model import (
    InboxUpdated,
    MessageItem,
    SessionStatus,
    TurnStatus,
    item_text,
    structure,
)
from ...stores import Store, WorkRow
from ..bus import EventBus

__all__ = [
    "INTERRUPTED_WORK",
    "ChildWork",
    "ChildWorkHooks",
    "Dispatch",
    "SubAgents",
    "new_work_id",
    "recover_work",
    "work_payload",
]

log = logging.getLogger(__name__)

INTERRUPTED_WORK = "interrupted by a restart before the sub-agent finished; send it again"

# How long the shielded end of a dispatch may take: stopping the child (its turn's
# terminal events, its harness closing) and writing the inbox item.
_CONCLUDE_TIMEOUT = 30.0


def new_work_id() -> str:
    """The id of one dispatch, e.g. ``subagent_a1b2c3d4e5f6``."""
    return f"subagent_{uuid.uuid4().hex[:12]}"


def work_payload(row: WorkRow, status: str, output: str) -> dict[str, Any]:
    """The parent's inbox item for a finished dispatch (the original omnigent's shape)."""
    child = row.child_session_id
    return {
        "type": "sub_agent",
        "work_id": row.work_id,
        "task_id": child,
        "handle_id": child,
        "conversation_id": child,
        "tool_name": row.agent,
        "agent": row.agent,
        "title": row.title,
        "status": status,
        "output": output,
    }


@attrs.define(eq=False)
class Dispatch:
    """One dispatch being watched, from its send until its delivery.

    Mutated only by the runtime's own hooks (:class:`SubAgents`) and its watcher.
    """

    row: WorkRow
    scope: trio.CancelScope = attrs.field(factory=trio.CancelScope)
    # The child's turn took the message (``running``); ``moved`` fires on that or
    # on settling, whichever is first.
    taken: bool = False
    moved: trio.Event = attrs.field(factory=trio.Event)
    settled: trio.Event = attrs.field(factory=trio.Event)
    result: tuple[TurnStatus, str] | None = None
    # Whether concluding must stop the child (a cancel from this side).
    stop_child: bool = False
    # Whether the parent asked for the cancel (sys_cancel_task), as opposed to its child
    # being cancelled by something else — a shutdown that stops every session.
    cancel_requested: bool = False
    done: trio.Event = attrs.field(factory=trio.Event)
    # The status delivered to the parent (``None``: not delivered by this watcher).
    delivered: TurnStatus | None = None

    @property
    def child_id(self) -> str:
        return self.row.child_session_id

    def settle(self, status: TurnStatus, output: str) -> None:
        """Fix the dispatch's result; the first one wins (a late completion is dropped)."""
        if self.result is None:
            self.result = (status, output)
            self.settled.set()
            self.moved.set()


@attrs.frozen
class TurnOutcome:
    """How a turn ended, as a parent waiting on it needs to know.

    Attributes:
        status: how it ended (``completed``, ``failed`` or ``cancelled``): also the
            status its dispatch is delivered with.
        error: the failure's message (``failed`` only).
        text: the text of the last assistant message the turn recorded ("" if none).
    """

    status: TurnStatus
    error: str | None = None
    text: str = ""


class SubAgents:
    """Every dispatch the runtime watches, by child and by message. Owned by the runtime.

    The actor hooks (:meth:`messages_taken`, :meth:`session_settled`) are synchronous
    and cheap when a session has no dispatch (one dict lookup).
    """

    def __init__(self, store: Store, bus: EventBus) -> None:
        self._store = store
        self._bus = bus
        self._by_child: dict[str, Dispatch] = {}
        self._by_message: dict[str, Dispatch] = {}

    @property
    def watching(self) -> int:
        return len(self._by_child)

    def open_for(self, child_id: str) -> Dispatch | None:
        """The dispatch to ``child_id`` that has not been delivered yet, if any."""
        return self._by_child.get(child_id)

    async def wait_concluded(
        self, child_ids: list[str], timeout: float = _CONCLUDE_TIMEOUT
    ) -> None:
        """Wait (bounded) until the dispatches to these children have been concluded."""
        with trio.move_on_after(timeout):
            for child_id in child_ids:
                dispatch = self._by_child.get(child_id)
                if dispatch is not None:
                    await dispatch.done.wait()

    def watch(self, dispatch: Dispatch) -> None:
        """Start tracking ``dispatch`` (before its message reaches the child).

        Raises:
            RuntimeError: the child already has an open dispatch (a bug in the caller).
        """
        if dispatch.child_id in self._by_child:
            raise RuntimeError(f"{dispatch.child_id} already has an open dispatch")
        self._by_child[dispatch.child_id] = dispatch
        if dispatch.row.message_id is not None:
            self._by_message[dispatch.row.message_id] = dispatch

    def forget(self, dispatch: Dispatch) -> None:
        """Stop tracking ``dispatch``: never a newer dispatch to the same child."""
        if self._by_child.get(dispatch.child_id) is dispatch:
            del self._by_child[dispatch.child_id]
        message_id = dispatch.row.message_id
        if message_id is not None and self._by_message.get(message_id) is dispatch:
            del self._by_message[message_id]

    # -- hooks from the child's actor --------------------------------------------------

    def messages_taken(self, item_ids: list[str], response_id: str) -> None:
        """A turn took these messages (``response_id`` ``""``: a stop dropped them)."""
        for item_id in item_ids:
            dispatch = self._by_message.get(item_id)
            if dispatch is None:
                continue
            if response_id:
                dispatch.taken = True
                dispatch.moved.set()
            else:
                dispatch.settle(TurnStatus.CANCELLED, "")

    def session_settled(
        self, session_id: str, outcome: TurnOutcome | None, *, ended: bool = False
    ) -> None:
        """The session has nothing left to do (``ended``: its actor ended) after a turn.

        Settles its dispatch if a turn took the dispatch's message: the outcome of
        the last turn is the dispatch's result.
        """
        dispatch = self._by_child.get(session_id)
        if dispatch is None or not dispatch.taken:
            return
        if outcome is None:
            dispatch.settle(TurnStatus.CANCELLED, "")
            return
        status = outcome.status
        if status is TurnStatus.FAILED:
            dispatch.settle(status, outcome.error or "the sub-agent's turn failed")
        else:
            dispatch.settle(status, outcome.text)
        if ended:
            log.debug("dispatch %s settled as its child's actor ended", dispatch.row.work_id)

    # -- the parent's side -------------------------------------------------------------

    async def mark_running(self, dispatch: Dispatch) -> None:
        """Record that the child took the dispatch's message."""
        try:
            await self._store.start_work(dispatch.row.work_id)
        except Exception:
            log.warning("could not mark %s running", dispatch.row.work_id, exc_info=True)

    async def finish(self, dispatch: Dispatch) -> bool:
        """Finish the entry and write the parent's inbox item; True if delivered now."""
        assert dispatch.result is not None
        status, output = dispatch.result
        data = json.dumps(work_payload(dispatch.row, status, output))
        count = await self._store.finish_work(
            dispatch.row.work_id, status, output, new_id("inbox"), data
        )
        if count is None:
            return False
        dispatch.delivered = status
        await self._bus.publish(dispatch.row.parent_session_id, InboxUpdated(count=count))
        return True

    def cancel(self, dispatch: Dispatch) -> None:
        """Settle ``dispatch`` ``cancelled`` (unless it has settled) and stop its child.

        Returns at once; ``dispatch.done`` is set once the child is stopped and the
        result delivered.
        """
        dispatch.cancel_requested = True
        if dispatch.result is None:
            dispatch.settle(TurnStatus.CANCELLED, "")
            dispatch.stop_child = True
        dispatch.scope.cancel()


def _cut_short(dispatch: Dispatch) -> bool:
    """Whether a dispatch ended without an answer of its own: unsettled, or settled
    ``cancelled`` by a cancel the parent did not ask for (its child was stopped by the
    shutdown too, which may reach the child first)."""
    if dispatch.result is None:
        return True
    return dispatch.result[0] is TurnStatus.CANCELLED and not dispatch.cancel_requested


@attrs.frozen(eq=False)
class ChildWorkHooks:
    """What a dispatch watcher asks of the runtime, given once by it.

    Attributes:
        announce: publish a child's summary on its parent (its dispatch was delivered).
        stop_session: stop a session (a cancelled dispatch's child) and wait for it.
        closing: whether the runtime is shutting down (an unsettled dispatch is then
            left open for the next start).
    """

    announce: Callable[[str], Awaitable[None]]
    stop_session: Callable[[str], Awaitable[None]]
    closing: Callable[[], bool]


class ChildWork:
    """The dispatches one session's actor watches, each a task in its nursery.

    Args:
        session_id: the parent session.
        nursery: its actor's nursery (the watchers are its children).
        subagents: the runtime's registry.
        hooks: what the watchers ask of the runtime.
        on_inbox: called after a result reaches the inbox (wakes the parent).
    """

    def __init__(
        self,
        session_id: str,
        nursery: trio.Nursery,
        subagents: SubAgents,
        hooks: ChildWorkHooks,
        on_inbox: Callable[[], None],
    ) -> None:
        self.session_id = session_id
        self._nursery = nursery
        self._subagents = subagents
        self._hooks = hooks
        self._on_inbox = on_inbox
        self._running = 0

    @property
    def running(self) -> int:
        """How many dispatches of this session are still being watched."""
        return self._running

    def start(self, dispatch: Dispatch) -> None:
        """Watch ``dispatch`` in the parent's nursery until it is delivered."""
        self._running += 1
        self._nursery.start_soon(self._watch, dispatch, name=f"sub-agent {dispatch.child_id}")

    async def _watch(self, dispatch: Dispatch) -> None:
        """Wait for the dispatch to settle, then deliver it.

        Cancellation: a cancel of the dispatch's scope or of the parent settles it
        ``cancelled``, stops the child and delivers that — except at shutdown, when an
        unsettled dispatch is left open for the next start.
        """
        try:
            with dispatch.scope:
                await dispatch.moved.wait()
                if dispatch.taken and dispatch.result is None:
                    await self._subagents.mark_running(dispatch)
                await dispatch.settled.wait()
        except BaseException as exc:
            cancel, failure = split_cancellation(exc)
            if failure is None or not only_exceptions(failure):
                dispatch.stop_child = dispatch.result is None
                raise
            log.warning("watching %s failed", dispatch.row.work_id, exc_info=failure)
            dispatch.settle(TurnStatus.FAILED, f"watching the sub-agent failed: {failure}")
            if cancel is not None:
                raise cancel from None
        finally:
            await self._conclude(dispatch)

    async def _conclude(self, dispatch: Dispatch) -> None:
        delivered = False
        try:
            with trio.move_on_after(_CONCLUDE_TIMEOUT, shield=True):
                if self._hooks.closing() and _cut_short(dispatch):
                    return  # left open: the next start settles it (recover_work)
                dispatch.settle(TurnStatus.CANCELLED, "")
                if dispatch.stop_child:
                    await self._hooks.stop_session(dispatch.child_id)
                delivered = await self._subagents.finish(dispatch)
                if delivered:
                    await self._announce(dispatch.child_id)
        except Exception:
            log.exception("could not deliver %s", dispatch.row.work_id)
        finally:
            self._running -= 1
            self._subagents.forget(dispatch)
            dispatch.done.set()
            if delivered:
                self._on_inbox()

    async def _announce(self, child_id: str) -> None:
        try:
            await self._hooks.announce(child_id)
        except NotFound:
            pass  # the child is being deleted: there is nothing to show
        except Exception:
            log.warning("could not announce %s to its parent", child_id, exc_info=True)


async def recover_work(store: Store, bus: EventBus, sessions: set[str] | None = None) -> set[str]:
    """Settle every dispatch a previous process left open; returns the parents to wake.

    ``sessions`` limits it to dispatches between these sessions (a tree taken over
    from a dead server: the other servers' dispatches are alive).

    A child whose turn took the message and that is ``idle`` now had finished: its
    last assistant message is delivered as ``completed``. Any other open dispatch —
    its child was interrupted, or never read the message — is delivered ``failed``
    with :data:`INTERRUPTED_WORK`. An entry whose parent or child is gone is dropped.
    """
    woken: set[str] = set()
    for row in await store.list_work():
        if sessions is not None and not {row.parent_session_id, row.child_session_id} & sessions:
            continue
        child = await store.get_session(row.child_session_id)
        parent = await store.get_session(row.parent_session_id)
        if child is None or parent is None:
            await store.drop_work(row.work_id)
            continue
        if row.status == "running" and child.status == SessionStatus.IDLE:
            status, output = TurnStatus.COMPLETED, await _last_answer(store, row.child_session_id)
        else:
            status, output = TurnStatus.FAILED, INTERRUPTED_WORK
        data = json.dumps(work_payload(row, status, output))
        count = await store.finish_work(row.work_id, status, output, new_id("inbox"), data)
        if count is not None:
            await bus.publish(row.parent_session_id, InboxUpdated(count=count))
            woken.add(row.parent_session_id)
            log.info(
                "settled %s of %s after a restart: %s", row.work_id, row.parent_session_id, status
            )
    return woken


async def _last_answer(store: Store, session_id: str) -> str:
    """The text of the session's newest assistant message ("" if it has none)."""
    page = await store.list_items(session_id, order="desc", limit=200)
    for data in page.rows:
        if data.get("type") == "message" and data.get("role") == "assistant":
            return item_text(structure(data, MessageItem))
    return ""
