"""The server's side of a runner's work: what a connected runner is asked, and answers.

:class:`RunnerHarness` and :class:`RunnerWorkplace` are what a session bound to a
runner gets for its harness and its OS tools, terminals (:class:`RemotePanes`) and
stdio MCP servers (:class:`RemoteMcp`); :class:`RunnerPeer` serves what a runner calls
back for the turns it runs (:class:`ServedTurn`). All of it speaks JSON-RPC over the
runner's link.

A package of its own, imported by the first runner that connects or the first session
placed on one (:class:`~omnigent.transports.runner.RunnerHub`): a server that no runner
reaches does not load JSON-RPC before its first answer (``benchmarks/startup.py``).
"""

from ._mcp import RemoteMcp
from ._panes import RemotePanes
from ._peer import RunnerPeer, ServedTurn
from ._proxy import RunnerHarness, RunnerWorkplace

__all__ = [
    "RemoteMcp",
    "RemotePanes",
    "RunnerHarness",
    "RunnerPeer",
    "RunnerWorkplace",
    "ServedTurn",
]
