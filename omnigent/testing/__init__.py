"""Public test helpers for omnigent and for code built on it.

Scripted fake model servers, each usable in memory (``fake.transport()``, an
``httpx.MockTransport``) or on a real loopback port (``async with fake.serve() as
base_url``), and runnable on their own with ``python -m omnigent.testing``:

- :class:`MockLLM` — OpenAI Chat Completions (what the ``loop`` harness speaks);
- :class:`FakeAnthropic` — the Anthropic Messages API (what Claude Code speaks);
- :class:`FakeResponses` — the OpenAI Responses API (what Codex speaks).

The two vendor fakes share one script vocabulary (:class:`FakeTurn`,
:class:`FakeToolUse`, :class:`FakeShell`, :class:`ErrorReply`, :class:`HangReply`), so
the same turns drive either CLI.
"""

from ._fake_anthropic import FakeAnthropic
from ._fake_responses import FakeResponses
from ._mockllm import (
    ErrorReply,
    HangReply,
    MockLLM,
    MockToolCall,
    Reply,
    TextReply,
    ToolCallsReply,
)
from ._script import (
    FakeReply,
    FakeShell,
    FakeToolResult,
    FakeToolUse,
    FakeTurn,
    ScriptedFake,
)
from ._standalone import chat_reply, load_script

__all__ = [
    "ErrorReply",
    "FakeAnthropic",
    "FakeReply",
    "FakeResponses",
    "FakeShell",
    "FakeToolResult",
    "FakeToolUse",
    "FakeTurn",
    "HangReply",
    "MockLLM",
    "MockToolCall",
    "Reply",
    "ScriptedFake",
    "TextReply",
    "ToolCallsReply",
    "chat_reply",
    "load_script",
]
