"""One session's life: its actor, its turns, its kept history.

A :class:`SessionActor` runs while its session has work and owns a nursery for it; a
turn runs the harness inside a cancel scope and ends with exactly one terminal status;
the :class:`HistoryCache` keeps histories between turns; :class:`TurnEvents` follows
one message's turn stream to its end.
"""

from ._actor import SessionActor
from ._harness_state import StoredHarnessState
from ._history import HistoryCache
from ._turn import TurnServices
from ._turn_stream import TurnEvents

__all__ = [
    "HistoryCache",
    "SessionActor",
    "StoredHarnessState",
    "TurnEvents",
    "TurnServices",
]
