"""Public test helpers for omnigent and for code built on it.

:class:`MockLLM` is a scripted OpenAI-compatible endpoint: queue replies, then point a
client at ``mock.transport()`` (in memory) or ``async with mock.serve() as base_url``
(a real loopback server).
"""

from omnigent.testing._mockllm import (
    ErrorReply,
    HangReply,
    MockLLM,
    MockToolCall,
    Reply,
    TextReply,
    ToolCallsReply,
)

__all__ = [
    "ErrorReply",
    "HangReply",
    "MockLLM",
    "MockToolCall",
    "Reply",
    "TextReply",
    "ToolCallsReply",
]
