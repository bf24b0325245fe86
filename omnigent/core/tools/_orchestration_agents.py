"""The orchestration tools about agents and models: get, list, download, list models.

Each function is one tool call from a calling session, acting through
:class:`~._control.SessionControl`, and answers the tool's output string. Files
are read and written inside the caller's working directory only
(:mod:`omnigent.core.tools._agent_files`).
"""

from __future__ import annotations

import functools
import json
from typing import TYPE_CHECKING, Any

import trio

from ...errors import ConfigError, OmnigentError
from ...providers import Worker, list_models
from ...spec import AgentSpec
from ...tools import ArgField, ToolError, check_args, non_empty_string
from ._agent_args import TypedError
from ._agent_files import (
    AGENTS_FOLDER,
    local_specs,
    plain_filename,
    spec_text,
    write_beneath,
)
from ._control import SessionControl

if TYPE_CHECKING:
    from ._session_tools import SessionTools

__all__ = ["agent_download", "agent_get", "agent_list", "sys_list_models", "workers_of"]


def _describe(spec: AgentSpec, control: SessionControl, **extra: Any) -> dict[str, Any]:
    return {
        "name": spec.name,
        "description": spec.description,
        "harness": control.harness_of(spec, strict=False),
        "model": spec.model,
        **extra,
    }


async def _find_agent(
    control: SessionControl, tools: SessionTools, ref: str
) -> tuple[dict[str, Any], AgentSpec]:
    """One of the caller's sub-agents by name, else a registered agent by id or name."""
    for sub in tools.spec.sub_agents:
        if sub.name == ref:
            granted = ref in tools.spec.granted_sub_agents()
            return _describe(sub, control, source="sub_agent", granted=granted), sub
    agent = await control.find_agent(ref)
    if agent is None:
        raise TypedError("agent_not_found", f"no agent {ref!r} (sys_agent_list lists them)")
    spec = await control.agent_spec(agent)
    described = _describe(
        spec, control, source="registered", agent_id=agent.id, version=agent.version
    )
    return described, spec


async def agent_get(control: SessionControl, tools: SessionTools, raw: Any) -> str:
    """``sys_agent_get``: one of the caller's sub-agents, or a registered agent."""
    try:
        args = check_args("sys_agent_get", raw, (ArgField("agent_id", non_empty_string, True),))
        described, _ = await _find_agent(control, tools, args["agent_id"])
        return json.dumps(described)
    except ToolError as exc:
        return exc.render()


async def agent_list(control: SessionControl, tools: SessionTools, raw: Any) -> str:
    """``sys_agent_list``: sub-agents, registered agents and the local folder's specs.

    A source that fails is reported under ``errors`` and the others still answer.
    """
    try:
        check_args("sys_agent_list", raw, ())
    except ToolError as exc:
        return exc.render()
    granted = tools.spec.granted_sub_agents()
    agents = [
        _describe(sub, control, source="sub_agent", granted=sub.name in granted)
        for sub in tools.spec.sub_agents
    ]
    errors: list[dict[str, str]] = []
    try:
        for agent in await control.list_agents():
            agents.append(
                {
                    "name": agent.name,
                    "description": agent.description,
                    "harness": agent.harness,
                    "model": agent.model,
                    "source": "registered",
                    "agent_id": agent.id,
                    "version": agent.version,
                }
            )
    except Exception as exc:
        errors.append({"source": "registered", "message": f"{type(exc).__name__}: {exc}"})
    try:
        local, problems = await trio.to_thread.run_sync(local_specs, await tools.cwd())
        agents += [_describe(spec, control, source="local", path=path) for path, spec in local]
        errors += problems
    except Exception as exc:
        errors.append({"source": "local", "message": f"{type(exc).__name__}: {exc}"})
    return json.dumps({"agents": agents, "errors": errors})


async def agent_download(control: SessionControl, tools: SessionTools, raw: Any) -> str:
    """``sys_agent_download``: an agent's spec, written under ``.omnigent/agents``.

    A path in the file name is refused, and so is a destination a symlink would take
    out of the working directory. The spec is written without its ``api_key``.
    """
    try:
        args = check_args(
            "sys_agent_download",
            raw,
            (
                ArgField("agent_id", non_empty_string, True),
                ArgField("filename", plain_filename),
            ),
        )
        _, spec = await _find_agent(control, tools, args["agent_id"])
        filename = args.get("filename") or f"{spec.name}.yaml"
        relative = str(AGENTS_FOLDER / filename)
        text = spec_text(spec, filename)
        written = await trio.to_thread.run_sync(write_beneath, await tools.cwd(), relative, text)
    except ToolError as exc:
        return exc.render()
    return json.dumps({"downloaded": True, "agent": spec.name, "path": relative, "bytes": written})


def workers_of(control: SessionControl, spec: AgentSpec | None) -> list[Worker]:
    """``self`` and each sub-agent of ``spec``, as the model catalog sees them.

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
    for name, worker in (("self", spec), *((s.name, s) for s in spec.sub_agents)):
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
    try:
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
    except ToolError as exc:
        return exc.render()
    return json.dumps(
        list_models(config, workers, only=args.get("workers"), model_ids=args.get("model_ids"))
    )
