"""The event log: per-session sequence numbers, persist then publish, replay.

:class:`EventBus` stamps each event with its session's next ``event_id``, hands it to
the one writer, which persists a batch and only then delivers it to live subscribers;
a :class:`Subscription` replays from the store and then tails live, with no gap and no
duplicate. See ``docs/architecture.md`` ("Events: persist, then publish").
"""

from ._bus import EventBus
from ._logs import SessionHold, encode_event
from ._session_changes import ChangeKind, SessionChange, SessionChanges, SessionWatch
from ._subscription import Subscription

__all__ = [
    "ChangeKind",
    "EventBus",
    "SessionChange",
    "SessionChanges",
    "SessionHold",
    "SessionWatch",
    "Subscription",
    "encode_event",
]
