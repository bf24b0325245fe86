"""The core: runtime, sessions, turns, event bus, tools. No transport lives here.

Everything a library user or a transport needs is exported here; the modules behind
it are private. :func:`open_runtime` is the way in: it yields a :class:`Runtime`
(which has no public constructor) and owns its lifetime.
"""

from ..model import (
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
    elicitation_params,
)
from .asking import ACTIONS as ELICITATION_ACTIONS
from .asking import (
    EDIT,
    MANAGE,
    NONE,
    PUBLIC,
    READ,
    Grant,
    Resolution,
    wants_content,
)
from .bus import ChangeKind, SessionChange, SessionWatch, Subscription
from .cluster import RunnerLink
from .runtime import (
    EVENT_DATA,
    EVENT_TYPES,
    MAX_FILE_BYTES,
    MAX_MESSAGE_BYTES,
    MODEL_OVERRIDE_PATTERN,
    InboundEvent,
    InitialItem,
    Runtime,
    RuntimeState,
    open_runtime,
    parse_event,
)
from .session import TurnEvents
from .tools import (
    PHASE_TOOL_CALL,
    PHASE_TOOL_RESULT,
    ClientTool,
    PolicyEvent,
    PolicyFunction,
    Tool,
    ToolRegistry,
    Verdict,
    WirePolicyEvent,
    parse_policy_event,
)
from .tools import load_function as load_policy_function
from .work import ClientMcpReport, HeldToolCall, ToolTask, url_prefix_problem

__all__ = [
    "EDIT",
    "ELICITATION_ACTIONS",
    "EVENT_DATA",
    "EVENT_TYPES",
    "MANAGE",
    "MAX_FILE_BYTES",
    "MAX_MESSAGE_BYTES",
    "MODEL_OVERRIDE_PATTERN",
    "NONE",
    "PHASE_TOOL_CALL",
    "PHASE_TOOL_RESULT",
    "PUBLIC",
    "READ",
    "Agent",
    "ChangeKind",
    "ClientMcpReport",
    "ClientTool",
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
    "Resolution",
    "ResolveResult",
    "Resource",
    "ResourceScreen",
    "RunnerLink",
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
    "ToolTask",
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
