"""The ``openai-agents`` harness's child: an OpenAI Agents SDK agent run under asyncio.

The SDK is asyncio; omnigent is Trio. So the agent runs here, in a process of its own
that the harness spawns (``python -P _child.py``; run as a file, it imports nothing
of omnigent's), and the two speak JSON lines on this process's stdin and stdout
(:mod:`._protocol` is the harness's side of the same wire):

in (from the harness)::

    {"type": "turn", "input": [<SDK input items>], "model": M|null, "tools": [...]}
    {"type": "tool_result", "id": R, "output": "..."}     answers a tool_request
    {"type": "verdict", "id": R, "allow": bool, "reason": "..."}   answers a check
    {"type": "interrupt"}

out (to the harness)::

    {"type": "ready", "agent": NAME}  |  {"type": "fatal", "error": "..."} (then exit 1)
    {"type": "delta", "message": N, "text": "..."}      assistant text as it streams
    {"type": "message", "message": N, "text": "..."}    an assistant message is done
    {"type": "call", "call_id", "name", "arguments"}    a function tool or a handoff
    {"type": "output", "call_id", "output"}             its output
    {"type": "usage", "model", "input", "cached", "output"}   one model call's tokens
    {"type": "tool_request", "id": R, "call_id", "name", "arguments"}   run omnigent's tool
    {"type": "check", "id": R, "call_id", "name", "arguments", "needs_approval": bool}
    {"type": "done", "output": "..."|null}  |  {"type": "failed", "error": "..."}
    {"type": "interrupted"}

Every function tool of every agent the run uses — handoff targets and MCP servers'
tools included — is guarded: before it runs, the harness is asked (``check``) and
the session's policies decide, its ``needs_approval`` turned into the question the
harness asks the person; omnigent's tools (``tools`` of the turn) are added to every
agent and run by the harness. Tools that would run here without passing through a
function — a local shell, a computer, an apply-patch editor — are refused; hosted
tools run at the provider and are left alone.

The agent is ``$OMNIGENT_AGENTS_AGENT`` (``package.module:attr``, an ``agents.Agent``);
the model endpoint ``$OMNIGENT_AGENTS_BASE_URL`` / ``$OMNIGENT_AGENTS_API_KEY``,
spoken as Chat Completions or, with ``$OMNIGENT_AGENTS_API=responses``, as Responses.
Tracing is off (it would send the run to OpenAI). The agent's own ``print`` goes to
stderr: stdout is the wire's.
"""

from __future__ import annotations

import asyncio
import dataclasses
import importlib
import inspect
import itertools
import json
import os
import sys
from collections.abc import Awaitable, Callable
from typing import Any, BinaryIO

MAX_LINE = 16 * 1024 * 1024
MAX_TURNS = 50


def _load_agent(ref: str) -> Any:
    """The object ``package.module:attr`` names.

    Raises:
        ValueError: the reference is malformed, or names nothing.
    """
    module_name, colon, attr_path = ref.partition(":")
    if not colon or not module_name or not attr_path:
        raise ValueError(f"{ref!r} is not a 'package.module:attr' reference")
    value: Any = importlib.import_module(module_name)
    for part in attr_path.split("."):
        if not hasattr(value, part):
            raise ValueError(f"{ref!r}: {module_name} has no attribute {attr_path!r}")
        value = getattr(value, part)
    return value


class Child:
    """One agent, served turn by turn to the harness on the other end of the pipes."""

    def __init__(self, agent: Any, out: BinaryIO, sdk: Any) -> None:
        self._agent = agent
        self._out = out
        self._sdk = sdk
        self._numbers = itertools.count(1)
        self._waiting: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self._guarded: dict[int, tuple[Any, Any]] = {}
        self._ours: list[Any] = []
        self._turn: asyncio.Task[None] | None = None
        self._message = 0

    # -- the wire ----------------------------------------------------------------------

    def emit(self, message: dict[str, Any]) -> None:
        self._out.write(json.dumps(message, separators=(",", ":"), default=str).encode() + b"\n")
        self._out.flush()

    async def ask(self, message: dict[str, Any]) -> dict[str, Any]:
        """Send a request to the harness and wait for its answer."""
        request_id = f"r{next(self._numbers)}"
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._waiting[request_id] = future
        try:
            self.emit({**message, "id": request_id})
            return await future
        finally:
            self._waiting.pop(request_id, None)

    async def serve(self, lines: asyncio.StreamReader) -> None:
        """Read the harness's lines until stdin closes."""
        async with asyncio.TaskGroup() as tasks:
            while line := await lines.readline():
                try:
                    message = json.loads(line)
                except ValueError:
                    continue
                if isinstance(message, dict):
                    self._dispatch(message, tasks)
            if self._turn is not None:
                self._turn.cancel()

    def _dispatch(self, message: dict[str, Any], tasks: asyncio.TaskGroup) -> None:
        kind = message.get("type")
        if kind == "turn":
            if self._turn is not None and not self._turn.done():
                self.emit({"type": "failed", "error": "a turn is already running"})
                return
            self._turn = tasks.create_task(self._run_turn(message))
        elif kind in ("tool_result", "verdict"):
            future = self._waiting.get(str(message.get("id")))
            if future is not None and not future.done():
                future.set_result(message)
        elif kind == "interrupt":
            if self._turn is not None and not self._turn.done():
                self._turn.cancel()
            else:
                self.emit({"type": "interrupted"})

    # -- a turn --------------------------------------------------------------------------

    async def _run_turn(self, message: dict[str, Any]) -> None:
        self._ours = [self._omnigent_tool(t) for t in message.get("tools") or []]
        self._message += 1
        try:
            output = await self._stream(message)
        except asyncio.CancelledError:
            self.emit({"type": "interrupted"})
            return
        except Exception as exc:
            self.emit({"type": "failed", "error": f"{type(exc).__name__}: {exc}"})
            return
        finally:
            for future in self._waiting.values():
                future.cancel()
        if output is not None and not isinstance(output, str):
            output = json.dumps(output, default=str)
        self.emit({"type": "done", "output": output})

    async def _stream(self, message: dict[str, Any]) -> Any:
        sdk = self._sdk
        config = sdk.RunConfig(
            model=message.get("model") or None,
            model_provider=_provider(sdk),
            # A streamed Chat Completions call reports its usage only when asked to
            # (the SDK asks by default only api.openai.com); the Responses API always.
            model_settings=sdk.ModelSettings(include_usage=True),
            tracing_disabled=True,
        )
        result = sdk.Runner.run_streamed(
            self._agent, message.get("input") or [], run_config=config, max_turns=MAX_TURNS
        )
        said = False
        try:
            async for event in result.stream_events():
                said = self._relay(event) or said
        finally:
            result.cancel()
        return None if said else result.final_output

    def _relay(self, event: Any) -> bool:
        """Tell the harness about one stream event; whether it ended a message."""
        if event.type == "raw_response_event":
            data = event.data
            kind = getattr(data, "type", None)
            if kind == "response.output_text.delta" and data.delta:
                self.emit({"type": "delta", "message": self._message, "text": data.delta})
            elif kind == "response.completed":
                self._used(data.response)
            return False
        if event.type != "run_item_stream_event":
            return False
        item = event.item
        if event.name == "message_output_created":
            text = self._sdk.ItemHelpers.text_message_output(item)
            self.emit({"type": "message", "message": self._message, "text": text})
            self._message += 1
            return True
        if event.name in ("tool_called", "handoff_requested"):
            raw = item.raw_item
            self.emit(
                {
                    "type": "call",
                    "call_id": _field(raw, "call_id"),
                    "name": _field(raw, "name"),
                    "arguments": _field(raw, "arguments") or "{}",
                }
            )
        elif event.name in ("tool_output", "handoff_occured"):
            output = getattr(item, "output", None)
            if output is None:  # a handoff's output is on its raw item only
                output = _field(item.raw_item, "output") or ""
            text = output if isinstance(output, str) else json.dumps(output, default=str)
            call_id = _field(item.raw_item, "call_id")
            self.emit({"type": "output", "call_id": call_id, "output": text})
        return False

    def _used(self, response: Any) -> None:
        """Tell the harness one model call's usage, if the model reported it."""
        usage = getattr(response, "usage", None)
        if usage is None:
            return
        details = getattr(usage, "input_tokens_details", None)
        model = getattr(response, "model", None)
        self.emit(
            {
                "type": "usage",
                "model": model if isinstance(model, str) else None,
                "input": usage.input_tokens,
                "cached": getattr(details, "cached_tokens", 0) or 0,
                "output": usage.output_tokens,
            }
        )

    # -- tools -----------------------------------------------------------------------------

    def _omnigent_tool(self, schema: dict[str, Any]) -> Any:
        name = str(schema.get("name"))

        async def invoke(ctx: Any, arguments: str) -> str:
            request = {"call_id": ctx.tool_call_id, "name": name, "arguments": arguments}
            answer = await self.ask({"type": "tool_request", **request})
            return str(answer.get("output", ""))

        return self._sdk.FunctionTool(
            name=name,
            description=str(schema.get("description", "")),
            params_json_schema=dict(schema.get("parameters") or {"type": "object"}),
            on_invoke_tool=invoke,
            strict_json_schema=False,
        )

    def guard(self, tools: list[Any]) -> list[Any]:
        """An agent's tools as the run may use them: function tools guarded, omnigent's
        added, local tools that bypass functions refused."""
        sdk = self._sdk
        hosted = (
            sdk.WebSearchTool,
            sdk.FileSearchTool,
            sdk.CodeInterpreterTool,
            sdk.ImageGenerationTool,
            sdk.HostedMCPTool,
            sdk.ToolSearchTool,
        )
        out: list[Any] = []
        for tool in tools:
            if isinstance(tool, sdk.FunctionTool):
                ours = any(tool is own for own in self._ours)
                out.append(tool if ours else self._guarded_tool(tool))
            elif isinstance(tool, hosted):
                out.append(tool)
            else:
                kind = type(tool).__name__
                raise sdk.UserError(
                    f"omnigent cannot see the calls of the {kind} {getattr(tool, 'name', '')!r}: "
                    "give the agent function tools instead"
                )
        names = {getattr(tool, "name", None) for tool in out}
        return out + [tool for tool in self._ours if tool.name not in names]

    def _guarded_tool(self, tool: Any) -> Any:
        kept = self._guarded.get(id(tool))
        if kept is not None and kept[0] is tool:
            return kept[1]
        original: Callable[[Any, str], Awaitable[Any]] = tool.on_invoke_tool

        async def invoke(ctx: Any, arguments: str) -> Any:
            call_id = getattr(ctx, "tool_call_id", "")
            needs = await _needs_approval(tool.needs_approval, ctx, arguments, call_id)
            request = {
                "call_id": call_id,
                "name": tool.name,
                "arguments": arguments,
                "needs_approval": needs,
            }
            verdict = await self.ask({"type": "check", **request})
            if verdict.get("allow") is not True:
                return f"Error: {verdict.get('reason') or 'denied by omnigent policies'}"
            return await original(ctx, arguments)

        guarded = dataclasses.replace(tool, on_invoke_tool=invoke, needs_approval=False)
        self._guarded[id(tool)] = (tool, guarded)
        return guarded


async def _needs_approval(rule: Any, ctx: Any, arguments: str, call_id: str) -> bool:
    """A function tool's ``needs_approval`` for one call (a bool, or a callable of the
    run context, the parsed arguments and the call id)."""
    if isinstance(rule, bool):
        return rule
    if not callable(rule):
        return False
    try:
        params = json.loads(arguments) if arguments else {}
    except ValueError:
        params = {}
    answer = rule(ctx, params, call_id)
    if inspect.isawaitable(answer):
        answer = await answer
    return bool(answer)


def _provider(sdk: Any) -> Any:
    client = sdk.AsyncOpenAI(
        base_url=os.environ.get("OMNIGENT_AGENTS_BASE_URL") or None,
        api_key=os.environ.get("OMNIGENT_AGENTS_API_KEY") or "omnigent-no-key",
    )
    use_responses = os.environ.get("OMNIGENT_AGENTS_API") == "responses"
    return sdk.OpenAIProvider(openai_client=client, use_responses=use_responses)


def _field(raw: Any, name: str) -> Any:
    return raw.get(name) if isinstance(raw, dict) else getattr(raw, name, None)


async def _main(out: BinaryIO) -> int:
    def fail(error: str) -> None:
        out.write(json.dumps({"type": "fatal", "error": error}).encode() + b"\n")
        out.flush()

    try:
        import agents as sdk
    except ImportError as exc:
        fail(f"the OpenAI Agents SDK is not installed: {exc}")
        return 1
    sdk.set_tracing_disabled(True)
    ref = os.environ.get("OMNIGENT_AGENTS_AGENT", "")
    try:
        agent = _load_agent(ref)
    except Exception as exc:
        fail(f"cannot load the agent {ref!r}: {type(exc).__name__}: {exc}")
        return 1
    if not isinstance(agent, sdk.Agent):
        fail(f"{ref!r} is a {type(agent).__name__}, not an agents.Agent")
        return 1
    child = Child(agent, out, sdk)
    original = sdk.Agent.get_all_tools

    async def all_tools(self: Any, run_context: Any) -> list[Any]:
        return child.guard(await original(self, run_context))

    sdk.Agent.get_all_tools = all_tools  # type: ignore[method-assign]
    lines = asyncio.StreamReader(limit=MAX_LINE)
    loop = asyncio.get_running_loop()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(lines), sys.stdin)
    child.emit({"type": "ready", "agent": str(agent.name)})
    await child.serve(lines)
    return 0


def main() -> int:
    # stdout is the wire: what the agent's code prints goes to stderr instead.
    wire = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return asyncio.run(_main(wire))


if __name__ == "__main__":
    sys.exit(main())
