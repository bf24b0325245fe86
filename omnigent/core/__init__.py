"""The core: runtime, sessions, turns, event bus, tools. No transport lives here."""

from ._open import open_runtime
from .bus import EventBus, Subscription
from .records import Agent, FileInfo, ItemPage, MessageAccepted, SessionPage, SessionSnapshot
from .runtime import Runtime
from .tools import Tool, ToolRegistry

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
