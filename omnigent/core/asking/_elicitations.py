"""Elicitations: a turn (or hook) parks until a person answers.

:meth:`Elicitations.ask` parks a waiter keyed by a new ``elicitation_id`` and owned by
one session. The request is persisted as pending, published as
``response.elicitation_request`` on the owner, and mirrored to every ancestor session
with ``params.target_session_id`` set to the owner — so a parent's stream and snapshot
show (and can answer) a child's prompt. While a turn waits, its session shows
``waiting``.

Only the owner resolves: :meth:`Elicitations.resolve` with another session's id
returns ``False`` and leaves the waiter untouched. ``accept`` / ``decline`` /
``cancel`` are MCP's actions. Whatever ends the wait — an answer, an interrupt, a stop,
a disconnected hook caller, shutdown — the ``finally`` marks the row resolved or
expired and publishes ``response.elicitation_resolved`` on the owner and its
ancestors, so nothing is left dangling. Rows still pending when a process starts are
expired (their waiters died with the old process).

A *standing answer* (:meth:`Elicitations.remember`) answers every later elicitation
about one tool in one session, in one phase, without asking anyone: an editor's
"always allow" / "always reject". Nothing is published for an elicitation answered
that way; the tool call itself is still in the history. Standing answers live in
memory for the runtime's lifetime (or until the session is deleted), at most
:data:`MAX_STANDING_PER_SESSION` per session and :data:`MAX_STANDING` in all: one more
is refused with ``Conflict``, never dropped silently.
A stop or delete of a session *withdraws* (:meth:`Elicitations.withdraw`) what is
pending on it and its descendants, including what callers outside the session hold (a
coding agent's hook request, a policy ASK): each waiter wakes at once with ``cancel``
(a hook answers deny), and its row ends ``expired``.

The waiter exists (and its ``finally`` is armed) before the pending row is written, so
a cancel at any point leaves no pending row behind.

Resource handling: the waiter table holds one entry per *waiting task*, removed by
that task's ``finally``; it owns no tasks itself.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Collection
from contextlib import asynccontextmanager
from typing import Any, Literal

import attrs
import trio

from ..._ids import new_id
from ...errors import Conflict, InvalidInput, SessionNotFound
from ...model import (
    ElicitationInfo,
    ElicitationParams,
    ElicitationRequest,
    ElicitationResolved,
    SessionStatus,
    SessionStatusChanged,
)
from ...stores import Store
from ..bus import EventBus, encode_event

__all__ = [
    "ACTIONS",
    "MAX_STANDING",
    "MAX_STANDING_PER_SESSION",
    "Elicitations",
    "Resolution",
    "check_content",
    "wants_content",
]

log = logging.getLogger(__name__)

MAX_STANDING_PER_SESSION = 256
"""Standing answers one session may have (past it: ``Conflict``)."""
MAX_STANDING = 65_536
"""Standing answers one runtime keeps in all (past it: ``Conflict``)."""

Action = Literal["accept", "decline", "cancel"]
ACTIONS: tuple[str, ...] = ("accept", "decline", "cancel")


@attrs.frozen
class Resolution:
    """How a person answered: ``action`` and, for ``accept``, optional ``content``."""

    action: Action
    content: Any = None

    @property
    def accepted(self) -> bool:
        return self.action == "accept"


@attrs.define(eq=False)
class _Waiter:
    session_id: str
    request: ElicitationRequest
    done: trio.Event = attrs.field(factory=trio.Event)
    resolution: Resolution | None = None
    withdrawn: bool = False
    finished: trio.Event = attrs.field(factory=trio.Event)  # its row and events are final
    # The published request as each session that shows it saw it (the owner and its
    # ancestors): stamped with that stream's event id, mirrors with target_session_id.
    views: dict[str, ElicitationRequest] = attrs.field(factory=dict)


class Elicitations:
    """Pending elicitations of one runtime. Owned by the ``Runtime``."""

    def __init__(self, store: Store, bus: EventBus) -> None:
        self._store = store
        self._bus = bus
        self._waiters: dict[str, _Waiter] = {}
        # Session id -> (phase, tool name) -> the answer given to every such
        # elicitation; bounded per session and in all (client input).
        self._standing: dict[str, dict[tuple[str, str], Resolution]] = {}
        self._standing_count = 0

    @property
    def waiting(self) -> int:
        """How many elicitations are pending in this process."""
        return len(self._waiters)

    async def ask(
        self, session_id: str, params: ElicitationParams, *, mark_waiting: bool = True
    ) -> Resolution:
        """Publish an elicitation and wait for its owner to resolve it.

        Args:
            session_id: the owning session.
            params: what to ask (``target_session_id`` is filled in for mirrors).
            mark_waiting: publish ``session.status waiting`` while blocked (and
                ``running`` after); hooks answered outside a turn pass ``False``.

        Returns:
            The answer; ``cancel`` when a stop or delete withdrew the elicitation.

        Raises:
            InvalidInput: ``params`` cannot be encoded (nothing was published).

        Cancellation: withdraws the elicitation (marked expired, resolved signal
        published) and re-raises.
        """
        async with self.open(session_id, params, mark_waiting=mark_waiting) as waiter:
            await waiter.done.wait()
            if waiter.resolution is None:  # withdrawn
                return Resolution("cancel")
            return waiter.resolution

    @asynccontextmanager
    async def open(
        self, session_id: str, params: ElicitationParams, *, mark_waiting: bool = True
    ) -> AsyncIterator[_Waiter]:
        """Like :meth:`ask`, for callers that wait on ``waiter.done`` themselves.

        With a standing answer for the request's tool, the waiter comes back already
        answered and nothing is stored or published. ``waiter.done`` is also set when
        the elicitation is withdrawn (then ``waiter.resolution`` stays ``None``).
        """
        elicitation_id = new_id("elicit")
        if params.mode == "url" and params.url is None:
            params = attrs.evolve(params, url=f"/approve/{session_id}/{elicitation_id}")
        request = ElicitationRequest(elicitation_id=elicitation_id, params=params)
        encoded = encode_event(request)  # InvalidInput before anything is written
        waiter = _Waiter(session_id, request)
        standing = self._standing_answer(session_id, params)
        if standing is not None:
            waiter.resolution = standing
            waiter.done.set()
            waiter.finished.set()
            yield waiter
            return
        self._waiters[elicitation_id] = waiter
        try:
            await self._store.insert_elicitation(elicitation_id, session_id, encoded)
            if not waiter.done.is_set():  # not withdrawn meanwhile
                # Each view is kept the moment it is published: a subscriber may see the
                # request (and ask for the snapshot) before the mirrors are out.
                await self._publish_everywhere(session_id, request, into=waiter.views)
                if mark_waiting:
                    await self._bus.publish(
                        session_id, SessionStatusChanged(status=SessionStatus.WAITING)
                    )
            yield waiter
        finally:
            del self._waiters[elicitation_id]
            with trio.move_on_after(10, shield=True):
                try:
                    await self._finish(waiter, mark_waiting)
                except Exception:
                    log.warning("could not finish elicitation %s", elicitation_id, exc_info=True)
            waiter.finished.set()

    async def _finish(self, waiter: _Waiter, mark_waiting: bool) -> None:
        resolution = waiter.resolution
        action = resolution.action if resolution else "expired"
        eid = waiter.request.elicitation_id
        # Also when the insert never happened (cancelled first): then a no-op.
        await self._store.finish_elicitation(
            eid, "resolved" if waiter.resolution else "expired", action
        )
        if not waiter.views:
            return  # never published: nobody was shown it
        resolved = ElicitationResolved(
            elicitation_id=eid, action=action, content=resolution.content if resolution else None
        )
        try:
            await self._publish_everywhere(waiter.session_id, resolved)
            if mark_waiting and waiter.resolution is not None:
                await self._bus.publish(
                    waiter.session_id, SessionStatusChanged(status=SessionStatus.RUNNING)
                )
        except SessionNotFound:
            pass  # the session is being deleted: its log goes with it

    def sessions(self) -> set[str]:
        """The sessions with something pending in this process."""
        return {waiter.session_id for waiter in self._waiters.values()}

    def withdraw(self, session_ids: Collection[str]) -> list[_Waiter]:
        """Wake every waiter pending on ``session_ids``, answered with nothing.

        Each wakes at once (:meth:`ask` returns ``cancel``); its row ends ``expired``.
        Returns the waiters, whose ``finished`` is set once their ``finally`` ran.
        """
        withdrawn = []
        for waiter in list(self._waiters.values()):
            if waiter.session_id in session_ids and not waiter.done.is_set():
                waiter.withdrawn = True
                waiter.done.set()
                withdrawn.append(waiter)
        return withdrawn

    async def _publish_everywhere(
        self,
        owner: str,
        event: ElicitationRequest | ElicitationResolved,
        *,
        into: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Publish on the owner and mirror to its ancestors; the stamped copies by session
        (in ``into``, if given, each as soon as it is published)."""
        published = {} if into is None else into
        published[owner] = await self._bus.publish(owner, event)
        for ancestor in await self._store.ancestor_ids(owner):
            if isinstance(event, ElicitationRequest):
                params = attrs.evolve(event.params, target_session_id=owner)
                mirror: Any = attrs.evolve(event, params=params)
            else:
                mirror = attrs.evolve(event, target_session_id=owner)
            published[ancestor] = await self._bus.publish(ancestor, mirror)
        return published

    def resolve(
        self, session_id: str, elicitation_id: str, action: str, content: Any = None
    ) -> bool:
        """Answer a pending elicitation; only its owning session's id resolves it.

        Returns False (and changes nothing) for an unknown id, another session's id,
        or one already answered.

        Raises:
            ValueError: ``action`` is not accept, decline or cancel (callers validate
            at their boundary first).
        """
        if action not in ACTIONS:
            raise ValueError(f"unknown elicitation action {action!r}")
        waiter = self._waiters.get(elicitation_id)
        if waiter is None or waiter.session_id != session_id or waiter.done.is_set():
            return False
        waiter.resolution = Resolution(action, content if action == "accept" else None)  # type: ignore[arg-type]
        waiter.done.set()
        return True

    def remember(self, session_id: str, phase: str, tool_name: str, action: str | None) -> int:
        """Answer elicitations about ``tool_name`` in ``phase`` with ``action`` from now on.

        ``action`` is ``accept`` or ``decline``; ``None`` forgets the standing answer.
        Elicitations of that kind already waiting in the session are answered too;
        returns how many.
        """
        answers = self._standing.get(session_id, {})
        key = (phase, tool_name)
        if action is None:
            if answers.pop(key, None) is not None:
                self._standing_count -= 1
                if not answers:
                    del self._standing[session_id]
            return 0
        if action not in ("accept", "decline"):
            raise ValueError(f"a standing answer is accept or decline, not {action!r}")
        if key not in answers:
            if len(answers) >= MAX_STANDING_PER_SESSION:
                raise Conflict(
                    f"the session already has {len(answers)} standing answers; withdraw "
                    "one (action None) before giving another"
                )
            if self._standing_count >= MAX_STANDING:
                raise Conflict(f"the runtime already keeps {self._standing_count} standing answers")
            self._standing_count += 1
        self._standing.setdefault(session_id, answers)[key] = Resolution(action)  # type: ignore[arg-type]
        waiting = [
            w
            for w in self._waiters.values()
            if w.session_id == session_id
            and w.resolution is None
            and (w.request.params.phase, w.request.params.tool_name) == (phase, tool_name)
            and not wants_content(w.request.params)
        ]
        for waiter in waiting:
            self.resolve(session_id, waiter.request.elicitation_id, action)
        return len(waiting)

    def standing(self, session_id: str, phase: str, tool_name: str) -> str | None:
        """The standing answer for ``tool_name`` in ``phase`` (``accept``/``decline``)."""
        answer = self._standing.get(session_id, {}).get((phase, tool_name))
        return None if answer is None else answer.action

    def forget_session(self, session_id: str) -> None:
        """Drop every standing answer of a (deleted) session."""
        self._standing_count -= len(self._standing.pop(session_id, {}))

    def _standing_answer(self, session_id: str, params: ElicitationParams) -> Resolution | None:
        if params.tool_name is None or wants_content(params):
            return None
        return self._standing.get(session_id, {}).get((params.phase, params.tool_name))

    def pending_for(self, session_id: str) -> list[ElicitationRequest]:
        """Pending requests shown on ``session_id``: its own and its descendants'.

        Each is the event exactly as that session's stream carried it (its
        ``event_id``; a descendant's with ``params.target_session_id``), oldest first.
        """
        found = [
            waiter.views[session_id]
            for waiter in self._waiters.values()
            if not waiter.done.is_set() and session_id in waiter.views
        ]
        return sorted(found, key=lambda request: request.event_id)

    def visible(self, session_id: str, elicitation_id: str) -> ElicitationRequest | None:
        """The pending request as ``session_id`` sees it (its own, or a descendant's).

        ``None`` when it is not pending or not shown on ``session_id``.
        """
        waiter = self._waiters.get(elicitation_id)
        if waiter is None or waiter.done.is_set():
            return None
        return waiter.views.get(session_id)

    def get(self, elicitation_id: str) -> ElicitationRequest | None:
        """The pending request with this id, if it is still waiting."""
        waiter = self._waiters.get(elicitation_id)
        return None if waiter is None or waiter.done.is_set() else waiter.request

    async def info(
        self,
        session_id: str,
        elicitation_id: str,
        *,
        owner_visible: Callable[[str], Awaitable[bool]] | None = None,
        elsewhere: Callable[[str], Awaitable[ElicitationRequest | None]] | None = None,
    ) -> ElicitationInfo:
        """The elicitation as ``session_id`` sees it (see :meth:`Runtime.get_elicitation`).

        ``owner_visible``, if given, is asked about the owning session when it is not
        ``session_id``; a refusal makes the answer ``unknown``. ``elsewhere``, if given,
        finds a pending one whose waiter is in another process (the server that holds
        the session's tree).
        """
        pending = self.visible(session_id, elicitation_id)
        if pending is None and elsewhere is not None:
            pending = await elsewhere(elicitation_id)
        if pending is not None:
            owner = pending.params.target_session_id
            if owner is None or owner_visible is None or await owner_visible(owner):
                return ElicitationInfo(elicitation_id, "pending", pending)
            return ElicitationInfo(elicitation_id, "unknown")
        row = await self._store.get_elicitation(elicitation_id)
        if row is None or row["status"] == "pending":
            # Pending in the store but not waiting here: its waiter is gone.
            return ElicitationInfo(elicitation_id, "unknown")
        owner = row["session_id"]
        if owner != session_id and owner not in await self._store.descendant_ids(session_id):
            return ElicitationInfo(elicitation_id, "unknown")
        if owner != session_id and owner_visible is not None and not await owner_visible(owner):
            return ElicitationInfo(elicitation_id, "unknown")
        status = "resolved" if row["status"] == "resolved" else "expired"
        return ElicitationInfo(elicitation_id, status, action=row.get("action"))  # type: ignore[arg-type]


def check_content(content: Any) -> None:
    """An answer's ``content`` must be JSON (it is stored and published).

    Raises:
        InvalidInput: at ``content``, naming what cannot be encoded.
    """
    try:
        json.dumps(content, allow_nan=False)
    except (TypeError, ValueError, RecursionError) as exc:
        raise InvalidInput.at("content", f"must be JSON: {exc}") from exc


def wants_content(params: ElicitationParams) -> bool:
    """Whether an answer to ``params`` carries content (questions, a form to fill).

    Such an elicitation is never answered by a standing answer: "always allow" on an
    ``AskUserQuestion`` would accept every later question with no answers.
    """
    return params.ask_user_question is not None or params.requestedSchema is not None
