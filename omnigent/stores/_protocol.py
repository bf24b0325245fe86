"""The ``Store`` protocol: every call the core makes on its database.

The core is typed against this protocol and never against a concrete store, so an
implementation (SQLite, PostgreSQL) slots in behind :func:`omnigent.stores.open_store`
without the core knowing which. Stores speak in plain rows (:mod:`._rows`) and
JSON-ready dicts; the core turns them into typed objects.

Contract every implementation keeps:

* Each method is one transaction: nothing is left half-written.
* Every call is bounded by the store's timeout (:data:`DEFAULT_TIMEOUT` unless the
  store was opened with another). A read is cancellable: a cancelled caller stops
  waiting at once and the statement is stopped. A write is not: a cancelled caller
  waits for it — then sees ``trio.Cancelled`` — but only until the timeout. A call
  not answered by then raises :class:`~omnigent.errors.StoreTimeout`; for a write
  ``unknown`` says whether it may still take effect. A lock another connection holds
  is waited for half the timeout, then the call fails the same way, having written
  nothing. ``append_events`` recognises a batch already written, so the event writer
  can write a batch of unknown outcome again.
* After :meth:`Store.abandon` (a shutdown past its grace) no caller waits any more:
  calls in flight and later ones raise ``RuntimeClosed``, and closing the store is
  still safe while their statements finish.
* ``append_events`` writes a whole batch in one round trip and keeps each session's
  ``last_event_id``, ``updated_at`` (its newest event's ``created_at``) and ``status``
  (from its latest ``session.status`` event) in the same transaction. A row it cannot
  take raises; the caller retries row by row. A batch stored already with the same
  content is a success (a retry after an answer that came too late).
* Writes into a session that does not exist (deleted meanwhile) raise ``LookupError``
  (``put_items``, and ``insert_session`` for a missing parent); a delete takes the
  session's whole subtree as it is at that moment.
* Listing cursors (``after``) that name no row of the listing raise ``LookupError``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol

from ..model import Usage
from ._rows import (
    AgentRow,
    FileRow,
    Page,
    PendingItem,
    ProcessGroupRow,
    RunningTask,
    SessionRow,
    StoredEvent,
    TurnStart,
    WorkRow,
)

__all__ = ["DEFAULT_TIMEOUT", "Store"]

DEFAULT_TIMEOUT = 30.0
"""How long a store call is waited for at most, in seconds (see the module contract)."""


class Store(Protocol):
    """The database behind one runtime."""

    @property
    def location(self) -> str:
        """The database, as messages name it (a path, or a URL without its password)."""
        ...

    async def owner_info(self) -> str | None:
        """Who owns the database right now, for messages (``None``: unknown)."""
        ...

    def abandon(self) -> int:
        """Stop waiting for statements in flight (see the module contract).

        Returns how many calls were waiting.
        """
        ...

    @property
    def kind(self) -> str:
        """What the store is: ``sqlite``, ``memory`` or ``postgresql`` (``GET /health``)."""
        ...

    async def ping(self) -> None:
        """Check that the database answers (one trivial statement).

        Raises:
            Exception: whatever the database raised (``StoreUnavailable`` for a shared one).
        """
        ...

    # -- agents ------------------------------------------------------------------------

    async def put_agent_version(self, name: str, spec: dict[str, Any], owner: str) -> AgentRow:
        """Store ``spec`` as the next version of the agent ``name`` (created if new).

        An unchanged spec keeps the current version (no new row).

        Raises:
            Forbidden: ``name`` belongs to another owner. The check and the write are
                one atomic step: of two owners creating one name at once, one is refused.
        """
        ...

    async def get_agent(self, agent_id: str, version: int | None = None) -> AgentRow | None:
        """One version of an agent (the latest by default)."""
        ...

    async def get_agent_by_name(self, name: str) -> AgentRow | None:
        """The latest version of the agent called ``name``."""
        ...

    async def list_agents(self) -> list[AgentRow]:
        """Every agent at its latest version, oldest first."""
        ...

    # -- sessions ----------------------------------------------------------------------

    async def insert_session(self, row: SessionRow, items: Sequence[dict[str, Any]] = ()) -> None:
        """Create a session with its initial items.

        Raises:
            LookupError: ``row.parent_session_id`` names no session.
        """
        ...

    async def get_session(self, session_id: str) -> SessionRow | None: ...

    async def get_session_and_agent_version(
        self, session_id: str
    ) -> tuple[SessionRow, int | None] | None:
        """A session's row and its agent's latest version (``None``: the agent is
        gone), in one read: what a session tracking its agent reads as its actor
        starts (issue 32: one store call where there were two)."""
        ...

    async def list_sessions(
        self,
        *,
        agent_id: str | None = None,
        parent_session_id: str | None = None,
        limit: int = 20,
        after: str | None = None,
        viewer: str | None = None,
        cwd: str | None = None,
        top_level: bool = False,
        runner_id: str | None = None,
    ) -> Page:
        """Sessions newest first, ``limit`` at a time; ``after`` is the previous last id.

        With ``top_level``, only sessions without a parent.

        With ``viewer``, only sessions that user may read (owned, or granted or public
        on the session or any of its ancestors). With ``cwd``, only sessions whose
        working directory is exactly ``cwd``; with ``runner_id``, only those bound to
        that runner.

        Raises:
            LookupError: ``after`` is not a session this listing could show.
        """
        ...

    async def update_session(self, session_id: str, **fields: Any) -> None:
        """Change ``title``, ``labels``, ``model_override`` (or other columns)."""
        ...

    async def begin_turn(
        self, session_id: str, taken: Sequence[str] = (), *, taken_by: str | None = None
    ) -> TurnStart | None:
        """Count a new turn, taking its messages; the turn's number and the session's
        row (``None``: the session does not exist, and nothing is written).

        ``taken``: the messages the turn answers, moved to the end of the history and
        marked taken by ``taken_by`` (as :meth:`move_items_to_end`) in the same
        transaction — and the row and its agent's latest version read in it too: one
        write where a turn's start took two writes and a read.
        """
        ...

    async def runner_session_counts(self, *, viewer: str | None = None) -> dict[str, int]:
        """How many sessions are bound to each runner (by name), counting only those
        ``viewer`` may read when given."""
        ...

    async def sessions_with_status(self, statuses: Sequence[str]) -> list[str]:
        """Ids of the sessions whose last published status is one of ``statuses``."""
        ...

    async def delete_sessions(self, session_ids: Iterable[str]) -> None:
        """Delete sessions and their descendants (found in the same transaction) with
        everything they hold (items, events, inbox, grants, harness state, task and
        process records)."""
        ...

    async def ancestor_ids(self, session_id: str) -> list[str]:
        """The parent, its parent, … up to the root (nearest first)."""
        ...

    async def descendant_ids(self, session_id: str) -> list[str]:
        """Every session below ``session_id``, parents before their children."""
        ...

    # -- sharing -----------------------------------------------------------------------

    async def grants_for(
        self, session_ids: set[str], user_ids: set[str] | None
    ) -> list[tuple[str, int]]:
        """``(user_id, level)`` of every grant on ``session_ids`` (to ``user_ids``)."""
        ...

    async def put_grant(self, session_id: str, user_id: str, level: int) -> None: ...

    async def delete_grant(self, session_id: str, user_id: str) -> bool: ...

    # -- items and events ----------------------------------------------------------------

    async def put_items(
        self, session_id: str, items: Sequence[dict[str, Any]], *, pending: bool = False
    ) -> None:
        """Append items (wire dicts with their ``id``) to a session's history.

        An item whose id exists is replaced in place. ``pending`` marks user messages
        no turn has taken yet, so a restart can answer them.

        Raises:
            LookupError: the session does not exist.
        """
        ...

    async def move_items_to_end(
        self, session_id: str, item_ids: Sequence[str], *, taken_by: str | None = None
    ) -> None:
        """Move items to the end of the history and mark them taken (a turn read them).

        ``taken_by``: the response id of the turn that took these messages, kept so a
        server other than the one running the turn can tell which turn answers them.
        """
        ...

    async def settle_items(self, session_id: str, item_ids: Sequence[str]) -> None:
        """Mark pending messages settled where they are (a stop dropped them): taken by
        no turn (``taken_by`` ``""``)."""
        ...

    async def item_taken_by(self, session_id: str, item_id: str) -> str | None:
        """The response id of the turn that took a message (``""``: dropped; ``None``:
        not taken yet, or no such item)."""
        ...

    async def delete_items(self, session_id: str, item_ids: Sequence[str]) -> None:
        """Remove items from a session's history (a message the runtime refused)."""
        ...

    async def pending_items(self, session_ids: Sequence[str] | None = None) -> list[PendingItem]:
        """Every message still pending (of ``session_ids``, if given), oldest first."""
        ...

    async def list_items(
        self,
        session_id: str,
        *,
        order: str = "asc",
        limit: int | None = None,
        after: str | None = None,
        include_pending: bool = True,
    ) -> Page:
        """A session's items in order; ``after`` is an item id (exclusive).

        ``include_pending=False`` leaves out messages no turn has taken yet.

        Raises:
            LookupError: ``after`` is not an item of the session.
        """
        ...

    async def append_events(
        self, events: Sequence[StoredEvent], *, on_stored: Callable[[], None] | None = None
    ) -> None:
        """Persist a batch of events in one transaction (see the module contract).

        ``on_stored``, if given, is called once, on the event loop, as soon as the whole
        batch is known to be committed, and before this call returns: a store whose
        commit completes in a callback (SQLite's worker thread) calls it from there, a
        scheduler round before its caller resumes, so what waits for the batch (the
        bus's subscribers) wakes that much sooner. Not called when this raises. It must
        not block or raise.
        """
        ...

    async def read_events(
        self, session_id: str, after: int, limit: int = 1000
    ) -> list[dict[str, Any]]:
        """Up to ``limit`` stored events with ``event_id > after``, in order."""
        ...

    async def newest_event(
        self, session_id: str, types: Sequence[str], *, match: tuple[str, str] | None = None
    ) -> dict[str, Any] | None:
        """The session's newest stored event whose type is one of ``types``.

        ``match`` (``(field, value)``): only an event whose top-level string ``field``
        is ``value`` (a held tool call's events by ``call_id``).
        """
        ...

    async def max_event_id(self, session_id: str) -> int | None:
        """The newest stored event id of the session (0 if none); ``None``: no such session."""
        ...

    # -- inbox -------------------------------------------------------------------------

    async def add_inbox_item(
        self, session_id: str, item_id: str, data: str, *, task_id: str | None = None
    ) -> int:
        """Store an inbox item; returns how many are undelivered now.

        ``task_id``: the running task this item ends (its record goes with it).
        """
        ...

    async def add_running_task(self, session_id: str, handle_id: str, tool: str) -> None:
        """Record a background task as running until its inbox item is stored."""
        ...

    async def running_tasks(self, session_ids: Sequence[str] | None = None) -> list[RunningTask]:
        """Every task recorded as running (of ``session_ids``, if given)."""
        ...

    async def drain_inbox(self, session_id: str) -> list[tuple[str, str]]:
        """Mark every undelivered item delivered; returns them ``(id, data)``, oldest first."""
        ...

    async def inbox_count(self, session_id: str) -> int: ...

    async def peek_inbox(self, session_id: str, limit: int = 1000) -> list[tuple[str, str]]:
        """Up to ``limit`` undelivered items ``(id, data)``, oldest first; marks nothing.

        With :meth:`ack_inbox`, a reader that must vet items first (a policy on a
        sub-agent's result) leaves the ones it could not vet for the next read.
        """
        ...

    async def ack_inbox(self, session_id: str, item_ids: Sequence[str]) -> int:
        """Mark these items delivered; returns how many are still undelivered."""
        ...

    async def sessions_with_inbox(self) -> list[str]:
        """Ids of the sessions with undelivered inbox items."""
        ...

    # -- sub-agent work ----------------------------------------------------------------

    async def insert_work(self, row: WorkRow) -> None:
        """Record one dispatch of work to a child session (status ``launching``)."""
        ...

    async def start_work(self, work_id: str) -> bool:
        """``launching`` → ``running``; False if the entry is not launching."""
        ...

    async def finish_work(
        self, work_id: str, status: str, output: str, inbox_id: str, inbox_data: str
    ) -> int | None:
        """Finish an open entry and write its inbox item to the parent, atomically.

        Both happen in one transaction, and only if the entry is still open
        (``launching`` or ``running``): a second finish of the same dispatch — a late
        completion after a cancel, a retry after a restart — changes nothing. This is
        what makes delivery exactly once.

        Returns:
            The parent's undelivered inbox count, or ``None`` when the entry was not
            open (already finished, or gone with its session).
        """
        ...

    async def drop_work(self, work_id: str) -> None:
        """Forget an entry whose dispatch failed before its handle was handed out."""
        ...

    async def list_work(
        self,
        *,
        parent_session_id: str | None = None,
        child_session_id: str | None = None,
        open_only: bool = True,
    ) -> list[WorkRow]:
        """Work entries, oldest first (only open ones by default)."""
        ...

    # -- elicitations --------------------------------------------------------------------

    async def insert_elicitation(
        self, elicitation_id: str, session_id: str, request: str
    ) -> None: ...

    async def finish_elicitation(self, elicitation_id: str, status: str, action: str) -> None: ...

    async def get_elicitation(self, elicitation_id: str) -> dict[str, Any] | None: ...

    async def expire_pending_elicitations(self, session_ids: Sequence[str] | None = None) -> int:
        """Mark pending elicitations expired (their waiters died); returns how many.

        Every one, or only those of ``session_ids`` (a tree taken over from a dead
        server, whose other servers' waiters are alive).
        """
        ...

    # -- harness state -------------------------------------------------------------------

    async def get_harness_state(self, session_id: str, harness: str) -> dict[str, str]:
        """What ``harness`` keeps on the session (``{}`` if nothing)."""
        ...

    async def put_harness_state(
        self, session_id: str, harness: str, key: str, value: str | None
    ) -> None:
        """Store one value (``None`` deletes it). Nothing is kept for a deleted session."""
        ...

    # -- process groups ----------------------------------------------------------------

    async def put_process_group(self, row: ProcessGroupRow) -> None:
        """Record a process group a tool started."""
        ...

    async def delete_process_group(self, pgid: int, start_time: int) -> None:
        """Forget a process group that is gone."""
        ...

    # -- usage -------------------------------------------------------------------------

    async def add_usage(self, session_id: str, usage: Usage) -> None:
        """Add a turn's model usage to the session's sum and to the tree sums of the
        session and every session above it (nothing for a deleted session)."""
        ...

    async def usage_of(self, session_ids: Sequence[str]) -> dict[str, tuple[Usage, Usage]]:
        """Each session's ``(own, tree)`` usage sums; sessions that used none are absent."""
        ...

    async def process_groups(
        self, session_ids: Sequence[str] | None = None
    ) -> list[ProcessGroupRow]:
        """Every recorded process group (of ``session_ids``, if given)."""
        ...

    # -- files ---------------------------------------------------------------------------

    async def put_file(self, row: FileRow, content: bytes) -> None: ...

    async def get_file(self, file_id: str) -> FileRow | None: ...

    async def get_file_content(self, file_id: str) -> bytes | None: ...
