"""How many ACP WebSockets a server holds open at once, in all and per caller.

Each open ``GET /v1/ws`` connection owns a nursery, a relay per opened session and
(over ``mcpServers``) perhaps client MCP servers: without a bound, one client could
open connections until the server runs out of memory or descriptors. A connection
past either bound is refused at the upgrade with ``503 server_busy`` — nothing has
been accepted or started for it. The frame size is bounded separately (Hypercorn's
``websocket_max_message_size``, :data:`WS_MAX_MESSAGE_BYTES`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Final

from ...errors import ServerBusy

__all__ = [
    "MAX_WEBSOCKETS",
    "MAX_WEBSOCKETS_PER_USER",
    "WS_MAX_MESSAGE_BYTES",
    "WebSocketSlots",
]

MAX_WEBSOCKETS: Final = 256
"""Open ACP WebSockets a server holds at once (``create_app(max_websockets=...)``)."""
MAX_WEBSOCKETS_PER_USER: Final = 32
"""Of those, how many one caller (one identity) may hold."""
WS_MAX_MESSAGE_BYTES: Final = 16 * 1024 * 1024
"""The largest WebSocket message ``omnigent serve`` reads (16 MiB; a larger one closes
the connection with code 1009). ``omnigent stdio`` — the editor is its operator —
takes lines up to 64 MiB."""


class WebSocketSlots:
    """The open connections, counted in all and per caller (one per app)."""

    def __init__(self, total: int = MAX_WEBSOCKETS, per_user: int = MAX_WEBSOCKETS_PER_USER):
        self.total = total
        self.per_user = per_user
        self._open: Counter[str] = Counter()

    @contextmanager
    def hold(self, user: str) -> Iterator[None]:
        """Hold a slot for ``user``'s connection while the block runs.

        Raises:
            ServerBusy: the server or this caller already holds as many as allowed.
        """
        if sum(self._open.values()) >= self.total:
            raise ServerBusy(f"this server holds {self.total} WebSockets already; try later")
        if self._open[user] >= self.per_user:
            raise ServerBusy(
                f"at most {self.per_user} WebSockets per caller are open at once; close one"
            )
        self._open[user] += 1
        try:
            yield
        finally:
            self._open[user] -= 1
            if not self._open[user]:
                del self._open[user]

    def statistics(self) -> dict[str, int]:
        return {"open": sum(self._open.values()), "callers": len(self._open)}
