"""omnigent: a Trio-native runtime for LLM agent sessions.

Open a runtime, register an agent, create a session, send it messages and read its
events::

    async with omnigent.open_runtime() as rt:
        agent = await rt.create_agent(omnigent.AgentSpec.from_yaml(text))
        session = await rt.create_session(agent_id=agent.id)
        async with rt.subscribe(session.id, after=0) as events:
            await rt.send_message(session.id, "hello")
            async for event in events:
                ...
"""

from . import model
from .core import (
    Agent,
    ElicitationInfo,
    FileInfo,
    Grant,
    ItemPage,
    MessageAccepted,
    PolicyEvent,
    Resolution,
    Resource,
    ResourceScreen,
    Runtime,
    RuntimeState,
    SessionPage,
    SessionSnapshot,
    Subscription,
    Tool,
    Verdict,
    open_runtime,
)
from .errors import (
    AgentNotFound,
    BadRequest,
    ConfigError,
    Conflict,
    ErrorDetail,
    FileNotFound,
    Forbidden,
    HarnessError,
    HarnessUnavailable,
    InternalError,
    InvalidInput,
    ModelEndpointError,
    ModelRefused,
    NotFound,
    OmnigentError,
    OutputLimitReached,
    OwnerUnavailable,
    ResourceNotFound,
    RuntimeClosed,
    SessionElsewhere,
    SessionNotFound,
    SpecError,
    StepLimitReached,
    StoreBusy,
    StoreUnavailable,
    Unauthorized,
    UnknownHarness,
)
from .harnesses import Harness, HarnessEnv, MessageWriter, ToolSchema, TurnContext, TurnRequest
from .model import Event, Item
from .spec import AgentSpec

__version__ = "0.1.0"

__all__ = [
    "Agent",
    "AgentNotFound",
    "AgentSpec",
    "BadRequest",
    "ConfigError",
    "Conflict",
    "ElicitationInfo",
    "ErrorDetail",
    "Event",
    "FileInfo",
    "FileNotFound",
    "Forbidden",
    "Grant",
    "Harness",
    "HarnessEnv",
    "HarnessError",
    "HarnessUnavailable",
    "InternalError",
    "InvalidInput",
    "Item",
    "ItemPage",
    "MessageAccepted",
    "MessageWriter",
    "ModelEndpointError",
    "ModelRefused",
    "NotFound",
    "OmnigentError",
    "OutputLimitReached",
    "OwnerUnavailable",
    "PolicyEvent",
    "Resolution",
    "Resource",
    "ResourceNotFound",
    "ResourceScreen",
    "Runtime",
    "RuntimeClosed",
    "RuntimeState",
    "SessionElsewhere",
    "SessionNotFound",
    "SessionPage",
    "SessionSnapshot",
    "SpecError",
    "StepLimitReached",
    "StoreBusy",
    "StoreUnavailable",
    "Subscription",
    "Tool",
    "ToolSchema",
    "TurnContext",
    "TurnRequest",
    "Unauthorized",
    "UnknownHarness",
    "Verdict",
    "model",
    "open_runtime",
]
