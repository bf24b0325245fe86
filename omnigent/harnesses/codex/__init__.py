"""The ``codex`` harness: ``codex app-server`` as a session's agent loop.

:class:`CodexHarness` drives the app server over JSON-RPC; :mod:`._protocol` and
:mod:`._stream` are its pure halves.
"""

from ._harness import CodexHarness
from ._protocol import spec_problems

__all__ = ["CodexHarness", "spec_problems"]
