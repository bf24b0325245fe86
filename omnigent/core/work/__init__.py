"""A session's work beside its turns: background tasks, sub-agents, terminals, held calls.

Each piece lives in its owning session's nursery: :class:`BackgroundTasks`
(``sys_call_async`` and the inbox), :class:`SubAgents` and :class:`ChildWork` (dispatches
to child sessions, delivered exactly once), :class:`SessionTerminals`, held tool calls,
the MCP servers a client supplies (:class:`ClientMcp`), the process groups a session's
shells run (:class:`RecordedGroups`), and :class:`BlockingCalls` for user code that
blocks in a thread.
"""

from ._client_mcp import (
    ClientMcp,
    ClientMcpReport,
    check_client_servers,
    client_connection,
    client_server_refusal,
    open_server_set,
    url_prefix_problem,
)
from ._groups import RecordedGroups
from ._held_calls import CANCELLED, DEFAULT_TTL, EXPIRED, INTERRUPTED, HeldToolCall, ToolTask
from ._subagents import (
    ChildWork,
    ChildWorkHooks,
    Dispatch,
    SubAgents,
    TurnOutcome,
    new_work_id,
    recover_work,
)
from ._tasks import BackgroundTasks, format_inbox, vet_inbox
from ._terminals import Panes, SessionTerminals, StartDirectory
from ._threads import CANCEL_GRACE, BlockingCalls

__all__ = [
    "CANCELLED",
    "CANCEL_GRACE",
    "DEFAULT_TTL",
    "EXPIRED",
    "INTERRUPTED",
    "BackgroundTasks",
    "BlockingCalls",
    "ChildWork",
    "ChildWorkHooks",
    "ClientMcp",
    "ClientMcpReport",
    "Dispatch",
    "HeldToolCall",
    "Panes",
    "RecordedGroups",
    "SessionTerminals",
    "StartDirectory",
    "SubAgents",
    "ToolTask",
    "TurnOutcome",
    "check_client_servers",
    "client_connection",
    "client_server_refusal",
    "format_inbox",
    "new_work_id",
    "open_server_set",
    "recover_work",
    "url_prefix_problem",
    "vet_inbox",
]
