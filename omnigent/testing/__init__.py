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

For tests of code built on the runtime: :class:`RecordingHarness`, a harness double
that records every turn's request and plays a body you write (with
:func:`scripted_agent`, :func:`run_turn` and :func:`collect_turn`), and :func:`probe`,
a typed window into a running runtime for what the API does not show.
"""

from ._fake_anthropic import FakeAnthropic
from ._fake_responses import FakeResponses
from ._harness import RecordingHarness, TurnBody, collect_turn, run_turn, scripted_agent
from ._mockllm import (
    ErrorReply,
    HangReply,
    MockLLM,
    MockToolCall,
    Reply,
    TextReply,
    ToolCallsReply,
    Writes,
    mock_tokens,
)
from ._probe import RuntimeProbe, probe
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
    "RecordingHarness",
    "Reply",
    "RuntimeProbe",
    "ScriptedFake",
    "TextReply",
    "ToolCallsReply",
    "TurnBody",
    "Writes",
    "chat_reply",
    "collect_turn",
    "load_script",
    "mock_tokens",
    "probe",
    "run_turn",
    "scripted_agent",
]
