"""The runtime: :func:`open_runtime`, the :class:`Runtime` API, and the actor host.

The root of every lifetime. :func:`open_runtime` opens the store, the bus, the process
manager and the nurseries, recovers what a crashed process left, and yields a
:class:`Runtime`; the :class:`ActorHost` starts session actors and builds what they
run; records of agents, sessions and files, messages in, shutdown and recovery live
here too.
"""

from ._files import MAX_FILE_BYTES
from ._host import ActorHost
from ._inputs import EVENT_DATA, EVENT_TYPES, InboundEvent, parse_event
from ._open import open_runtime
from ._orchestration import Orchestration
from ._runtime import Runtime, RuntimeState
from ._session_input import MODEL_OVERRIDE_PATTERN, InitialItem
from ._sessions import SessionRecords

__all__ = [
    "EVENT_DATA",
    "EVENT_TYPES",
    "MAX_FILE_BYTES",
    "MODEL_OVERRIDE_PATTERN",
    "ActorHost",
    "InboundEvent",
    "InitialItem",
    "Orchestration",
    "Runtime",
    "RuntimeState",
    "SessionRecords",
    "open_runtime",
    "parse_event",
]
