"""The server's side of the runner link (``docs/runners.md``).

:class:`RunnerHub` keeps the runners connected to this server, one resumable link each
(:func:`open_runner_hub` owns their lifetimes); :class:`RunnerPeer` serves what a
runner calls back for the turns it runs. The WebSocket route that brings a runner in is
in :mod:`omnigent.transports.http` (``GET /v1/runners/connect``).
"""

from ._hub import (
    DEFAULT_RUNNER_WAIT,
    ConnectedRunner,
    RunnerHub,
    RunnerSettings,
    open_runner_hub,
)
from ._panes import RemotePanes
from ._peer import RunnerPeer, ServedTurn

__all__ = [
    "DEFAULT_RUNNER_WAIT",
    "ConnectedRunner",
    "RemotePanes",
    "RunnerHub",
    "RunnerPeer",
    "RunnerSettings",
    "ServedTurn",
    "open_runner_hub",
]
