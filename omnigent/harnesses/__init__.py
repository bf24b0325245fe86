"""Harnesses: the agent loops behind sessions.

``base`` defines the interface (:class:`Harness`, :class:`TurnContext`,
:class:`TurnRequest`); ``loop`` and ``scripted`` are built in; ``registry`` maps names
and aliases to factories; :func:`open_streamed_message` is the ``open_message`` a turn
context builds on.
"""

from ._message import open_streamed_message
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
    "open_streamed_message",
]
