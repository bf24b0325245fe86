"""What one side of a link has sent and received, with no I/O: :class:`Outbox`.

A link counts the messages it sends (after the handshake, acknowledgements excluded):
the n-th message sent is message n. The peer acknowledges how many it has received
(``$/ack {received}``); until then a message is kept, so that when a connection drops
and the runner reconnects, each side can send again exactly what the other has not
received — no message lost, none delivered twice. :class:`Outbox` is that record,
bounded in messages and bytes.
"""

from __future__ import annotations

from collections import deque

__all__ = ["MAX_UNACKED_BYTES", "MAX_UNACKED_MESSAGES", "Outbox", "ResumeRefused"]

MAX_UNACKED_MESSAGES = 1024
MAX_UNACKED_BYTES = 32 * 1024 * 1024


class ResumeRefused(Exception):
    """The peer's count cannot continue this link (it claims what was never sent, or
    less than it acknowledged before): the link must end."""


class Outbox:
    """The messages sent and not yet acknowledged, oldest first.

    Args:
        max_messages, max_bytes: the bound; :meth:`has_room` is false at it (one
            message is always admitted to an empty outbox, whatever its size).
    """

    def __init__(
        self, max_messages: int = MAX_UNACKED_MESSAGES, max_bytes: int = MAX_UNACKED_BYTES
    ) -> None:
        self._max_messages = max_messages
        self._max_bytes = max_bytes
        self._kept: deque[str] = deque()
        self._bytes = 0
        self.sent = 0
        """How many messages were sent in all (the number of the last one)."""
        self.acked = 0
        """How many the peer has acknowledged."""

    def __len__(self) -> int:
        return len(self._kept)

    def has_room(self) -> bool:
        """Whether another message may be kept now."""
        if not self._kept:
            return True
        return len(self._kept) < self._max_messages and self._bytes < self._max_bytes

    def push(self, text: str) -> int:
        """Keep ``text`` as the next message; returns its number."""
        self._kept.append(text)
        self._bytes += len(text)
        self.sent += 1
        return self.sent

    def ack(self, received: int) -> bool:
        """The peer has received ``received`` messages: forget those.

        Returns whether the count made sense (between what was acknowledged before and
        what was sent); one that does not is ignored (a stale or confused peer).
        """
        if not self.acked <= received <= self.sent:
            return False
        while self.acked < received:
            self._bytes -= len(self._kept.popleft())
            self.acked += 1
        return True

    def resume(self, received: int) -> list[str]:
        """The messages to send again on a new connection to a peer that has
        ``received`` of them, oldest first (those before are forgotten).

        Raises:
            ResumeRefused: the count is below what the peer acknowledged, or above
                what was sent.
        """
        if not self.ack(received):
            raise ResumeRefused(
                f"the peer says it received {received} messages; "
                f"{self.acked} were acknowledged and {self.sent} sent"
            )
        return list(self._kept)
