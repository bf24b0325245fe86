"""The ``claude-code`` harness: Claude Code as a session's agent loop.

:class:`ClaudeCodeHarness` drives the CLI over stream-json and its control protocol;
:mod:`._protocol` (what is sent, the approvals) and :mod:`._stream` (what its lines
mean) are pure.
"""

from ._harness import ClaudeCodeHarness
from ._protocol import spec_problems

__all__ = ["ClaudeCodeHarness", "spec_problems"]
