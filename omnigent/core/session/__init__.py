"""One session's life: its actor, its turns, its kept history.

A :class:`SessionActor` runs while its session has work and owns a nursery for it
(its life is one :class:`ActorState` at a time); a turn runs the harness inside a
cancel scope and ends with exactly one terminal status; the :class:`HistoryCache`
keeps histories between turns; :class:`TurnEvents` follows one message's turn stream
to its end. An actor is given what it stands on, once, in :class:`ActorServices`: the
runtime implements the :class:`SessionBuilder` and :class:`ActorReports` protocols in
it, so this package never imports the runtime.
"""

from ._actor import ActorState, SessionActor
from ._harness_state import StoredHarnessState
from ._held import HeldElicitation
from ._history import HistoryCache
from ._services import ActorReports, ActorServices, SessionBasis, SessionBuilder
from ._turn_stream import TurnEvents

__all__ = [
    "ActorReports",
    "ActorServices",
    "ActorState",
    "HeldElicitation",
    "HistoryCache",
    "SessionActor",
    "SessionBasis",
    "SessionBuilder",
    "StoredHarnessState",
    "TurnEvents",
]
