"""A window into a running runtime, for tests: :func:`probe` and :class:`RuntimeProbe`.

A test sometimes has to stage what only a crash or a race leaves behind (a dispatch
row with no watcher, an event published past the API), or to observe what the API
does not show (the events still on their way to the store, whether a session has an
actor, how much the caches hold). :func:`probe` gives that, in one typed place, instead
of tests reaching into the runtime's private attributes.

Everything here is for tests: it bypasses the runtime's checks and the contract of its
caches (writing items through the store leaves a kept history stale). A library user
never needs it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs

if TYPE_CHECKING:  # the core is loaded by the runtime probed, not by omnigent.testing
    from ..core import Runtime
    from ..core.asking import Elicitations
    from ..core.bus import EventBus
    from ..core.session import ActorState
    from ..core.tools import ToolRegistry
    from ..stores import Store

__all__ = ["RuntimeProbe", "probe"]


@attrs.frozen(eq=False)
class RuntimeProbe:
    """What :func:`probe` shows of one runtime.

    Attributes:
        store: the runtime's store (stage rows, or read what the API does not show).
        bus: its event bus (``flush()`` waits until every event published so far is
            stored; ``publish`` goes past the runtime's checks; ``statistics()``).
        tools: the registry of the Python tools registered on it.
        elicitations: its pending elicitations (``ask`` goes past the runtime's checks).
    """

    store: Store
    bus: EventBus
    tools: ToolRegistry
    elicitations: Elicitations
    _runtime: Runtime

    def actor_state(self, session_id: str) -> ActorState | None:
        """The state of the session's actor here; ``None`` when it has none (no work)."""
        actor = self._runtime._live.actor(session_id)
        return None if actor is None else actor.state

    def background_tasks(self, session_id: str) -> int:
        """How many background tasks the session's actor runs now (0 without one)."""
        actor = self._runtime._live.actor(session_id)
        return 0 if actor is None else actor.background_tasks

    def set_closing(self, closing: bool) -> None:
        """Refuse new work as a runtime that began shutting down does (or stop refusing).

        Only the refusal: nothing is stopped. For racing a shutdown against a call.
        """
        self._runtime._live.closing = closing

    def history_statistics(self) -> dict[str, int]:
        """The kept histories: how many sessions, and items and bytes in all."""
        return self._runtime._histories.statistics()

    def spec_statistics(self) -> dict[str, int]:
        """The parsed specs and policy engines kept."""
        return self._runtime._specs.statistics()


def probe(runtime: Runtime) -> RuntimeProbe:
    """A :class:`RuntimeProbe` of ``runtime`` (for tests only; see the module docstring)."""
    return RuntimeProbe(
        store=runtime._store,
        bus=runtime._bus,
        tools=runtime._tools,
        elicitations=runtime._elicitations,
        runtime=runtime,
    )
