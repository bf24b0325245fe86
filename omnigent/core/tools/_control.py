"""What the orchestration tools act through: :class:`SessionControl`.

The orchestration tools (``sys_session_*``, ``sys_agent_*``, ``sys_list_models``,
``sys_cancel_task``) act on sessions, agents and dispatches other than their caller's
own turn. They do so only through this narrow, typed interface, which the runtime
implements (``omnigent.core.runtime``'s ``Orchestration``): the tools never see the
store, the actors or the runtime itself, and the tools package never imports the
runtime. The tools keep everything that is theirs — arguments, the rules of each tool,
their output strings — and ask the interface only for what they cannot do alone.

:class:`ChildClaims` is the one piece of state the tools share across sessions (one per
runtime, built by it): a send finds or creates a named child and dispatches to it in
several steps, so two concurrent sends must not make twin children or two dispatches
to one child.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Protocol

import trio

from ...harnesses.registry import HarnessRegistry
from ...model import Agent, ElicitationRequest, Item, SessionPage, SessionSnapshot
from ...providers import ProviderConfig
from ...spec import AgentSpec
from ...stores import SessionRow, WorkRow
from ..asking import Grant
from ..work import ChildWork, Dispatch

__all__ = ["ChildClaims", "SessionControl"]


class SessionControl(Protocol):
    """Sessions, agents and dispatches, as the orchestration tools may act on them.

    Every method that reads a session treats one being deleted as gone. Errors are
    the runtime's own (:class:`~omnigent.errors.OmnigentError` subclasses); the tools
    turn them into their refusals (JSON objects, :func:`~._agent_args.refusal`).
    """

    @property
    def harnesses(self) -> HarnessRegistry:
        """The harnesses this runtime can run (for model checks and the model list)."""
        ...

    # -- sessions ------------------------------------------------------------------------

    async def row(self, session_id: str) -> SessionRow:
        """A session's row (a tool's caller). Raises SessionNotFound."""
        ...

    async def find_session(self, session_id: str) -> SessionRow | None:
        """A session's row, or None if there is none (or it is being deleted)."""
        ...

    async def children(self, parent_id: str, *, limit: int = 1000) -> list[SessionRow]:
        """The parent's children, newest first (at most ``limit``; none being deleted)."""
        ...

    async def descendant_ids(self, session_id: str) -> list[str]:
        """Every session below ``session_id``."""
        ...

    async def snapshot(self, row: SessionRow) -> SessionSnapshot:
        """The session's snapshot, as a client sees it."""
        ...

    async def list_sessions(
        self, *, viewer: str, agent_name: str | None, limit: int
    ) -> SessionPage:
        """The newest top-level and child sessions ``viewer`` may read; with
        ``agent_name``, those listed with that agent name (a sub-agent's session with
        its sub-agent's)."""
        ...

    async def latest_items(self, session_id: str, limit: int) -> list[Item]:
        """The session's last ``limit`` history items, oldest first."""
        ...

    def pending_elicitations(self, session_id: str) -> Sequence[ElicitationRequest]:
        """What the session is waiting on a person for (its own and its descendants')."""
        ...

    def busy(self, session_id: str) -> bool:
        """Whether a turn of the session is running."""
        ...

    async def runners_online(self, runner_ids: Collection[str]) -> dict[str, bool]:
        """Whether each runner is connected now (one lookup per distinct name)."""
        ...

    async def access_level(self, row: SessionRow, user_id: str) -> int:
        """The level ``user_id`` has on the session (0 none … 3 manage)."""
        ...

    async def acting_users(self, row: SessionRow) -> frozenset[str]:
        """Whose rights the session's tools act with: its owner, and every user who sent
        a message into it or into a session above it (see :mod:`._acting`)."""
        ...

    async def grant(self, session_id: str, user_id: str, level: int) -> Grant:
        """Give ``user_id`` ``level`` on the session and below. Raises InvalidInput,
        Conflict."""
        ...

    async def create_child(
        self,
        parent: SessionRow,
        agent_id: str,
        agent_version: int,
        *,
        title: str | None,
        model_override: str | None,
        cwd: str | None,
        sub_agent: str | None = None,
    ) -> SessionRow:
        """A new child session of ``parent`` (its parent hears of it), owned by the
        parent's owner. ``sub_agent`` is a path into that agent version's spec."""
        ...

    async def retitle(self, row: SessionRow, title: str, labels: dict[str, str]) -> None:
        """Change a session's title and labels, and tell its parent."""
        ...

    # -- agents --------------------------------------------------------------------------

    async def find_agent(self, ref: str) -> Agent | None:
        """A registered agent by id, else by name; None if neither."""
        ...

    async def list_agents(self) -> list[Agent]:
        """Every registered agent at its latest version."""
        ...

    async def agent_owner(self, agent_id: str) -> str | None:
        """Who registered the agent (``None``: no such agent)."""
        ...

    async def agent_spec(self, agent: Agent) -> AgentSpec:
        """The spec of that agent version."""
        ...

    async def session_agent(self, row: SessionRow) -> tuple[Agent, AgentSpec]:
        """The agent version a session runs, and the spec it runs (a sub-agent
        session's: its sub-agent's). Raises AgentNotFound."""
        ...

    async def register_agent(self, spec: AgentSpec, owner: str) -> Agent:
        """Register a spec written in a session's workspace (a client's writing: it may
        name no program the operator did not allow). Raises SpecError, Forbidden."""
        ...

    def harness_of(self, spec: AgentSpec, *, strict: bool = True) -> str:
        """The canonical harness a session of ``spec`` runs (see ``strict`` in the
        runtime's specs)."""
        ...

    async def provider_config(self) -> ProviderConfig:
        """The model providers of ``config.yaml``. Raises ConfigError."""
        ...

    # -- dispatches ----------------------------------------------------------------------

    def open_dispatch(self, child_id: str) -> Dispatch | None:
        """The dispatch to ``child_id`` not delivered yet, if any."""
        ...

    async def dispatch(
        self,
        work: ChildWork,
        parent: SessionRow,
        child: SessionRow,
        *,
        agent: str,
        title: str,
        message: str,
    ) -> WorkRow:
        """Record a dispatch, hand ``message`` to the child and watch it in ``work``
        (the parent's); its parent hears of the child. Raises OmnigentError (nothing
        is left recorded)."""
        ...

    def cancel_dispatch(self, dispatch: Dispatch) -> None:
        """Settle the dispatch ``cancelled`` (unless it settled) and stop its child."""
        ...

    async def dispatches(self, parent_id: str, child_id: str) -> list[WorkRow]:
        """Every dispatch from ``parent_id`` to ``child_id``, delivered ones included."""
        ...


class ChildClaims:
    """The children a send is working on now, and the lock of named find-or-create.

    One per runtime (the runtime builds it); nothing here owns a task.
    """

    def __init__(self) -> None:
        self.naming = trio.Lock()
        self._claimed: set[str] = set()

    def claimed(self, child_id: str) -> bool:
        """Whether a send is dispatching to ``child_id`` right now."""
        return child_id in self._claimed

    def claim(self, child_id: str) -> None:
        """Hold ``child_id`` for one send, until :meth:`release` (its dispatch is
        watched, or failed)."""
        self._claimed.add(child_id)

    def release(self, child_id: str) -> None:
        self._claimed.discard(child_id)
