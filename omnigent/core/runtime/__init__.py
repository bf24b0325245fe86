"""The runtime: :func:`open_runtime`, the :class:`Runtime` API, and what runs sessions.

The root of every lifetime. :func:`open_runtime` opens the store, the bus, the process
manager and the nurseries, recovers what a crashed process left, and yields a
:class:`Runtime` — one class, the API over parts that each have one job: the agent
and session catalogs, messages in, asking, stops and shutdown, calls placed where a
session's tree is held, the live work, the actors and what they run, and the
orchestration the tools act through. Recovery after a crash lives here too.
"""

from ._files import MAX_FILE_BYTES
from ._inputs import EVENT_DATA, EVENT_TYPES, MAX_MESSAGE_BYTES, InboundEvent, parse_event
from ._open import open_runtime
from ._options import RuntimeOptions
from ._runtime import Runtime, RuntimeState
from ._session_input import MODEL_OVERRIDE_PATTERN, InitialItem
from ._specs import MAX_CACHED_ENGINES, MAX_CACHED_SPECS, AgentSpecs

__all__ = [
    "EVENT_DATA",
    "EVENT_TYPES",
    "MAX_CACHED_ENGINES",
    "MAX_CACHED_SPECS",
    "MAX_FILE_BYTES",
    "MAX_MESSAGE_BYTES",
    "MODEL_OVERRIDE_PATTERN",
    "AgentSpecs",
    "InboundEvent",
    "InitialItem",
    "Runtime",
    "RuntimeOptions",
    "RuntimeState",
    "open_runtime",
    "parse_event",
]
