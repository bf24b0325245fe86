"""What the tools of every session of one runtime stand on: :class:`ToolServices`.

Built once by the runtime as it opens; each session's :class:`~.session.SessionTools`
(imported by the first session that offers tools) is made over it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs

from ._client_tools import ClientTools
from ._control import ChildClaims

if TYPE_CHECKING:
    from ...observability import Metrics
    from ...outbound import UrlAllowList
    from ...processes import ProcessTrees
    from ...stores import Store
    from ...tools.terminals import TmuxServer
    from ..asking import Elicitations
    from ..bus import EventBus
    from ..work import ClientMcp
    from ._control import SessionControl
    from ._place import ToolPlace
    from ._registry import ToolRegistry

__all__ = ["ToolServices"]


@attrs.frozen(eq=False)
class ToolServices:
    """What the tools of every session of one runtime stand on (built once by it).

    Attributes:
        registry: the Python tools registered on the runtime.
        store, bus, elicitations: where tools record, publish and ask.
        place: where OS tools act.
        tmux: the runtime's tmux server (terminals); None without one.
        client_tools: tool implementations clients supply for their sessions.
        client_mcp: MCP servers clients supply for their sessions.
        control: what the orchestration tools act through (None: tools made
            outside a runtime, which offer no orchestration tools).
        claims: the children sends are working on (shared by every session).
        metrics: where tool calls are counted (None: nowhere).
        trees: the process trees shell commands run in (None: their process group
            alone; see :func:`omnigent.processes.open_process_trees`).
        mcp_guard: URLs clients may name for MCP servers (``--allow-mcp-url``): a
            server under them is reached through the outbound guard.
    """

    registry: ToolRegistry
    store: Store
    bus: EventBus
    elicitations: Elicitations
    place: ToolPlace
    tmux: TmuxServer | None = None
    client_tools: ClientTools = attrs.field(factory=ClientTools)
    client_mcp: ClientMcp | None = None
    control: SessionControl | None = None
    claims: ChildClaims = attrs.field(factory=ChildClaims)
    metrics: Metrics | None = None
    trees: ProcessTrees | None = None
    mcp_guard: UrlAllowList | None = None
