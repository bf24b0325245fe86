"""The core: runtime, sessions, turns, event bus, tools. No transport lives here.

Everything a library user or a transport needs is exported here; the modules behind
it are private. :func:`open_runtime` is the way in: it yields a :class:`Runtime`
(which has no public constructor) and owns its lifetime.
"""

from ._bus import Subscription
from ._client_mcp import ClientMcpReport, url_prefix_problem
from ._elicitations import ACTIONS as ELICITATION_ACTIONS
from ._elicitations import Resolution, elicitation_params, wants_content
from ._files import MAX_FILE_BYTES
from ._held_calls import HeldToolCall
from ._inputs import EVENT_DATA, EVENT_TYPES, InboundEvent, parse_event
from ._open import open_runtime
from ._permissions import EDIT, MANAGE, NONE, PUBLIC, READ, Grant
from ._policies import (
    PHASE_TOOL_CALL,
    PHASE_TOOL_RESULT,
    PolicyEvent,
    PolicyFunction,
    Verdict,
    parse_policy_event,
)
from ._policies import load_function as load_policy_function
from ._policy_event import WirePolicyEvent
from ._providers import ProvidedTool
from ._records import (
    Agent,
    ElicitationHeld,
    ElicitationInfo,
    EventAccepted,
    FileInfo,
    Health,
    ItemPage,
    MessageAccepted,
    ResolveResult,
    Resource,
    ResourceScreen,
    ServerInfo,
    SessionPage,
    SessionSnapshot,
)
from ._runtime import Runtime, RuntimeState
from ._session_changes import ChangeKind, SessionChange, SessionWatch
from ._session_input import MODEL_OVERRIDE_PATTERN, InitialItem
from ._tools import Tool, ToolRegistry
from ._turn_stream import TurnEvents

__all__ = [
    "EDIT",
    "ELICITATION_ACTIONS",
    "EVENT_DATA",
    "EVENT_TYPES",
    "MANAGE",
    "MAX_FILE_BYTES",
    "MODEL_OVERRIDE_PATTERN",
    "NONE",
    "PHASE_TOOL_CALL",
    "PHASE_TOOL_RESULT",
    "PUBLIC",
    "READ",
    "Agent",
    "ChangeKind",
    "ClientMcpReport",
    "ElicitationHeld",
    "ElicitationInfo",
    "EventAccepted",
    "FileInfo",
    "Grant",
    "Health",
    "HeldToolCall",
    "InboundEvent",
    "InitialItem",
    "ItemPage",
    "MessageAccepted",
    "PolicyEvent",
    "PolicyFunction",
    "ProvidedTool",
    "Resolution",
    "ResolveResult",
    "Resource",
    "ResourceScreen",
    "Runtime",
    "RuntimeState",
    "ServerInfo",
    "SessionChange",
    "SessionPage",
    "SessionSnapshot",
    "SessionWatch",
    "Subscription",
    "Tool",
    "ToolRegistry",
    "TurnEvents",
    "Verdict",
    "WirePolicyEvent",
    "elicitation_params",
    "load_policy_function",
    "open_runtime",
    "parse_event",
    "parse_policy_event",
    "url_prefix_problem",
    "wants_content",
]
