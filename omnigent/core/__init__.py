"""The core: runtime, sessions, turns, event bus, tools. No transport lives here."""

from ._bus import EventBus, Subscription
from ._open import open_runtime
from ._records import Agent, FileInfo, ItemPage, MessageAccepted, SessionPage, SessionSnapshot
from ._runtime import Runtime
from ._tools import Tool, ToolRegistry

__all__ = [
    "Agent",
    "EventBus",
    "FileInfo",
    "ItemPage",
    "MessageAccepted",
    "Runtime",
    "SessionPage",
    "SessionSnapshot",
    "Subscription",
    "Tool",
    "ToolRegistry",
    "open_runtime",
]
