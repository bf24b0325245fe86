"""The agent spec: ``AgentSpec`` and its parts, parsed strictly from YAML, JSON or dicts.

The shape and cross-field rules are in ``_spec``, the executor and the scripted steps
in ``_executor``, the ``os_env.sandbox`` block in ``_sandbox``; the per-field checks
in ``_rules``; the cattrs hooks that apply them to the wire in ``_wire``; bounded YAML
reading in ``_yaml`` (:func:`load_yaml`).
"""

from ._egress import EgressRule, EgressRules, normalise_host, parse_egress_rule, unsafe_path
from ._executor import (
    CallStep,
    ExecutorConfig,
    ExecutorSpec,
    FailStep,
    SayStep,
    ScriptStep,
    SleepStep,
)
from ._importable import importable_beside
from ._redact import redact_secrets
from ._rules import python_tool_name
from ._sandbox import SandboxSpec
from ._spec import (
    AgentSpec,
    LimitsSpec,
    McpServerSpec,
    OsEnv,
    PolicySpec,
    TerminalSpec,
    ToolsGrant,
    agent_references,
    parse_policy_spec,
)
from ._trust import ClientTrust, client_spec_problems, env_name_problem
from ._unbuilt import unbuilt_keys
from ._yaml import load_yaml

__all__ = [
    "AgentSpec",
    "CallStep",
    "ClientTrust",
    "EgressRule",
    "EgressRules",
    "ExecutorConfig",
    "ExecutorSpec",
    "FailStep",
    "LimitsSpec",
    "McpServerSpec",
    "OsEnv",
    "PolicySpec",
    "SandboxSpec",
    "SayStep",
    "ScriptStep",
    "SleepStep",
    "TerminalSpec",
    "ToolsGrant",
    "agent_references",
    "client_spec_problems",
    "env_name_problem",
    "importable_beside",
    "load_yaml",
    "normalise_host",
    "parse_egress_rule",
    "parse_policy_spec",
    "python_tool_name",
    "redact_secrets",
    "unbuilt_keys",
    "unsafe_path",
]
