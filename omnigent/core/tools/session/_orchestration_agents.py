"""The orchestration tools about agents and models: get, list, download, list models.

Each function is one tool call from a calling session, acting through
:class:`~._control.SessionControl`, and answers the tool's output string; a refusal is
raised (:class:`~omnigent.tools.ToolError`) and answered as the original omnigent's JSON
object. An agent is reached through a session that runs it (``session_id``), as in the
original: a session the caller's acting users cannot read is answered as one that does
not exist (``agent_not_found``). Files are read and written inside the caller's working
directory only (:mod:`omnigent.core.tools._agent_files`).
"""

from __future__ import annotations

import functools
import json
import logging
from typing import TYPE_CHECKING, Any

import trio

from ....errors import ConfigError, OmnigentError
from ....providers import Worker, list_models
from ....spec import AgentSpec, McpServerSpec, PolicySpec
from ....stores import SessionRow
from ....tools import ArgField, ToolError, check_args, non_empty_string
from .._agent_args import TypedError
from .._control import SessionControl
from ._acting import readable
from ._agent_files import bundle, bundle_name, local_configs, write_beneath
from ._orchestration_reads import LIST_LIMIT, readable_listed

if TYPE_CHECKING:
    from ....model import Agent
    from ._session_tools import SessionTools

__all__ = [
    "agent_download",
    "agent_get",
    "agent_list",
    "mcp_summary",
    "policy_summary",
    "sys_list_models",
    "workers_of",
]

log = logging.getLogger(__name__)


def mcp_summary(server: McpServerSpec) -> dict[str, Any]:
    """What an agent's MCP server is, without its secrets (header names, no values;
    no ``env``)."""
    command = list(server.command or ())
    return {
        "name": server.name,
        "transport": "http" if server.url is not None else "stdio",
        "description": None,
        "url": server.url,
        "headers": dict.fromkeys(server.headers, "<redacted>"),
        "command": command[0] if command else None,
        "args": command[1:],
    }


def policy_summary(policy: PolicySpec) -> dict[str, Any]:
    """A guardrail as the original shows it: name, type, the phases it judges, and a
    word about it (a function's reference, else its reason)."""
    function = policy.type == "function"
    return {
        "name": policy.name,
        "type": policy.type,
        "on": ["tool_call", "tool_result"] if function else ["tool_call"],
        "description": policy.function if function else policy.reason,
    }


async def _session_of(
    control: SessionControl, tools: SessionTools, session_id: str
) -> tuple[SessionRow, Agent, AgentSpec]:
    """The session ``session_id`` names, its agent version and the spec it runs.

    Raises:
        TypedError: ``agent_not_found``: no such session, one the caller may not read,
            or its agent is gone.
    """
    caller = await control.row(tools.session_id)
    target = await control.find_session(session_id)
    if target is None or not await readable(control, caller, target):
        raise TypedError("agent_not_found", ("session_id", session_id))
    try:
        agent, spec = await control.session_agent(target)
    except OmnigentError:
        raise TypedError("agent_not_found", ("session_id", session_id)) from None
    return target, agent, spec


_SESSION = (ArgField("session_id", non_empty_string, True),)


async def agent_get(control: SessionControl, tools: SessionTools, raw: Any) -> str:
    """``sys_agent_get {session_id}``: the agent that session runs."""
    args = check_args("sys_agent_get", raw, _SESSION)
    _, agent, spec = await _session_of(control, tools, args["session_id"])
    return json.dumps(
        {
            "session_id": args["session_id"],
            "agent_id": agent.id,
            "name": spec.name,
            "version": agent.version,
            "description": spec.description,
            "harness": control.harness_of(spec, strict=False),
            "mcp_servers": [mcp_summary(server) for server in spec.mcp_servers],
            "policies": [policy_summary(policy) for policy in spec.policies],
        }
    )


async def agent_list(control: SessionControl, tools: SessionTools, raw: Any) -> str:
    """``sys_agent_list``: the registered agents, the agents of the sessions the caller
    may read, and the agent configs in the workspace's agent-config folder.

    Each source that fails leaves its section empty (logged); the answer stays
    well-formed.
    """
    check_args("sys_agent_list", raw, ())
    sections: dict[str, list[dict[str, Any]]] = {}
    try:
        sections["builtins"] = [
            {
                "agent_id": agent.id,
                "name": agent.name,
                "description": agent.description,
                "harness": agent.harness,
            }
            for agent in await control.list_agents()
        ]
    except Exception:
        log.warning("sys_agent_list: the registered agents could not be read", exc_info=True)
        sections["builtins"] = []
    try:
        sections["session_agents"] = await _session_agents(control, tools)
    except Exception:
        log.warning("sys_agent_list: the sessions could not be read", exc_info=True)
        sections["session_agents"] = []
    try:
        sections["local_configs"] = await trio.to_thread.run_sync(local_configs, await tools.cwd())
    except Exception:
        log.warning("sys_agent_list: the agent-config folder could not be read", exc_info=True)
        sections["local_configs"] = []
    return json.dumps(sections)


async def _session_agents(control: SessionControl, tools: SessionTools) -> list[dict[str, Any]]:
    caller = await control.row(tools.session_id)
    page = await control.list_sessions(viewer=caller.owner, agent_name=None, limit=LIST_LIMIT)
    return [
        {
            "session_id": snapshot.id,
            "agent_id": snapshot.agent_id,
            "agent_name": snapshot.agent_name,
            "status": snapshot.status,
        }
        for snapshot in await readable_listed(control, caller, page.data)
    ]


def _bare_filename(value: Any) -> str | None:
    if not isinstance(value, str):
        return f"must be a string, got {type(value).__name__}"
    return None


async def agent_download(control: SessionControl, tools: SessionTools, raw: Any) -> str:
    """``sys_agent_download {session_id, dest_filename?}``: that session's agent bundle
    (a ``.tar.gz`` holding its spec as ``config.yaml``), written in the working
    directory as ``<name>-v<version>.tar.gz`` unless named.

    A name with a path in it is refused, and so is a destination a symlink would take
    out of the working directory. The spec is written without its ``api_key``, and with
    every credential redacted unless every acting user owns the agent (a sub-agent
    belongs to the agent whose spec holds it).
    """
    args = check_args(
        "sys_agent_download",
        raw,
        (*_SESSION, ArgField("dest_filename", _bare_filename)),
    )
    _, agent, spec = await _session_of(control, tools, args["session_id"])
    filename = args.get("dest_filename") or bundle_name(spec.name, agent.version)
    if "/" in filename or "\\" in filename or filename in (".", ".."):
        raise ToolError("sys_agent_download dest_filename must be a bare filename, not a path")
    caller = await control.row(tools.session_id)
    owner = await control.agent_owner(agent.id)
    redact = any(user != owner for user in await control.acting_users(caller))
    data = await trio.to_thread.run_sync(functools.partial(bundle, spec, redact=redact))
    cwd = await tools.cwd()
    written = await trio.to_thread.run_sync(write_beneath, cwd, filename, data)
    return json.dumps({"path": str(cwd / filename), "bytes_written": written})


def workers_of(control: SessionControl, spec: AgentSpec | None) -> list[Worker]:
    """Each sub-agent of ``spec``, then ``self``, as the model catalog sees them.

    Raises:
        ToolError: there is no spec to read the workers from.
    """
    if spec is None:
        raise ToolError(
            "sys_list_models needs the calling agent's spec to know its workers, and this "
            "session has none"
        )
    workers = []
    registry = control.harnesses
    for name, worker in (*((s.name, s) for s in spec.sub_agents), ("self", spec)):
        config = worker.executor.config
        try:
            harness = control.harness_of(worker)
            info = registry.info(harness)
        except OmnigentError as exc:
            workers.append(Worker(name, worker.harness, config.model, unavailable=exc.message))
            continue
        rule = info.models
        workers.append(
            Worker(
                name,
                harness,
                config.model,
                config.base_url,
                guard=None if rule is None else functools.partial(rule.refusal, harness),
                examples=rule.examples if rule is not None else (),
                accepts_model=info.accepts_model,
                unavailable=registry.unavailable_reason(harness),
            )
        )
    return workers


def _names(value: Any) -> str | None:
    if isinstance(value, list) and all(isinstance(v, str) for v in value) and len(value) <= 100:
        return None
    return "must be an array of at most 100 strings"


async def sys_list_models(control: SessionControl, tools: SessionTools, raw: Any) -> str:
    """``sys_list_models``: per worker, the models it can be asked to run."""
    args = check_args(
        "sys_list_models",
        raw,
        (ArgField("workers", _names), ArgField("model_ids", _names)),
    )
    workers = workers_of(control, tools.spec)
    try:
        config = await control.provider_config()
    except ConfigError as exc:
        raise ToolError(f"cannot read the provider configuration: {exc.message}") from None
    return json.dumps(
        list_models(config, workers, only=args.get("workers"), model_ids=args.get("model_ids"))
    )
