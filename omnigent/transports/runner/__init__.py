"""The server's side of the runner link (``docs/runners.md``).

:class:`RunnerHub` keeps the runners connected to this server, one resumable link each
(:func:`open_runner_hub` owns their lifetimes). What a connected runner is asked and
answers — the harness and workplace of a session bound to it, the peer that serves its
calls back — is :mod:`.remote`, imported by the first runner that connects (it speaks
JSON-RPC, which a server no runner reaches never loads). The WebSocket route that
brings a runner in is in :mod:`omnigent.transports.http` (``GET /v1/runners/connect``).
"""

from ._hub import (
    DEFAULT_RUNNER_WAIT,
    ConnectedRunner,
    RunnerHub,
    RunnerSettings,
    open_runner_hub,
)

__all__ = [
    "DEFAULT_RUNNER_WAIT",
    "ConnectedRunner",
    "RunnerHub",
    "RunnerSettings",
    "open_runner_hub",
]
