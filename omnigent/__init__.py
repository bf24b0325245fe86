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

Names are imported on first use (``omnigent.Runtime`` loads the core then), so
``import omnigent.client`` or ``omnigent --version`` pays for nothing else (not even
the exception tree, which needs attrs).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ._version import __version__ as __version__

if TYPE_CHECKING:
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
        BudgetExceeded,
        ConfigError,
        Conflict,
        ErrorDetail,
        EventLogFull,
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
        SandboxUnavailable,
        SessionElsewhere,
        SessionNotFound,
        SpecError,
        SpecUnresolved,
        StepLimitReached,
        StoreBusy,
        StoreTimeout,
        StoreUnavailable,
        ToolCallNotFound,
        Unauthorized,
        UnknownHarness,
    )
    from .harnesses import Harness, HarnessEnv, MessageWriter, ToolSchema, TurnContext, TurnRequest
    from .model import Event, Item, Usage
    from .spec import AgentSpec

# Where each lazily imported name lives.
_LAZY = {
    "AgentNotFound": "omnigent.errors",
    "BadRequest": "omnigent.errors",
    "BudgetExceeded": "omnigent.errors",
    "ConfigError": "omnigent.errors",
    "Conflict": "omnigent.errors",
    "ErrorDetail": "omnigent.errors",
    "EventLogFull": "omnigent.errors",
    "FileNotFound": "omnigent.errors",
    "Forbidden": "omnigent.errors",
    "HarnessError": "omnigent.errors",
    "HarnessUnavailable": "omnigent.errors",
    "InternalError": "omnigent.errors",
    "InvalidInput": "omnigent.errors",
    "ModelEndpointError": "omnigent.errors",
    "ModelRefused": "omnigent.errors",
    "NotFound": "omnigent.errors",
    "OmnigentError": "omnigent.errors",
    "OutputLimitReached": "omnigent.errors",
    "OwnerUnavailable": "omnigent.errors",
    "ResourceNotFound": "omnigent.errors",
    "RuntimeClosed": "omnigent.errors",
    "SandboxUnavailable": "omnigent.errors",
    "SessionElsewhere": "omnigent.errors",
    "SessionNotFound": "omnigent.errors",
    "SpecError": "omnigent.errors",
    "SpecUnresolved": "omnigent.errors",
    "StepLimitReached": "omnigent.errors",
    "StoreBusy": "omnigent.errors",
    "StoreTimeout": "omnigent.errors",
    "StoreUnavailable": "omnigent.errors",
    "ToolCallNotFound": "omnigent.errors",
    "Unauthorized": "omnigent.errors",
    "UnknownHarness": "omnigent.errors",
    "Agent": "omnigent.core",
    "AgentSpec": "omnigent.spec",
    "ElicitationInfo": "omnigent.core",
    "Event": "omnigent.model",
    "FileInfo": "omnigent.core",
    "Grant": "omnigent.core",
    "Harness": "omnigent.harnesses",
    "HarnessEnv": "omnigent.harnesses",
    "Item": "omnigent.model",
    "Usage": "omnigent.model",
    "ItemPage": "omnigent.core",
    "MessageAccepted": "omnigent.core",
    "MessageWriter": "omnigent.harnesses",
    "PolicyEvent": "omnigent.core",
    "Resolution": "omnigent.core",
    "Resource": "omnigent.core",
    "ResourceScreen": "omnigent.core",
    "Runtime": "omnigent.core",
    "RuntimeState": "omnigent.core",
    "SessionPage": "omnigent.core",
    "SessionSnapshot": "omnigent.core",
    "Subscription": "omnigent.core",
    "Tool": "omnigent.core",
    "ToolSchema": "omnigent.harnesses",
    "TurnContext": "omnigent.harnesses",
    "TurnRequest": "omnigent.harnesses",
    "Verdict": "omnigent.core",
    "model": "omnigent.model",
    "open_runtime": "omnigent.core",
}

__all__ = [
    "Agent",
    "AgentNotFound",
    "AgentSpec",
    "BadRequest",
    "BudgetExceeded",
    "ConfigError",
    "Conflict",
    "ElicitationInfo",
    "ErrorDetail",
    "Event",
    "EventLogFull",
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
    "SandboxUnavailable",
    "SessionElsewhere",
    "SessionNotFound",
    "SessionPage",
    "SessionSnapshot",
    "SpecError",
    "SpecUnresolved",
    "StepLimitReached",
    "StoreBusy",
    "StoreTimeout",
    "StoreUnavailable",
    "Subscription",
    "Tool",
    "ToolCallNotFound",
    "ToolSchema",
    "TurnContext",
    "TurnRequest",
    "Unauthorized",
    "UnknownHarness",
    "Usage",
    "Verdict",
    "model",
    "open_runtime",
]


def __getattr__(name: str) -> Any:
    """Import a public name on first use, then keep it here."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    imported = importlib.import_module(module)
    value = imported if module == f"{__name__}.{name}" else getattr(imported, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
