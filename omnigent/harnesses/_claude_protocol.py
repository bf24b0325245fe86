"""The Claude Code side of the ``claude-code`` harness, without I/O.

Claude Code runs as one long-lived process per conversation in stream-json mode with
the SDK's control protocol on stdio (``docs/harnesses-native.md``)::

    claude --output-format stream-json --verbose --input-format stream-json
           --permission-prompt-tool stdio --include-partial-messages
           [--model M] [--append-system-prompt P] (--session-id UUID | --resume UUID)

This module builds that command line and environment, the messages omnigent sends
(``initialize`` with a ``PreToolUse`` hook callback for every tool, user messages,
``interrupt``, ``set_model``, control responses), and reads what Claude Code sends:

* :class:`StreamReader` turns stream lines into relay actions (:mod:`._native_relay`):
  text deltas of the top-level agent (sub-agents' lines, with a
  ``parent_tool_use_id``, are not relayed), ``tool_use`` blocks as calls, ``tool_result``
  blocks as their outputs, the ``result`` line as the end of the turn;
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

import attrs

from ..errors import ErrorDetail
from ..model import ElicitationParams, InputImage, InputText, MessageItem, OutputText
from ..spec import AgentSpec
from ._native import ModelEndpoint, native_spec_problems, positive_number
from ._native_input import split_data_url
from ._native_relay import Action, Call, CallOutput, EndMessage, Finished, Say, merge_text

__all__ = [
    "ASK_USER_QUESTION_PHASE",
    "HOOK_ID",
    "PERMISSION_PHASE",
    "ControlCancel",
    "ControlRequest",
    "ControlResponse",
    "SessionStarted",
    "StreamReader",
    "claude_argv",
    "claude_environment",
    "control_error",
    "control_request",
    "control_success",
    "hook_answer",
    "hook_event",
    "initialize_body",
    "permission_answer",
    "permission_params",
    "spec_problems",
    "user_message",
]

HARNESS = "claude-code"
HOOK_ID = "omnigent_pre_tool_use"
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
QUIET = {
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "DISABLE_TELEMETRY": "1",
    "DISABLE_AUTOUPDATER": "1",
    "DISABLE_ERROR_REPORTING": "1",
}


def spec_problems(spec: AgentSpec) -> list[ErrorDetail]:
    """The spec keys ``claude-code`` cannot honour (see :func:`native_spec_problems`)."""
    return native_spec_problems(spec, HARNESS, OPTIONS, ENV_PREFIXES)


# -- the process -----------------------------------------------------------------------


def claude_argv(
    binary: str,
    *,
    conversation: str,
    resume: bool,
    model: str | None,
    instructions: str,
) -> tuple[str, ...]:
    """The command line of one conversation's process.

    ``conversation`` is Claude Code's session id: chosen by omnigent for a new
    conversation (``--session-id``), or the one to continue (``--resume``).
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
    ]
    if model:
        argv += ["--model", model]
    if instructions:
        argv += ["--append-system-prompt", instructions]
    argv += ["--resume" if resume else "--session-id", conversation]
    return tuple(argv)


def claude_environment(
    base: Mapping[str, str],
    *,
    config_dir: Path,
    endpoint: ModelEndpoint,
    extra: Mapping[str, str],
) -> dict[str, str]:
    """The whole environment of the process: ``base``, Claude Code's private config
    directory, the model endpoint, the quiet switches, then the spec's ``extra``."""
    env = dict(base)
    env["CLAUDE_CONFIG_DIR"] = str(config_dir)
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
    blocks: list[dict[str, Any]] = []
    if preamble:
        blocks.append({"type": "text", "text": preamble})
    for message in messages:
        for block in message.content:
            if isinstance(block, InputText | OutputText):
                if block.text:
                    blocks.append({"type": "text", "text": block.text})
            elif isinstance(block, InputImage) and block.image_url:
                blocks.append(_image_block(block.image_url))
    if not blocks:
        blocks.append({"type": "text", "text": ""})
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


# -- what Claude Code sends --------------------------------------------------------------


@attrs.frozen
class ControlRequest:
    """Claude Code asks omnigent something (``hook_callback``, ``can_use_tool``, …)."""

    request_id: str
    subtype: str
    body: Mapping[str, Any] = attrs.field(hash=False)


@attrs.frozen
class ControlCancel:
    """Claude Code withdrew a request it sent (an interrupt came first)."""

    request_id: str


@attrs.frozen
class ControlResponse:
    """Claude Code's answer to one of omnigent's control requests."""

    request_id: str
    ok: bool
    body: Any = attrs.field(default=None, hash=False)


@attrs.frozen
class SessionStarted:
    """The turn's ``system``/``init`` line: Claude Code's session id."""

    session_id: str


Message = Action | ControlRequest | ControlCancel | ControlResponse | SessionStarted


class StreamReader:
    """Stream lines in, actions and control messages out; one per conversation turn.

    With ``--include-partial-messages`` text arrives twice: as ``stream_event`` deltas,
    then as a whole ``assistant`` line per content block. Deltas are relayed as they
    come; an ``assistant`` text block is relayed only if its text was not streamed.
    """

    def __init__(self) -> None:
        self._message_id = ""
        self._open_block: str | None = None
        self._streamed: dict[str, int] = {}  # message id -> text blocks streamed
        self._seen: dict[str, int] = {}  # message id -> text blocks in assistant lines

    def feed(self, lines: Sequence[Mapping[str, Any]]) -> list[Message]:
        """What a batch of lines means, adjacent text deltas merged."""
        out: list[Message] = []
        for line in lines:
            out.extend(self._read(line))
        actions: list[Any] = merge_text(out)  # type: ignore[arg-type]
        return actions

    def _read(self, line: Mapping[str, Any]) -> list[Any]:
        kind = line.get("type")
        if kind == "control_request":
            return _control_request(line)
        if kind == "control_cancel_request":
            request_id = line.get("request_id")
            return [ControlCancel(request_id)] if isinstance(request_id, str) else []
        if kind == "control_response":
            return _control_response(line)
        if kind == "result":
            self._open_block = None
            return [EndMessage(), Finished(_result_error(line))]
        if line.get("parent_tool_use_id") is not None:
            return []  # a sub-agent's work: its tool calls still reach the hook
        if kind == "system" and line.get("subtype") == "init":
            session_id = line.get("session_id")
            return [SessionStarted(session_id)] if isinstance(session_id, str) else []
        if kind == "stream_event":
            event = line.get("event")
            return self._stream_event(event) if isinstance(event, Mapping) else []
        message = line.get("message")
        if not isinstance(message, Mapping):
            return []
        if kind == "assistant":
            return self._assistant(message)
        if kind == "user":
            return _tool_results(message)
        return []

    def _stream_event(self, event: Mapping[str, Any]) -> list[Any]:
        kind = event.get("type")
        if kind == "message_start":
            message = event.get("message")
            if isinstance(message, Mapping) and isinstance(message.get("id"), str):
                self._message_id = message["id"]
            return []
        index = event.get("index")
        key = f"{self._message_id}:{index}"
        if kind == "content_block_start":
            block = event.get("content_block")
            if isinstance(block, Mapping) and block.get("type") == "text":
                self._open_block = key
                self._streamed[self._message_id] = self._streamed.get(self._message_id, 0) + 1
                text = block.get("text")
                return [Say(key, text)] if isinstance(text, str) and text else []
            return []
        if kind == "content_block_delta" and key == self._open_block:
            delta = event.get("delta")
            if isinstance(delta, Mapping) and delta.get("type") == "text_delta":
                text = delta.get("text")
                return [Say(key, text)] if isinstance(text, str) and text else []
            return []
        if kind == "content_block_stop" and key == self._open_block:
            self._open_block = None
            return [EndMessage()]
        return []

    def _assistant(self, message: Mapping[str, Any]) -> list[Any]:
        message_id = message.get("id")
        message_id = message_id if isinstance(message_id, str) else ""
        out: list[Any] = []
        content = message.get("content")
        for block in content if isinstance(content, list) else ():
            if not isinstance(block, Mapping):
                continue
            if block.get("type") == "text" and isinstance(block.get("text"), str):
                seen = self._seen.get(message_id, 0) + 1
                self._seen[message_id] = seen
                if seen > self._streamed.get(message_id, 0) and block["text"]:
                    out += [Say(f"{message_id}:whole{seen}", block["text"]), EndMessage()]
            elif block.get("type") == "tool_use" and isinstance(block.get("id"), str):
                arguments = json.dumps(block.get("input") or {})
                out.append(Call(block["id"], str(block.get("name") or "tool"), arguments))
        return out


def _control_request(line: Mapping[str, Any]) -> list[Any]:
    request_id, request = line.get("request_id"), line.get("request")
    if not isinstance(request_id, str) or not isinstance(request, Mapping):
        return []
    return [ControlRequest(request_id, str(request.get("subtype")), request)]


def _control_response(line: Mapping[str, Any]) -> list[Any]:
    response = line.get("response")
    if not isinstance(response, Mapping) or not isinstance(response.get("request_id"), str):
        return []
    ok = response.get("subtype") == "success"
    body = response.get("response") if ok else response.get("error")
    return [ControlResponse(response["request_id"], ok, body)]


def _tool_results(message: Mapping[str, Any]) -> list[Any]:
    content = message.get("content")
    out: list[Any] = []
    for block in content if isinstance(content, list) else ():
        if not isinstance(block, Mapping) or block.get("type") != "tool_result":
            continue
        call_id = block.get("tool_use_id")
        if not isinstance(call_id, str):
            continue
        text = _result_text(block.get("content"))
        if block.get("is_error") and not text.startswith("Error:"):
            text = f"Error: {text}"
        out.append(CallOutput(call_id, text))
    return out


def _result_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [
            str(b.get("text"))
            for b in content
            if isinstance(b, Mapping) and b.get("type") == "text" and b.get("text") is not None
        ]
        return "\n".join(parts)
    return "" if content is None else json.dumps(content)


def _result_error(line: Mapping[str, Any]) -> str | None:
    """``None`` for a successful ``result``, else what went wrong."""
    if line.get("subtype") == "success" and not line.get("is_error"):
        return None
    errors = line.get("errors")
    if isinstance(errors, list) and errors:
        return "Claude Code: " + "; ".join(str(e) for e in errors)
    result = line.get("result")
    if isinstance(result, str) and result:
        return f"Claude Code: {result}"
    return f"Claude Code ended the turn with {line.get('subtype') or 'an error'}"


# -- approvals ---------------------------------------------------------------------------


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
    from ..core import elicitation_params  # the core's mode rules; imported late (cycle)

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
