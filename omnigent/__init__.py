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
    FileInfo,
    ItemPage,
    MessageAccepted,
    Runtime,
    SessionPage,
    SessionSnapshot,
    Subscription,
    Tool,
    open_runtime,
)
from .errors import (
    AgentNotFound,
    BadRequest,
    Conflict,
    ErrorDetail,
    FileNotFound,
    Forbidden,
    HarnessError,
    InternalError,
    InvalidInput,
    ModelEndpointError,
    NotFound,
    OmnigentError,
    RuntimeClosed,
    SessionNotFound,
    SpecError,
    StoreBusy,
    UnknownHarness,
)
from .harnesses.base import Harness, HarnessEnv, MessageWriter, ToolSchema, TurnContext, TurnRequest
from .model import Event, Item
from .spec import AgentSpec

__version__ = "0.1.0"

__all__ = [
    "Agent",
    "AgentNotFound",
    "AgentSpec",
    "BadRequest",
    "Conflict",
    "ErrorDetail",
    "Event",
    "FileInfo",
    "FileNotFound",
    "Forbidden",
    "Harness",
    "HarnessEnv",
    "HarnessError",
    "InternalError",
    "InvalidInput",
    "Item",
    "ItemPage",
    "MessageAccepted",
    "MessageWriter",
    "ModelEndpointError",
    "NotFound",
    "OmnigentError",
    "Runtime",
    "RuntimeClosed",
    "SessionNotFound",
    "SessionPage",
    "SessionSnapshot",
    "SpecError",
    "StoreBusy",
    "Subscription",
    "Tool",
    "ToolSchema",
    "TurnContext",
    "TurnRequest",
    "UnknownHarness",
    "model",
    "open_runtime",
]
