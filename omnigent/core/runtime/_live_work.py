"""What the holder of a session's tree runs placed calls against (:mod:`._placed`)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import attrs

from ..asking import Elicitations
from ._asking import Asking
from ._live import LiveSessions
from ._messages import Messages
from ._session_catalog import SessionCatalog

__all__ = ["LiveWork"]


@attrs.frozen
class LiveWork:
    """What the holder of a tree runs placed calls against (built once by the runtime)."""

    live: LiveSessions
    messages: Messages
    elicitations: Elicitations
    sessions: SessionCatalog
    asking: Asking
    stop_here: Callable[[str], Awaitable[None]]
    stop_tree_here: Callable[[str, list[str]], Awaitable[None]]
