"""A session's tools: what it is offered, one call through its policies.

:class:`~.session.SessionTools` builds a session's tool set (built-in ``sys_*`` tools,
registered Python tools, MCP tools, orchestration tools) and runs each call through the
:class:`PolicyEngine` (ALLOW, DENY, ASK); what every session's tools stand on is one
frozen :class:`ToolServices`, built by the runtime. The tool set and the tools it
offers are :mod:`.session`, imported by the first session whose tools are built (a
server answers its first request without them); this front holds what the runtime
uses itself. The orchestration tools
(``sys_session_*``, ``sys_agent_*``) act only through :class:`SessionControl`, a narrow
interface the runtime implements: this package never imports the runtime.
"""

from ._agent_args import SendArgs, TypedError, is_closed, parse_send, split_title, visible_title
from ._client_tools import ClientTool, ClientTools
from ._control import ChildClaims, SessionControl
from ._place import (
    ToolPlace,
    directory_problem,
    in_session_workspaces,
    purge_workspaces,
    spec_for_runner,
    working_directory,
)
from ._policies import (
    PHASE_TOOL_CALL,
    PHASE_TOOL_RESULT,
    PolicyEngine,
    PolicyEvent,
    PolicyFunction,
    Verdict,
    load_function,
    parse_policy_event,
)
from ._policy_allowlist import PolicyAllowlist, PolicyFunctions
from ._policy_event import WirePolicyEvent
from ._python_tools import PythonTools, ToolAllowlist
from ._registry import Tool, ToolRegistry
from ._runners import McpAsk, Runners, ToolServers, Workplace, no_runners
from ._safe_defaults import ASK_COMMANDS, ASK_WRITES, safe_default
from ._services import ToolServices

__all__ = [
    "ASK_COMMANDS",
    "ASK_WRITES",
    "PHASE_TOOL_CALL",
    "PHASE_TOOL_RESULT",
    "ChildClaims",
    "ClientTool",
    "ClientTools",
    "McpAsk",
    "PolicyAllowlist",
    "PolicyEngine",
    "PolicyEvent",
    "PolicyFunction",
    "PolicyFunctions",
    "PythonTools",
    "Runners",
    "SendArgs",
    "SessionControl",
    "Tool",
    "ToolAllowlist",
    "ToolPlace",
    "ToolRegistry",
    "ToolServers",
    "ToolServices",
    "TypedError",
    "Verdict",
    "WirePolicyEvent",
    "Workplace",
    "directory_problem",
    "in_session_workspaces",
    "is_closed",
    "load_function",
    "no_runners",
    "parse_policy_event",
    "parse_send",
    "purge_workspaces",
    "safe_default",
    "spec_for_runner",
    "split_title",
    "visible_title",
    "working_directory",
]
