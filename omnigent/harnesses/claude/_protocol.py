"""The Claude Code side of the ``claude-code`` harness, without I/O.

Claude Code runs as one long-lived process per conversation in stream-json mode with
the SDK's control protocol on stdio (``docs/harnesses-native.md``)::

    claude --output-format stream-json --verbose --input-format stream-json
           --permission-prompt-tool stdio --include-partial-messages
           [--model M] [--append-system-prompt P] (--session-id UUID | --resume UUID)

This module builds that command line and environment, the messages omnigent sends
(``initialize`` with a ``PreToolUse`` hook callback for every tool, user messages,
``interrupt``, ``set_model``, control responses), and maps what Claude Code asks
(reading its stream is :mod:`._stream`'s job):

* :func:`hook_event` / :func:`hook_answer` map a ``PreToolUse`` callback onto
  omnigent's policies (ALLOW / DENY decide, no opinion leaves it to Claude Code);
* :func:`permission_params` / :func:`permission_answer` map what Claude Code itself
  asks (``can_use_tool``) onto an elicitation — ``AskUserQuestion`` as an
  ``ask_user_question`` elicitation whose answers go back in ``updatedInput.answers``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ...errors import ErrorDetail
from ...model import ElicitationParams, MessageItem, elicitation_params
from ...spec import AgentSpec, PolicySpec
from ..bridge import SERVER_NAME, TOKEN_VARIABLE
from ..native import (
    ModelEndpoint,
    input_blocks,
    native_spec_problems,
    positive_number,
    split_data_url,
)

__all__ = [
    "ASK_USER_QUESTION_PHASE",
    "BRIDGED_PREFIX",
    "DEFAULT_BASE_URL",
    "HOOK_ID",
    "PERMISSION_PHASE",
    "always_denied",
    "bridged_hook",
    "bridged_name",
    "claude_argv",
    "claude_environment",
    "control_error",
    "control_request",
    "control_success",
    "hook_answer",
    "hook_event",
    "initialize_body",
    "mcp_config",
    "permission_answer",
    "permission_params",
    "spec_problems",
    "user_message",
]

HARNESS = "claude-code"
HOOK_ID = "omnigent_pre_tool_use"
BRIDGED_PREFIX = f"mcp__{SERVER_NAME}__"
BRIDGE_CALL_TIMEOUT_MS = 86_400_000
PERMISSION_PHASE = "permission_request"
ASK_USER_QUESTION_PHASE = "ask_user_question"

OPTIONS = {"startup_timeout": positive_number}
ENV_PREFIXES = (
    "ANTHROPIC_",
    "CLAUDE_CODE_",
    "DISABLE_",
    "BASH_DEFAULT_TIMEOUT_MS",
    "BASH_MAX_TIMEOUT_MS",
    "MAX_THINKING_TOKENS",
    "MCP_TIMEOUT",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
)

# Only the model endpoint: no telemetry, error reports, auto-updates or other
# "nonessential" traffic (checked with strace, docs/harnesses-native.md).
DEFAULT_BASE_URL = "https://api.anthropic.com"
"""Where Claude Code sends its requests when nothing names an endpoint."""

QUIET = {
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "DISABLE_TELEMETRY": "1",
    "DISABLE_AUTOUPDATER": "1",
    "DISABLE_ERROR_REPORTING": "1",
}


def spec_problems(spec: AgentSpec, harness: str = HARNESS) -> list[ErrorDetail]:
    """The spec keys ``claude-code`` cannot honour (see :func:`native_spec_problems`)."""
    return native_spec_problems(spec, harness, OPTIONS, ENV_PREFIXES)


# -- the process -----------------------------------------------------------------------


def claude_argv(
    binary: str,
    *,
    conversation: str,
    resume: bool,
    model: str | None,
    instructions: str,
    mcp_config: Mapping[str, Any] | None = None,
    disallowed: Sequence[str] = (),
) -> tuple[str, ...]:
    """The command line of one conversation's process.

    ``conversation`` is Claude Code's session id: chosen by omnigent for a new
    conversation (``--session-id``), or the one to continue (``--resume``).
    ``mcp_config`` is the MCP servers it gets (:func:`mcp_config`: omnigent's tools);
    none other is read (``--strict-mcp-config``: not a repository's ``.mcp.json``).
    ``disallowed`` are tools a ``deny_tools`` policy always refuses: Claude Code
    leaves them out of what it offers the model (``--disallowedTools``).
    """
    argv = [
        binary,
        "--output-format",
        "stream-json",
        "--verbose",
        "--input-format",
        "stream-json",
        "--permission-prompt-tool",
        "stdio",
        "--include-partial-messages",
        "--strict-mcp-config",
    ]
    if mcp_config:
        argv += ["--mcp-config", json.dumps(mcp_config, separators=(",", ":"))]
    if model:
        argv += ["--model", model]
    if instructions:
        argv += ["--append-system-prompt", instructions]
    if disallowed:
        argv += ["--disallowedTools", ",".join(disallowed)]
    argv += ["--resume" if resume else "--session-id", conversation]
    return tuple(argv)


def mcp_config(shim: Sequence[str]) -> dict[str, Any]:
    """The MCP servers a process is given: ``omnigent`` (the bridge's shim, whose tools
    Claude Code calls ``mcp__omnigent__<tool>``), always loaded — not deferred behind
    Claude Code's tool search — and with a day's timeout per call (a call may wait for
    a person's approval)."""
    server = {
        "type": "stdio",
        "command": shim[0],
        "args": list(shim[1:]),
        "alwaysLoad": True,
        "timeout": BRIDGE_CALL_TIMEOUT_MS,
    }
    return {"mcpServers": {SERVER_NAME: server}}


def bridged_name(name: str) -> bool:
    """Whether ``name`` is one of omnigent's tools, which the bridge runs and records."""
    return name.startswith(BRIDGED_PREFIX)


def always_denied(policies: Sequence[PolicySpec]) -> tuple[str, ...]:
    """The tool names ``deny_tools`` policies name exactly (no ``*``, ``?`` or ``[``):
    those Claude Code can leave out of its tool list. A pattern still refuses every
    call it matches, through the PreToolUse hook."""
    names = (
        pattern
        for spec in policies
        if spec.type == "deny_tools"
        for pattern in spec.tools
        if not any(ch in pattern for ch in "*?[")
    )
    return tuple(dict.fromkeys(names))


def claude_environment(
    base: Mapping[str, str],
    *,
    config_dir: Path,
    endpoint: ModelEndpoint,
    extra: Mapping[str, str],
    bridge_token: str | None = None,
) -> dict[str, str]:
    """The whole environment of the process: ``base``, Claude Code's private config
    directory, the model endpoint, the quiet switches, the tool bridge's token (which
    the shim it starts inherits), then the spec's ``extra``."""
    env = dict(base)
    env["CLAUDE_CONFIG_DIR"] = str(config_dir)
    if bridge_token is not None:
        env[TOKEN_VARIABLE] = bridge_token
    if endpoint.base_url:
        env["ANTHROPIC_BASE_URL"] = endpoint.base_url
    if endpoint.api_key:
        env["ANTHROPIC_API_KEY"] = endpoint.api_key
    env.update(QUIET)
    env.update(extra)
    return env


# -- what omnigent sends ---------------------------------------------------------------


def control_request(request_id: str, request: Mapping[str, Any]) -> dict[str, Any]:
    """A control request: ``initialize``, ``interrupt``, ``set_model``."""
    return {"type": "control_request", "request_id": request_id, "request": dict(request)}


def initialize_body() -> dict[str, Any]:
    """``initialize`` registering one ``PreToolUse`` callback for every tool (matcher
    ``None``), so omnigent's policies see each call — also those Claude Code would run
    without asking anyone."""
    return {
        "subtype": "initialize",
        "hooks": {"PreToolUse": [{"matcher": None, "hookCallbackIds": [HOOK_ID]}]},
    }


def control_success(request_id: str, response: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "type": "control_response",
        "response": {"subtype": "success", "request_id": request_id, "response": dict(response)},
    }


def control_error(request_id: str, message: str) -> dict[str, Any]:
    return {
        "type": "control_response",
        "response": {"subtype": "error", "request_id": request_id, "error": message},
    }


def user_message(messages: Sequence[MessageItem], preamble: str | None) -> dict[str, Any]:
    """One user turn: the messages' text and images as Messages-API content blocks."""
    blocks = input_blocks(messages, preamble, _image_block)
    return {
        "type": "user",
        "message": {"role": "user", "content": blocks},
        "parent_tool_use_id": None,
    }


def _image_block(url: str) -> dict[str, Any]:
    data = split_data_url(url)
    if data is None:
        return {"type": "image", "source": {"type": "url", "url": url}}
    media_type, payload = data
    source = {"type": "base64", "media_type": media_type, "data": payload}
    return {"type": "image", "source": source}


# -- approvals ---------------------------------------------------------------------------


def bridged_hook(body: Mapping[str, Any]) -> bool:
    """Whether a ``PreToolUse`` callback is about one of omnigent's tools: those are
    allowed here, and the session's policies decide as the bridge runs them."""
    hook = body.get("input")
    name = hook.get("tool_name") if isinstance(hook, Mapping) else None
    return isinstance(name, str) and bridged_name(name)


def hook_event(body: Mapping[str, Any]) -> dict[str, Any] | None:
    """The policy event of a ``PreToolUse`` hook callback (``None``: malformed)."""
    hook = body.get("input")
    if not isinstance(hook, Mapping):
        return None
    name, tool_input = hook.get("tool_name"), hook.get("tool_input")
    if not isinstance(name, str) or not name or not isinstance(tool_input, Mapping):
        return None
    context = {"harness": HARNESS, "tool_use_id": hook.get("tool_use_id"), "cwd": hook.get("cwd")}
    return {
        "type": "PHASE_TOOL_CALL",
        "data": {"tool_name": name, "tool_input": dict(tool_input)},
        "context": context,
    }


def hook_answer(verdict: Mapping[str, Any]) -> dict[str, Any]:
    """The hook's answer: ALLOW → ``allow``, DENY → ``deny`` (the reason is what the
    model is told), no opinion → nothing, so Claude Code applies its own rules and
    asks (``can_use_tool``) where it would."""
    result = verdict.get("result")
    reason = verdict.get("reason")
    if result == "POLICY_ACTION_ALLOW":
        decision, default = "allow", "allowed by omnigent's policies"
    elif result == "POLICY_ACTION_DENY":
        decision, default = "deny", "denied by omnigent's policies"
    else:
        return {}
    output = {
        "hookEventName": "PreToolUse",
        "permissionDecision": decision,
        "permissionDecisionReason": reason if isinstance(reason, str) and reason else default,
    }
    return {"hookSpecificOutput": output}


def permission_params(body: Mapping[str, Any]) -> ElicitationParams | None:
    """The elicitation for a ``can_use_tool`` request (``None``: malformed).

    ``AskUserQuestion`` becomes phase ``ask_user_question`` with
    ``params.ask_user_question = {questions}``; anything else phase
    ``permission_request`` with ``tool_name`` and ``tool_input``.
    """

    name, tool_input = body.get("tool_name"), body.get("input")
    if not isinstance(name, str) or not name or not isinstance(tool_input, Mapping):
        return None
    tool_input = dict(tool_input)
    if name == "AskUserQuestion":
        questions = tool_input.get("questions")
        if not isinstance(questions, list):
            return None
        texts = [str(q.get("question")) for q in questions if isinstance(q, Mapping)]
        message = "Claude Code asks: " + (" / ".join(t for t in texts if t) or "a question")
        return elicitation_params(
            message,
            ASK_USER_QUESTION_PHASE,
            tool_name=name,
            tool_input=tool_input,
            ask_user_question={"questions": questions},
        )
    shown = body.get("display_name") if isinstance(body.get("display_name"), str) else name
    description = body.get("description")
    message = f"Claude Code wants to use {shown}"
    if isinstance(description, str) and description:
        message += f": {description}"
    return elicitation_params(message, PERMISSION_PHASE, tool_name=name, tool_input=tool_input)


def permission_answer(action: str, content: Any, body: Mapping[str, Any]) -> dict[str, Any]:
    """The ``can_use_tool`` answer: accept → ``allow`` (an ``AskUserQuestion`` with
    the person's answers in ``updatedInput.answers``), decline / cancel → ``deny``."""
    name = str(body.get("tool_name"))
    tool_input = body.get("input")
    tool_input = dict(tool_input) if isinstance(tool_input, Mapping) else {}
    if action == "accept":
        if name == "AskUserQuestion":
            tool_input["answers"] = _answers(content)
        return {"behavior": "allow", "updatedInput": tool_input}
    verb = "declined" if action == "decline" else "cancelled"
    return {"behavior": "deny", "message": f"The user {verb} this {name} request."}


def _answers(content: Any) -> dict[str, str]:
    """Answers as Claude Code takes them: question text → label(s), ``", "``-joined."""
    if not isinstance(content, Mapping):
        return {}
    out: dict[str, str] = {}
    for question, answer in content.items():
        if isinstance(answer, list):
            out[str(question)] = ", ".join(str(a) for a in answer)
        elif answer is not None:
            out[str(question)] = str(answer)
    return out
