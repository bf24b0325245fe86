"""Harnesses: the agent loops behind sessions.

``base`` defines the interface (:class:`Harness`, :class:`TurnContext`,
:class:`TurnRequest`); ``loop`` and ``scripted`` are built in; ``registry`` maps names
and aliases to factories.
"""

from .base import (
    Harness,
    HarnessEnv,
    HarnessFactory,
    HarnessState,
    MemoryHarnessState,
    MessageWriter,
    ToolSchema,
    TurnContext,
    TurnRequest,
)
from .registry import HarnessInfo, HarnessRegistry

__all__ = [
    "Harness",
    "HarnessEnv",
    "HarnessFactory",
    "HarnessInfo",
    "HarnessRegistry",
    "HarnessState",
    "MemoryHarnessState",
    "MessageWriter",
    "ToolSchema",
    "TurnContext",
    "TurnRequest",
]
