"""The harness's side of the ``openai-agents`` wire, without I/O.

The agent runs in a child process (:mod:`._child`, asyncio) that speaks JSON lines on
its stdio. This module builds what the harness sends — the turn (the conversation as
the SDK's input items, the model, omnigent's tools), the answers to the child's
requests — the child's environment, and reads what the child says into the relay's
actions (:mod:`.._native_relay`) and requests (:class:`ToolRequest`,
:class:`CheckRequest`).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from ...errors import ErrorDetail
from ...model import (
    FunctionCallItem,
    FunctionCallOutputItem,
    InputImage,
    InputText,
    Item,
    MessageItem,
    OutputText,
)
from ...spec import AgentSpec
from ..base import ToolSchema
from ..native import (
    Action,
    Call,
    CallOutput,
    EndMessage,
    Finished,
    ModelEndpoint,
    Say,
    native_spec_problems,
    positive_number,
    reported_usage,
)

__all__ = [
    "APIS",
    "CHILD",
    "CheckRequest",
    "ChildReader",
    "Fatal",
    "Ready",
    "ToolRequest",
    "agent_problems",
    "child_argv",
    "child_environment",
    "sdk_input",
    "spec_problems",
    "turn_message",
]

CHILD = Path(__file__).with_name("_child.py")
"""The child program, run as a file (``python -P``: its folder is not put on the path)."""

APIS = ("chat_completions", "responses")
"""How the child speaks to the model endpoint (``executor.config.options.api``)."""

_INTERRUPTED = "Error: the tool call was interrupted before it returned"
ENV_PREFIXES = ("HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "SSL_CERT_FILE", "OMNIGENT_AGENT_")


def _api(value: Any) -> str | None:
    return None if value in APIS else f"must be one of {', '.join(APIS)}"


OPTIONS = {"startup_timeout": positive_number, "api": _api}


def spec_problems(spec: AgentSpec, harness: str) -> list[ErrorDetail]:
    """The spec keys ``openai-agents`` cannot honour, and a missing
    ``executor.config.agent`` (its shape is the spec's rule; whether the operator
    allows it is the runtime's question: :func:`agent_problems`)."""
    problems = native_spec_problems(spec, harness, OPTIONS, ENV_PREFIXES, reads_agent=True)
    if spec.executor.config.agent is None:
        problems.append(
            ErrorDetail(
                "executor.config.agent",
                f"required by harness {harness!r}: the agent, as 'package.module:attr'",
            )
        )
    return problems


def agent_problems(spec: AgentSpec, allowed: Any, where: str = "") -> list[ErrorDetail]:
    """The agent references of ``spec`` (and its sub-agents) that ``allowed`` — the
    operator's allowlist, a callable of the reference — refuses. Imports nothing."""
    problems = []
    ref = spec.executor.config.agent
    if ref is not None and not allowed(ref):
        module = ref.partition(":")[0]
        problems.append(
            ErrorDetail(
                f"{where}executor.config.agent",
                f"{ref!r} is not an agent the operator allowed: only code the operator "
                f"trusts may run; list its module with 'serve --policy-module {module}' "
                "(or open_runtime(policy_modules=...))",
            )
        )
    for index, sub in enumerate(spec.sub_agents):
        problems += agent_problems(sub, allowed, f"{where}sub_agents[{index}].")
    return problems


# -- the process -----------------------------------------------------------------------


def child_argv() -> tuple[str, ...]:
    return (sys.executable, "-P", str(CHILD))


def child_environment(
    base: Mapping[str, str],
    *,
    agent: str,
    endpoint: ModelEndpoint,
    api: str,
    python_path: Sequence[str],
    extra: Mapping[str, str],
) -> dict[str, str]:
    """The whole environment of the child: ``base``, the runtime's import path (the
    agent's module imports there as it does here), the agent, the model endpoint,
    tracing off, then the spec's ``extra``."""
    env = dict(base)
    env.update(
        {
            "PYTHONPATH": os.pathsep.join(p for p in python_path if p),
            "OMNIGENT_AGENTS_AGENT": agent,
            "OMNIGENT_AGENTS_BASE_URL": endpoint.base_url or "",
            "OMNIGENT_AGENTS_API_KEY": endpoint.api_key or "",
            "OMNIGENT_AGENTS_API": api,
            "OPENAI_AGENTS_DISABLE_TRACING": "1",
        }
    )
    env.update(extra)
    return env


# -- what the harness sends ---------------------------------------------------------------


def sdk_input(instructions: str, items: Iterable[Item]) -> list[dict[str, Any]]:
    """The conversation as the SDK's input items (Responses-style, which it also
    sends as Chat Completions): the spec's prompt first as a system message, then
    every message and tool call. A call whose output was never recorded (its turn was
    interrupted) gets an explicit error output: model APIs refuse a call without one.
    """
    items = list(items)
    answered = {i.call_id for i in items if isinstance(i, FunctionCallOutputItem)}
    called = {i.call_id for i in items if isinstance(i, FunctionCallItem)}
    out: list[dict[str, Any]] = []
    if instructions:
        out.append({"role": "system", "content": instructions})
    for item in items:
        if isinstance(item, MessageItem):
            out.append({"role": item.role, "content": _content(item)})
        elif isinstance(item, FunctionCallItem):
            out.append(
                {
                    "type": "function_call",
                    "call_id": item.call_id,
                    "name": item.name,
                    "arguments": item.arguments,
                }
            )
            if item.call_id not in answered:
                out.append(_output(item.call_id, _INTERRUPTED))
        elif item.call_id in called:
            out.append(_output(item.call_id, item.output))
    return out


def _output(call_id: str, output: str) -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": call_id, "output": output}


def _content(message: MessageItem) -> str | list[dict[str, Any]]:
    texts = [b.text for b in message.content if isinstance(b, InputText | OutputText)]
    if message.role == "assistant" or len(texts) == len(message.content):
        return "".join(texts)
    parts: list[dict[str, Any]] = []
    for block in message.content:
        if isinstance(block, InputImage):
            parts.append({"type": "input_image", "image_url": block.image_url, "detail": "auto"})
        elif isinstance(block, InputText | OutputText):
            parts.append({"type": "input_text", "text": block.text})
    return parts


def turn_message(
    input: Sequence[dict[str, Any]], model: str | None, tools: Sequence[ToolSchema]
) -> dict[str, Any]:
    """The ``turn`` the child runs."""
    schemas = [
        {"name": t.name, "description": t.description, "parameters": dict(t.parameters)}
        for t in tools
    ]
    return {"type": "turn", "input": list(input), "model": model, "tools": schemas}


# -- what the child says ----------------------------------------------------------------------


@attrs.frozen
class Ready:
    """The child loaded the agent."""

    agent: str


@attrs.frozen
class Fatal:
    """The child could not start (its message says why); it exits."""

    error: str


@attrs.frozen
class ToolRequest:
    """Run omnigent's tool ``name`` for the agent; answer ``tool_result``."""

    request_id: str
    call_id: str
    name: str
    arguments: str


@attrs.frozen
class CheckRequest:
    """May the agent run its own tool ``name``? Answer ``verdict``."""

    request_id: str
    call_id: str
    name: str
    arguments: str
    needs_approval: bool


Message = Action | Ready | Fatal | ToolRequest | CheckRequest


class ChildReader:
    """Reads the child's lines into relay actions and requests."""

    def __init__(self) -> None:
        self._streamed: set[int] = set()

    def feed(self, lines: Iterable[Mapping[str, Any]]) -> list[Message]:
        out: list[Message] = []
        for line in lines:
            for message in self._read(line):
                last = out[-1] if out else None
                if isinstance(message, Say) and isinstance(last, Say) and last.key == message.key:
                    out[-1] = Say(message.key, last.text + message.text)
                else:
                    out.append(message)
        return out

    def _read(self, line: Mapping[str, Any]) -> list[Message]:
        kind = line.get("type")
        if kind == "delta":
            number, text = line.get("message"), line.get("text")
            if isinstance(number, int) and isinstance(text, str) and text:
                self._streamed.add(number)
                return [Say(_key(number), text)]
        elif kind == "message":
            number, text = line.get("message"), line.get("text")
            if not isinstance(number, int):
                return []
            out: list[Message] = []
            if number not in self._streamed and isinstance(text, str) and text:
                out.append(Say(_key(number), text))
            self._streamed.discard(number)
            return [*out, EndMessage()]
        elif kind == "call":
            return [Call(_str(line, "call_id"), _str(line, "name"), _str(line, "arguments"))]
        elif kind == "output":
            return [CallOutput(_str(line, "call_id"), _str(line, "output"))]
        elif kind == "tool_request":
            return [
                ToolRequest(
                    _str(line, "id"), _str(line, "call_id"), _str(line, "name"), _arguments(line)
                )
            ]
        elif kind == "check":
            needs = line.get("needs_approval") is True
            request = CheckRequest(
                _str(line, "id"), _str(line, "call_id"), _str(line, "name"), _arguments(line), needs
            )
            return [request]
        elif kind == "usage":
            return _used(line)
        elif kind == "done":
            output = line.get("output")
            if isinstance(output, str) and output:
                return [Say("agent_final", output), EndMessage(), Finished()]
            return [Finished()]
        elif kind == "failed":
            return [Finished(f"the agent failed: {_str(line, 'error')}")]
        elif kind == "interrupted":
            return [Finished("interrupted")]
        elif kind == "ready":
            return [Ready(_str(line, "agent"))]
        elif kind == "fatal":
            return [Fatal(_str(line, "error"))]
        return []


def _used(line: Mapping[str, Any]) -> list[Message]:
    """One model call's usage (the SDK's: ``input`` is the whole prompt, ``cached`` of
    it read from the cache); nothing if it reported none."""
    model = line.get("model")
    used = reported_usage(line, prompt=("input",), cached="cached", output="output", model=model)
    return [] if used is None else [used]


def _key(number: int) -> str:
    return f"agent_message_{number}"


def _str(line: Mapping[str, Any], key: str) -> str:
    value = line.get(key)
    return value if isinstance(value, str) else ""


def _arguments(line: Mapping[str, Any]) -> str:
    value = line.get("arguments")
    if isinstance(value, str):
        return value
    return json.dumps(value if isinstance(value, Mapping) else {})
