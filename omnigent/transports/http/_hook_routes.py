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
from typing import TYPE_CHECKING, Any, TypeVar

import attrs
import trio
from quart import Blueprint

from ...core import Resolution, parse_policy_event
from ...errors import InvalidInput, OmnigentError, RuntimeClosed
from ...model import ElicitationParams, elicitation_params, structure
from ._access import EDIT, session_access
from ._params import json_body, state

if TYPE_CHECKING:
    from ._answers import ClaudeHookAnswer
    from ._bodies import PermissionRequestBody


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


# -- Claude Code ---------------------------------------------------------------------


@blueprint.post("/sessions/<session_id>/hooks/permission-request")
async def permission_request(session_id: str) -> dict[str, Any]:
    await session_access(session_id, EDIT)
    hook = permission_body(await json_body())
    params = permission_params(hook)
    runtime = state().runtime
    answer = await _until_stopping(lambda: runtime.elicit(session_id, params))
    return claude_decision(answer, hook.tool_name, hook.tool_input).to_dict()


def permission_body(body: Mapping[str, Any]) -> PermissionRequestBody:
    """The keys of a hook body omnigent reads, checked (unknown keys are ignored).

    Raises:
        InvalidInput: naming ``tool_name`` (not a non-empty string), ``tool_input``
            (not an object) or ``hook_event_name`` (present but not
            ``PermissionRequest``).
    """
    from ._bodies import PermissionRequestBody  # the first hook's: see _bodies

    known = {f.name: body[f.name] for f in attrs.fields(PermissionRequestBody) if f.name in body}
    hook = structure(known, PermissionRequestBody)
    if not hook.tool_name:
        raise InvalidInput.at("tool_name", "must not be empty")
    return hook


def permission_params(hook: PermissionRequestBody) -> ElicitationParams:
    """Elicitation params for a ``PermissionRequest`` hook.

    Raises:
        InvalidInput: naming ``tool_input.questions`` (an ``AskUserQuestion`` without a
            list).
    """
    tool_name, tool_input = hook.tool_name, hook.tool_input
    question: dict[str, Any] | None = None
    if tool_name == "AskUserQuestion":
        questions = tool_input.get("questions")
        if not isinstance(questions, list):
            raise InvalidInput.at("tool_input.questions", "required array")
        question = {"questions": questions}
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
) -> ClaudeHookAnswer:
    """The hook's answer: accept → ``allow``; decline / cancel → ``deny``.

    An accepted ``AskUserQuestion`` carries the person's answers (the resolution's
    ``content``, ``{}`` if none) in ``updatedInput.answers``.
    """
    from ._answers import (  # imported by the first answer: see _answers
        ClaudeDecision,
        ClaudeHookAnswer,
        ClaudeHookOutput,
    )

    if answer.accepted:
        updated = None
        if tool_name == "AskUserQuestion":
            answers = answer.content if answer.content is not None else {}
            updated = {**tool_input, "answers": answers}
        decision = ClaudeDecision("allow", updatedInput=updated)
    else:
        verb = "declined" if answer.action == "decline" else "cancelled"
        decision = ClaudeDecision("deny", message=f"The user {verb} this {tool_name} request.")
    return ClaudeHookAnswer(ClaudeHookOutput("PermissionRequest", decision))


# -- Codex ---------------------------------------------------------------------------


@blueprint.post("/sessions/<session_id>/hooks/codex-elicitation-request")
async def codex_elicitation_request(session_id: str) -> dict[str, Any]:
    from ._answers import CodexDecision  # imported by the first answer: see _answers

    await session_access(session_id, EDIT)
    params = codex_params(await json_body())
    runtime = state().runtime
    answer = await _until_stopping(lambda: runtime.elicit(session_id, params))
    return CodexDecision("accept" if answer.accepted else "decline").to_dict()


def codex_params(body: Mapping[str, Any]) -> ElicitationParams:
    """Elicitation params for a Codex app-server JSON-RPC request ``{id, method, params}``.

    Command approvals get phase ``codex_command_approval`` and ``tool_input = {command,
    cwd, reason}`` with a list command joined by spaces; file-change approvals get
    ``codex_file_change_approval``; any other method ``codex_<method, / → _>``.

    Raises:
        InvalidInput: naming an unknown key, a missing or wrong ``id`` / ``method``,
            ``params`` that is not an object, or ``jsonrpc`` other than ``"2.0"``.
    """
    from ._bodies import CodexRequestBody  # the first hook's: see _bodies

    request = structure(body, CodexRequestBody)
    if not request.method:
        raise InvalidInput.at("method", "must not be empty")
    method, rpc_params = request.method, request.params
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
    from ._answers import PolicyVerdict  # imported by the first answer: see _answers
    from ._bodies import PolicyEvaluationBody

    await session_access(session_id, EDIT)
    body = await json_body()
    evaluation = structure(body, PolicyEvaluationBody)  # unknown keys; event an object
    event = parse_policy_event(evaluation.event, root="event")
    runtime = state().runtime
    verdict = await _until_stopping(lambda: runtime.evaluate_policy(session_id, event))
    wire = verdict.wire()
    return PolicyVerdict(wire["result"], wire.get("reason"), wire.get("data")).to_dict()


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
