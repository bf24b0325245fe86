"""The ``pi`` harness: the pi coding agent (``@mariozechner/pi-coding-agent``).

``pi --mode rpc`` as a session's agent loop, with omnigent's extension
(``extension.ts``) giving it the session's model endpoint, prompt and tools, and
omnigent's policies a veto over each of its tool calls. :class:`PiHarness` is the
runtime's side (:mod:`._harness`), :mod:`._protocol` its pure half. What was verified
about pi, and with which version, is in ``docs/harnesses-native.md``.
"""

from ._harness import PiHarness
from ._protocol import spec_problems

__all__ = ["PiHarness", "spec_problems"]
