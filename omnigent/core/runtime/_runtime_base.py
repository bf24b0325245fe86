"""What every part of the :class:`~._runtime.Runtime` API stands on.

The runtime's API is split by subject into mixins (records, events, asking), each in
its own module; :class:`RuntimeBase` declares the parts they share — the composed
objects :class:`~._runtime.Runtime` builds in its constructor — and the two guards
every call starts with.
"""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING

from ...errors import (
    RuntimeClosed,
    StoreBusy,
)
from ...harnesses.registry import HarnessRegistry
from ...stores import Store
from ..asking import Elicitations, Permissions, Visibility
from ..bus import EventBus, SessionChanges
from ..cluster import Ownership
from ..tools import ToolRegistry
from ..work import BlockingCalls
from ._agents import AgentCatalog
from ._asking import Asking
from ._files import FileService
from ._host import ActorHost
from ._messages import Messages
from ._placed import PlacedCalls
from ._sessions import SessionRecords
from ._shutdown import Stopping

if TYPE_CHECKING:
    from ...processes import ProcessManager

__all__ = ["RuntimeBase", "RuntimeState"]


class RuntimeState(enum.Enum):
    """Where a runtime is in its life (see :attr:`Runtime.state`)."""

    OPENING = "opening"
    OPEN = "open"
    CLOSING = "closing"
    CLOSED = "closed"


class RuntimeBase:
    """The parts of a runtime its API mixins share (set by ``Runtime.__init__``)."""

    state: RuntimeState
    records_only: bool
    _started_at: float
    _processes: ProcessManager | None
    _ownership: Ownership
    _store: Store
    _bus: EventBus
    _harnesses: HarnessRegistry
    _threads: BlockingCalls
    _tools: ToolRegistry
    _files: FileService
    _elicitations: Elicitations
    _permissions: Permissions
    _host: ActorHost
    _stopping: Stopping
    _agents: AgentCatalog
    _sessions: SessionRecords
    _messages: Messages
    _asking: Asking
    _visibility: Visibility
    _placed: PlacedCalls
    _changes: SessionChanges

    @property
    def closing(self) -> bool:
        """Whether the runtime is shutting down or closed (no new work is accepted)."""
        return self.state in (RuntimeState.CLOSING, RuntimeState.CLOSED)

    def _open(self) -> None:
        """Refuse any call on a closed runtime."""
        if self.state is RuntimeState.CLOSED:
            raise RuntimeClosed()

    async def _working(self) -> None:
        """Refuse a call that would publish, delete or run work where it cannot."""
        self._open()
        if self.records_only:
            raise StoreBusy(self._store.location, await self._store.owner_info(), records_only=True)
        if self.closing:
            raise RuntimeClosed("the runtime is shutting down")
