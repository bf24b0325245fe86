"""The orchestration tools that only read: list, history, info, agents, models.

Each function is one tool call from a calling session over the runtime's
:class:`~._orchestration.Orchestration`, and answers the tool's output string. The
one writer here, ``sys_agent_download``, writes only inside the caller's working
directory.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import trio
import yaml

from ..errors import ConfigError, NotFound, OmnigentError, SpecError
from ..model import (
    FunctionCallItem,
    FunctionCallOutputItem,
    Item,
    MessageItem,
    item_text,
    structure,
)
from ..providers import Worker, list_models, load_provider_config
from ..spec import AgentSpec
from ..stores import SessionRow
from ..tools._agent_args import TypedError, is_closed, parse_history, split_title, visible_title
from ..tools._args import ArgField, ToolError, check_args, non_empty_string, string
from ..tools._paths import resolve_inside
from ._orchestration import MAX_SPEC_BYTES, Orchestration, granted_sub_agents
from ._permissions import READ

if TYPE_CHECKING:
    from ._dispatch import SessionTools

__all__ = [
    "ACTIVITY_MAX_CHARS",
    "AGENTS_FOLDER",
    "agent_download",
    "agent_get",
    "agent_list",
    "project_item",
    "session_get_history",
    "session_get_info",
    "session_list",
    "sys_list_models",
    "workers_of",
]

ACTIVITY_MAX_CHARS = 2000
AGENTS_FOLDER = Path(".omnigent") / "agents"
_SPEC_SUFFIXES = (".yaml", ".yml", ".json")


def _clip(text: str) -> str:
    return text if len(text) <= ACTIVITY_MAX_CHARS else text[:ACTIVITY_MAX_CHARS] + " [truncated]"


def project_item(item: Item) -> dict[str, Any]:
    """One history item as the model reads it: its kind and its text, bounded."""
    if isinstance(item, MessageItem):
        return {"type": "message", "role": item.role, "text": _clip(item_text(item))}
    if isinstance(item, FunctionCallItem):
        return {"type": "function_call", "name": item.name, "arguments": _clip(item.arguments)}
    if isinstance(item, FunctionCallOutputItem):
        return {"type": "function_call_output", "output": _clip(item.output)}
    return {"type": item.type}


def _named(row: SessionRow) -> dict[str, Any] | None:
    agent, title = split_title(row.title)
    if agent is None or row.sub_agent is None or is_closed(row.labels, row.title):
        return None
    return {"agent": agent, "title": title, "conversation_id": row.id}


async def session_list(orch: Orchestration, tools: SessionTools, raw: Any) -> str:
    """``sys_session_list``: the caller's open sub-agents, and the sessions it can access."""
    try:
        args = check_args("sys_session_list", raw, (ArgField("agent_name", non_empty_string),))
        caller = await orch.caller(tools)
    except ToolError as exc:
        return exc.render()
    sub_agents = [entry for row in await orch.children(caller.id) if (entry := _named(row))]
    if caller.parent_session_id is not None:
        parent = await orch.store.get_session(caller.parent_session_id)
        if parent is not None:
            sub_agents.append(
                {
                    "agent": "main",
                    "title": visible_title(parent.title),
                    "conversation_id": parent.id,
                }
            )
            for row in await orch.children(parent.id):
                entry = _named(row)
                if entry is not None and row.id != caller.id:
                    sub_agents.append(entry)
    try:
        page = await orch.sessions.list(
            agent_name=args.get("agent_name"),
            parent_session_id=None,
            limit=50,
            after=None,
            viewer=caller.owner,
        )
    except OmnigentError as exc:
        return f"Error: cannot list sessions: {exc.message}"
    sessions = [
        {
            "conversation_id": s.id,
            "title": visible_title(s.title),
            "agent_name": s.agent_name,
            "status": s.status,
            "busy": s.busy,
            "parent_session_id": s.parent_session_id,
        }
        for s in page.data
    ]
    return json.dumps({"sub_agents": sub_agents, "sessions": sessions, "has_more": page.has_more})


async def session_get_history(orch: Orchestration, tools: SessionTools, raw: Any) -> str:
    """``sys_session_get_history``: a tree session's latest items, then its questions."""
    try:
        target_id, tail = parse_history(raw)
        caller = await orch.caller(tools)
        target = await orch.tree_target(
            caller, {"conversation_id": target_id}, "sys_session_get_history"
        )
    except ToolError as exc:
        return exc.render()
    page = await orch.store.list_items(target.id, order="desc", limit=tail)
    items: list[dict[str, Any]] = [
        project_item(structure(row, Item)) for row in reversed(page.rows)
    ]
    for request in orch.host.services.elicitations.pending_for(target.id):
        params = request.params
        items.append(
            {
                "type": "elicitation",
                "elicitation_id": request.elicitation_id,
                "message": _clip(params.message),
                "phase": params.phase,
                "tool_name": params.tool_name,
                "target_session_id": params.target_session_id or target.id,
            }
        )
    agent, title = split_title(target.title)
    return json.dumps(
        {"conversation_id": target.id, "agent": agent, "title": title, "items": items}
    )


async def session_get_info(orch: Orchestration, tools: SessionTools, raw: Any) -> str:
    """``sys_session_get_info``: metadata of a session the caller's user can read."""
    try:
        args = check_args("sys_session_get_info", raw, (ArgField("session_id", non_empty_string),))
        caller = await orch.caller(tools)
    except ToolError as exc:
        return exc.render()
    target_id = args.get("session_id", caller.id)
    target = await orch.store.get_session(target_id)
    if target is None or target_id in orch.host.deleting:
        return TypedError("session_not_found", f"no session {target_id!r}").render()
    if await orch.host.permissions.level(target, caller.owner) < READ:
        return TypedError(
            "access_denied", f"the user behind this session may not read {target_id!r}"
        ).render()
    snapshot = await orch.sessions.snapshot(target)
    agent, title = split_title(snapshot.title)
    return json.dumps(
        {
            "conversation_id": snapshot.id,
            "title": visible_title(snapshot.title),
            "agent": agent,
            "session_name": title,
            "agent_id": snapshot.agent_id,
            "agent_name": snapshot.agent_name,
            "status": snapshot.status,
            "busy": snapshot.busy,
            "harness": snapshot.harness,
            "model": snapshot.model,
            "parent_session_id": snapshot.parent_session_id,
            "root_session_id": snapshot.root_session_id,
            "labels": snapshot.labels,
            "closed": is_closed(snapshot.labels, snapshot.title),
            "turns": target.turn_count,
            "last_event_id": snapshot.last_event_id,
            "created_at": snapshot.created_at,
            "pending_elicitations": len(snapshot.pending_elicitations),
        }
    )


# -- agents ------------------------------------------------------------------------------


def _describe(spec: AgentSpec, orch: Orchestration, **extra: Any) -> dict[str, Any]:
    return {
        "name": spec.name,
        "description": spec.description,
        "harness": orch.host.harness_of(spec, None, strict=False),
        "model": spec.model,
        **extra,
    }


async def _find_agent(orch: Orchestration, tools: SessionTools, ref: str) -> dict[str, Any]:
    for sub in tools.spec.sub_agents:
        if sub.name == ref:
            granted = ref in granted_sub_agents(tools.spec)
            return _describe(sub, orch, source="sub_agent", granted=granted)
    for lookup in (orch.agents.get, orch.agents.get_by_name):
        try:
            agent = await lookup(ref)
        except NotFound:
            continue
        spec = await orch.host.agent_spec(agent.id, agent.version)
        return _describe(spec, orch, source="registered", agent_id=agent.id, version=agent.version)
    raise TypedError("agent_not_found", f"no agent {ref!r} (sys_agent_list lists them)")


async def agent_get(orch: Orchestration, tools: SessionTools, raw: Any) -> str:
    """``sys_agent_get``: one of the caller's sub-agents, or a registered agent."""
    try:
        args = check_args("sys_agent_get", raw, (ArgField("agent_id", non_empty_string, True),))
        return json.dumps(await _find_agent(orch, tools, args["agent_id"]))
    except ToolError as exc:
        return exc.render()


async def agent_list(orch: Orchestration, tools: SessionTools, raw: Any) -> str:
    """``sys_agent_list``: sub-agents, registered agents and the local folder's specs.

    A source that fails is reported under ``errors`` and the others still answer.
    """
    try:
        check_args("sys_agent_list", raw, ())
    except ToolError as exc:
        return exc.render()
    granted = granted_sub_agents(tools.spec)
    agents = [
        _describe(sub, orch, source="sub_agent", granted=sub.name in granted)
        for sub in tools.spec.sub_agents
    ]
    errors: list[dict[str, str]] = []
    try:
        for agent in await orch.agents.list():
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
        cwd = await tools.cwd()
        local, problems = await trio.to_thread.run_sync(_local_specs, cwd / AGENTS_FOLDER)
        agents += [_describe(spec, orch, source="local", path=path) for path, spec in local]
        errors += problems
    except Exception as exc:
        errors.append({"source": "local", "message": f"{type(exc).__name__}: {exc}"})
    return json.dumps({"agents": agents, "errors": errors})


def _local_specs(folder: Path) -> tuple[list[tuple[str, AgentSpec]], list[dict[str, str]]]:
    """Every spec file in ``folder`` (blocking); unreadable ones become errors."""
    if not folder.is_dir():
        return [], []
    found, problems = [], []
    for path in sorted(folder.iterdir())[:200]:
        if path.suffix.lower() not in _SPEC_SUFFIXES or not path.is_file():
            continue
        relative = str(AGENTS_FOLDER / path.name)
        try:
            too_big = path.stat().st_size > MAX_SPEC_BYTES
            if not too_big:
                found.append((relative, AgentSpec.load(path)))
        except (OSError, ValueError, UnicodeDecodeError) as exc:
            message = exc.message if isinstance(exc, SpecError) else str(exc)
            problems.append({"source": "local", "path": relative, "message": message})
            continue
        if too_big:
            message = f"larger than {MAX_SPEC_BYTES} bytes"
            problems.append({"source": "local", "path": relative, "message": message})
    return found, problems


def _plain_filename(value: Any) -> str | None:
    problem = string(value)
    if problem:
        return problem
    if value in ("", ".", "..") or "/" in value or "\\" in value or "\x00" in value:
        return "must be a plain file name, not a path"
    if not value.lower().endswith(_SPEC_SUFFIXES):
        return "must end in .yaml, .yml or .json"
    return None


async def agent_download(orch: Orchestration, tools: SessionTools, raw: Any) -> str:
    """``sys_agent_download``: an agent's spec, written under ``.omnigent/agents``.

    The file stays inside the working directory: a path in the file name is refused,
    and so is a destination that resolves elsewhere (a symlink). The spec is written
    without its ``api_key``.
    """
    try:
        args = check_args(
            "sys_agent_download",
            raw,
            (
                ArgField("agent_id", non_empty_string, True),
                ArgField("filename", _plain_filename),
            ),
        )
        described = await _find_agent(orch, tools, args["agent_id"])
        spec = await _spec_of(orch, tools, described)
        filename = args.get("filename") or f"{spec.name}.yaml"
        cwd = await tools.cwd()
        data = spec.to_dict()
        data.get("executor", {}).get("config", {}).pop("api_key", None)
        if filename.lower().endswith(".json"):
            text = json.dumps(data, indent=2) + "\n"
        else:
            text = yaml.safe_dump(data, sort_keys=False, allow_unicode=True)
        relative = str(AGENTS_FOLDER / filename)
        written = await trio.to_thread.run_sync(_write_inside, cwd, relative, text)
    except ToolError as exc:
        return exc.render()
    return json.dumps({"downloaded": True, "agent": spec.name, "path": relative, "bytes": written})


async def _spec_of(
    orch: Orchestration, tools: SessionTools, described: dict[str, Any]
) -> AgentSpec:
    if described["source"] == "sub_agent":
        return next(s for s in tools.spec.sub_agents if s.name == described["name"])
    return await orch.host.agent_spec(described["agent_id"], described["version"])


def _write_inside(cwd: Path, relative: str, text: str) -> int:
    """Write ``text`` at ``relative`` under ``cwd``, never through a symlink (blocking)."""
    target = resolve_inside(cwd, relative)
    target.parent.mkdir(parents=True, exist_ok=True)
    target = resolve_inside(cwd, relative)  # the folder may have been a symlink
    data = text.encode()
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(target, flags, 0o644)
    except OSError as exc:
        raise ToolError(f"cannot write {relative}: {exc.strerror or exc}") from None
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
    return len(data)


# -- models --------------------------------------------------------------------------------


def workers_of(orch: Orchestration, spec: AgentSpec | None) -> list[Worker]:
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
    for name, worker in (("self", spec), *((s.name, s) for s in spec.sub_agents)):
        config = worker.executor.config
        try:
            harness = orch.host.harness_of(worker, None)
            info = orch.host.harnesses.info(harness)
        except OmnigentError as exc:
            workers.append(Worker(name, worker.harness, config.model, unavailable=exc.message))
            continue
        workers.append(
            Worker(
                name,
                harness,
                config.model,
                config.base_url,
                info.model_family,
                info.accepts_model,
                info.unavailable(),
            )
        )
    return workers


def _names(value: Any) -> str | None:
    if isinstance(value, list) and all(isinstance(v, str) for v in value) and len(value) <= 100:
        return None
    return "must be an array of at most 100 strings"


async def sys_list_models(orch: Orchestration, tools: SessionTools, raw: Any) -> str:
    """``sys_list_models``: per worker, the models it can be asked to run."""
    try:
        args = check_args(
            "sys_list_models",
            raw,
            (ArgField("workers", _names), ArgField("model_ids", _names)),
        )
        workers = workers_of(orch, tools.spec)
        try:
            config = await trio.to_thread.run_sync(load_provider_config, orch.home)
        except ConfigError as exc:
            raise ToolError(f"cannot read the provider configuration: {exc.message}") from None
    except ToolError as exc:
        return exc.render()
    return json.dumps(
        list_models(config, workers, only=args.get("workers"), model_ids=args.get("model_ids"))
    )
