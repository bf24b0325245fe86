"""The built-in ``sys_*`` tools a session's :class:`~._session_tools.SessionTools` offers:
the background-task tools' schemas, and the adapters that run the OS, terminal,
background and orchestration tools for one session.

Each adapter takes the session's tools and the decoded arguments and answers the
tool's output; bad arguments are an ``Error: …`` string (the orchestration tools': a
JSON object, as the original omnigent's), never an exception.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

from ....errors import SandboxUnavailable
from ....tools import ToolError
from ....tools import os as os_tools
from ....tools import terminals as terminal_tools
from .._agent_args import refusal
from .._registry import decode_arguments

if TYPE_CHECKING:
    from ._session_tools import SessionTools

__all__ = [
    "ASYNC_TOOLS",
    "SESSION_TOOL_SCHEMAS",
    "Builtin",
    "call_async",
    "cancel_async",
    "orchestrated",
    "os_tool",
    "read_inbox",
    "terminal_tool",
]

ASYNC_TOOLS = ("sys_call_async", "sys_read_inbox", "sys_cancel_async")

Builtin = Callable[["SessionTools", dict[str, Any]], Awaitable[str]]

SESSION_TOOL_SCHEMAS: dict[str, dict[str, Any]] = {
    "sys_call_async": {
        "description": (
            "Start a tool in the background and return a handle at once; its result "
            "arrives in the inbox (read it with sys_read_inbox)."
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "tool": {"type": "string", "description": "The tool to run."},
                "args": {
                    "type": ["object", "string"],
                    "description": "The tool's arguments (an object or JSON text).",
                },
            },
            "required": ["tool"],
            "additionalProperties": False,
        },
    },
    "sys_read_inbox": {
        "description": "Read (and clear) the results of finished background tasks.",
        "parameters": {"type": "object", "properties": {}, "additionalProperties": False},
    },
    "sys_cancel_async": {
        "description": "Cancel a running background task by its handle id.",
        "parameters": {
            "type": "object",
            "properties": {"handle_id": {"type": "string"}},
            "required": ["handle_id"],
            "additionalProperties": False,
        },
    },
}


def _only_keys(args: Mapping[str, Any], tool: str, allowed: set[str]) -> str | None:
    extra = sorted(set(args) - allowed)
    if extra:
        return f"Error: invalid arguments for {tool}: unknown argument {extra[0]!r}"
    return None


def orchestrated(run: Any) -> Builtin:
    """The adapter of one orchestration tool: it acts through the session's control,
    and a refusal (a :class:`~omnigent.tools.ToolError` it raises) is the original's
    JSON object (:func:`~._agent_args.refusal`), not an ``Error: …`` line."""

    async def call(tools: SessionTools, args: dict[str, Any]) -> str:
        assert tools.control is not None  # offered only with a control
        try:
            output: str = await run(tools.control, tools, args)
        except ToolError as exc:
            return refusal(exc)
        return output

    return call


def os_tool(name: str) -> Builtin:
    tool = getattr(os_tools, name)

    async def run(tools: SessionTools, args: dict[str, Any]) -> str:
        if tools.workplace is not None:  # on the session's runner
            return await tools.workplace.run_tool(name, args)
        try:
            cwd = await tools.cwd()
        except ToolError as exc:  # the session's directory is refused (see _place)
            return exc.render()
        try:
            sandbox = await tools.sandbox()
        except SandboxUnavailable as exc:
            return f"Error: {exc.message}"
        if name == "sys_os_shell":  # the one that starts processes: record their group
            shell: str = await tool(
                cwd, args, tracker=tools.groups, sandbox=sandbox, trees=tools.trees
            )
            return shell
        output: str = await tool(cwd, args, sandbox=sandbox)
        return output

    return run


def terminal_tool(name: str) -> Builtin:
    tool = getattr(terminal_tools, name)

    async def run(tools: SessionTools, args: dict[str, Any]) -> str:
        assert tools.terminals is not None  # offered only with terminals
        output: str = await tool(tools.terminals, args)
        return output

    return run


async def call_async(tools: SessionTools, args: dict[str, Any]) -> str:
    problem = _only_keys(args, "sys_call_async", {"tool", "args"})
    if problem:
        return problem
    tool = args.get("tool")
    if not isinstance(tool, str) or not tool:
        return "Error: invalid arguments for sys_call_async: 'tool' must be a tool name"
    if tool in ASYNC_TOOLS:
        return f"Error: {tool} cannot run in the background"
    if not tools.offers(tool):
        return f"Error: unknown tool {tool!r}; call one of the tools you were offered"
    inner = decode_arguments(args.get("args") or {})
    if isinstance(inner, str):
        return inner.replace("Error: arguments", "Error: 'args'", 1)
    try:
        handle_id = tools.start_background(tool, inner)
    except OverflowError as exc:
        return f"Error: {exc}; wait for some to finish or cancel them"
    return json.dumps({"handle_id": handle_id, "tool": tool, "status": "running"})


async def read_inbox(tools: SessionTools, args: dict[str, Any]) -> str:
    problem = _only_keys(args, "sys_read_inbox", set())
    if problem:
        return problem
    lines = await tools.drain_inbox()
    return "\n".join(lines) if lines else "The inbox is empty."


async def cancel_async(tools: SessionTools, args: dict[str, Any]) -> str:
    problem = _only_keys(args, "sys_cancel_async", {"handle_id"})
    if problem:
        return problem
    handle_id = args.get("handle_id")
    if not isinstance(handle_id, str):
        return "Error: invalid arguments for sys_cancel_async: 'handle_id' must be a string"
    if not tools.cancel_background(handle_id):
        return f"Error: no running background task {handle_id!r}"
    return json.dumps({"handle_id": handle_id, "status": "cancelling"})
