"""Hooks for coding agents that run outside omnigent, and the policy entry point.

* ``POST /v1/sessions/{id}/hooks/permission-request`` — Claude Code's
  ``PermissionRequest`` hook (an HTTP hook, or a command hook that forwards its stdin).
* ``POST /v1/sessions/{id}/hooks/codex-elicitation-request`` — a Codex app-server
  JSON-RPC approval request, forwarded as it came.
* ``POST /v1/sessions/{id}/policies/evaluate`` — the session's policies (and the
  server's defaults) on one tool call or result, for an external harness.

Each one may park an elicitation on the session and then *holds the request open*
until a person answers (through the resolve route, the approval page, an ``approval``
event, or an ACP client). Nothing bounds that wait on the server side: Quart's
``RESPONSE_TIMEOUT`` only bounds *sending* a response once the handler has returned,
``BODY_TIMEOUT`` only bounds reading the (small) body, and Hypercorn's keep-alive
timer is stopped while a request is in flight. The caller's own timeout is the limit.

Cancellation: when the caller goes away, Quart-Trio cancels the handler and the core
withdraws the elicitation (marked ``expired``; ``response.elicitation_resolved`` with
action ``expired`` is published on the owner and its ancestors). When the server
shuts down (the app's ``stopping`` event), a waiting hook answers ``503
runtime_closed`` at once instead of being cut after Hypercorn's graceful timeout; its
elicitation is withdrawn the same way.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

import trio
from quart import Blueprint

from ..core import Resolution, elicitation_params, parse_policy_event
from ..errors import ErrorDetail, InvalidInput, OmnigentError, RuntimeClosed
from ..model import ElicitationParams
from ._access import EDIT, session_access
from ._params import json_body, state

__all__ = [
    "CODEX_COMMAND_PHASE",
    "CODEX_FILE_CHANGE_PHASE",
    "PERMISSION_REQUEST_PHASE",
    "blueprint",
    "claude_decision",
    "codex_params",
    "permission_params",
]

T = TypeVar("T")

blueprint = Blueprint("omnigent_hooks", __name__)

PERMISSION_REQUEST_PHASE = "permission_request"
CODEX_COMMAND_PHASE = "codex_command_approval"
CODEX_FILE_CHANGE_PHASE = "codex_file_change_approval"
_CODEX_PHASES = {
    "item/commandExecution/requestApproval": CODEX_COMMAND_PHASE,
    "item/fileChange/requestApproval": CODEX_FILE_CHANGE_PHASE,
}
_JSONRPC_KEYS = frozenset({"jsonrpc", "id", "method", "params"})


# -- Claude Code ---------------------------------------------------------------------


@blueprint.post("/sessions/<session_id>/hooks/permission-request")
async def permission_request(session_id: str) -> dict[str, Any]:
    await session_access(session_id, EDIT)
    body = await json_body()
    params = permission_params(body)
    runtime = state().runtime
    answer = await _until_stopping(lambda: runtime.elicit(session_id, params))
    return claude_decision(answer, body["tool_name"], body["tool_input"])


def permission_params(body: Mapping[str, Any]) -> ElicitationParams:
    """Elicitation params for a ``PermissionRequest`` hook body.

    Claude Code adds keys over time (``session_id``, ``transcript_path``, ``cwd``,
    ``permission_suggestions``, …): unknown keys are accepted and ignored.

    Raises:
        InvalidInput: naming ``tool_name`` (not a string), ``tool_input`` (not an
            object), ``hook_event_name`` (present but not ``PermissionRequest``) or
            ``tool_input.questions`` (an ``AskUserQuestion`` without a list).
    """
    details: list[ErrorDetail] = []
    tool_name, tool_input = body.get("tool_name"), body.get("tool_input")
    if not isinstance(tool_name, str) or not tool_name:
        details.append(ErrorDetail("tool_name", "required non-empty string"))
    if not isinstance(tool_input, dict):
        details.append(ErrorDetail("tool_input", "required object"))
    event_name = body.get("hook_event_name", "PermissionRequest")
    if event_name != "PermissionRequest":
        details.append(ErrorDetail("hook_event_name", "must be 'PermissionRequest'"))
    question: dict[str, Any] | None = None
    if tool_name == "AskUserQuestion" and isinstance(tool_input, dict):
        questions = tool_input.get("questions")
        if not isinstance(questions, list):
            details.append(ErrorDetail("tool_input.questions", "required array"))
        question = {"questions": questions}
    if details:
        raise InvalidInput("invalid PermissionRequest hook body", details)
    assert isinstance(tool_name, str) and isinstance(tool_input, dict)
    message = (
        f"Claude Code asks: {_question_text(tool_input['questions'])}"
        if question is not None
        else f"Claude Code wants to use {tool_name}"
    )
    return elicitation_params(
        message,
        PERMISSION_REQUEST_PHASE,
        tool_name=tool_name,
        tool_input=tool_input,
        ask_user_question=question,
    )


def _question_text(questions: list[Any]) -> str:
    texts = [str(q.get("question", "")) for q in questions if isinstance(q, dict)]
    return " / ".join(t for t in texts if t) or "a question"


def claude_decision(
    answer: Resolution, tool_name: str, tool_input: dict[str, Any]
) -> dict[str, Any]:
    """The hook's answer: accept → ``allow``; decline / cancel → ``deny``.

    An accepted ``AskUserQuestion`` carries the person's answers (the resolution's
    ``content``, ``{}`` if none) in ``updatedInput.answers``.
    """
    decision: dict[str, Any]
    if answer.accepted:
        decision = {"behavior": "allow"}
        if tool_name == "AskUserQuestion":
            answers = answer.content if answer.content is not None else {}
            decision["updatedInput"] = {**tool_input, "answers": answers}
    else:
        verb = "declined" if answer.action == "decline" else "cancelled"
        decision = {"behavior": "deny", "message": f"The user {verb} this {tool_name} request."}
    return {"hookSpecificOutput": {"hookEventName": "PermissionRequest", "decision": decision}}


# -- Codex ---------------------------------------------------------------------------


@blueprint.post("/sessions/<session_id>/hooks/codex-elicitation-request")
async def codex_elicitation_request(session_id: str) -> dict[str, Any]:
    await session_access(session_id, EDIT)
    params = codex_params(await json_body())
    runtime = state().runtime
    answer = await _until_stopping(lambda: runtime.elicit(session_id, params))
    return {"decision": "accept" if answer.accepted else "decline"}


def codex_params(body: Mapping[str, Any]) -> ElicitationParams:
    """Elicitation params for a Codex app-server JSON-RPC request ``{id, method, params}``.

    Command approvals get phase ``codex_command_approval`` and ``tool_input = {command,
    cwd, reason}`` with a list command joined by spaces; file-change approvals get
    ``codex_file_change_approval``; any other method ``codex_<method, / → _>``.

    Raises:
        InvalidInput: naming an unknown key, a missing or wrong ``id`` / ``method``,
            ``params`` that is not an object, or ``jsonrpc`` other than ``"2.0"``.
    """
    details = [ErrorDetail(k, "unknown field") for k in body if k not in _JSONRPC_KEYS]
    request_id, method = body.get("id"), body.get("method")
    rpc_params = body.get("params", {})
    if isinstance(request_id, bool) or not isinstance(request_id, str | int):
        details.append(ErrorDetail("id", "required string or integer"))
    if not isinstance(method, str) or not method:
        details.append(ErrorDetail("method", "required non-empty string"))
    if not isinstance(rpc_params, dict):
        details.append(ErrorDetail("params", "must be an object"))
    if body.get("jsonrpc", "2.0") != "2.0":
        details.append(ErrorDetail("jsonrpc", "must be '2.0'"))
    if details:
        raise InvalidInput("invalid Codex JSON-RPC request", details)
    assert isinstance(method, str) and isinstance(rpc_params, dict)
    phase = _CODEX_PHASES.get(method, "codex_" + method.replace("/", "_"))
    reason = rpc_params.get("reason")
    suffix = f" ({reason})" if isinstance(reason, str) and reason else ""
    tool_input: dict[str, Any]
    command: str | None = None
    if phase == CODEX_COMMAND_PHASE:
        raw = rpc_params.get("command")
        command = " ".join(str(part) for part in raw) if isinstance(raw, list) else str(raw)
        tool_input = {"command": command, "cwd": rpc_params.get("cwd"), "reason": reason}
        message = f"Codex wants to run: {command}{suffix}"
    elif phase == CODEX_FILE_CHANGE_PHASE:
        tool_input = dict(rpc_params)
        message = f"Codex wants to change files{suffix}"
    else:
        tool_input = dict(rpc_params)
        message = f"Codex asks for approval: {method}{suffix}"
    return elicitation_params(message, phase, tool_input=tool_input, command=command)


# -- policies ------------------------------------------------------------------------


@blueprint.post("/sessions/<session_id>/policies/evaluate")
async def evaluate_policy(session_id: str) -> dict[str, Any]:
    await session_access(session_id, EDIT)
    body = await json_body()
    details = [ErrorDetail(k, "unknown field") for k in body if k != "event"]
    if "event" not in body:
        details.append(ErrorDetail("event", "required field missing"))
    if details:
        raise InvalidInput("invalid policy evaluation request", details)
    event = parse_policy_event(body["event"], root="event")
    runtime = state().runtime
    verdict = await _until_stopping(lambda: runtime.evaluate_policy(session_id, event))
    return verdict.wire()


# -- waiting -------------------------------------------------------------------------


async def _until_stopping(wait: Callable[[], Awaitable[T]]) -> T:
    """``await wait()``, unless the server starts stopping first (then RuntimeClosed).

    Deliberate errors come back as themselves (not wrapped in the nursery's group), so
    the error envelope sees them.

    Cancellation: cancelling this, or the server stopping, cancels ``wait()``.
    """
    stopping = state().stopping
    results: list[T] = []
    errors: list[OmnigentError] = []

    async def run(cancel_scope: trio.CancelScope) -> None:
        try:
            results.append(await wait())
        except OmnigentError as exc:
            errors.append(exc)
        cancel_scope.cancel()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(run, nursery.cancel_scope)
        await stopping.wait()
        nursery.cancel_scope.cancel()
    if errors:
        raise errors[0]
    if not results:
        raise RuntimeClosed("the server is shutting down")
    return results[0]
