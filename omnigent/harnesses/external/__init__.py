"""External harnesses: agent loops in child processes, spoken to over a Unix socket.

:func:`make_external` builds the harness for ``harness: external`` (a spec's
``command``) and for harnesses registered by name; :mod:`._turn` is one turn's
connection and stream relay; :mod:`._protocol` its pure half. The scaffold for writing
one in Python is public as :mod:`omnigent.harnesses.scaffold`.
"""

from ._harness import external_harness, make_external
from ._scaffold_app import HarnessApp
from ._scaffold_turn import HarnessTurn, MessageStream, TurnBody, TurnFailed

__all__ = [
    "HarnessApp",
    "HarnessTurn",
    "MessageStream",
    "TurnBody",
    "TurnFailed",
    "external_harness",
    "make_external",
]
