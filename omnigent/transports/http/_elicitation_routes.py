"""Elicitations over HTTP: resolve one (``POST …/resolve``) and look one up (``GET``).

Resolving is owner-scoped, as in the core: only the session that owns an elicitation
answers it; under any other session (an ancestor that sees it mirrored included) the
answer is ``{"resolved": false}`` and nothing is touched.

Looking one up is wider, because an ancestor's stream and snapshot show its
descendants' prompts: a pending elicitation is *visible* from its owner and from every
ancestor of the owner (the view carries ``target_session_id`` = the owner, the id to
resolve with). Resolved, expired, unknown and not-visible elicitations all look the
same — ``{"status": "resolved", "elicitation_id"}`` — so a lookup reveals nothing about
other sessions.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from quart import Blueprint

from ...core import ResolveResult
from ...model import ElicitationRequest
from ._access import EDIT, READ, session_access, viewer
from ._params import state, structured_body

if TYPE_CHECKING:
    from ._answers import PendingElicitation


__all__ = ["PREVIEW_CHARS", "blueprint", "content_preview", "visible_pending"]

blueprint = Blueprint("omnigent_elicitations", __name__)

PREVIEW_CHARS = 500


@blueprint.post("/sessions/<session_id>/elicitations/<elicitation_id>/resolve")
async def resolve(session_id: str, elicitation_id: str) -> tuple[dict[str, Any], int]:
    await session_access(session_id, EDIT)
    from ._bodies import ResolveBody  # the first request's: see _bodies

    body = await structured_body(ResolveBody)
    resolved = await state().runtime.resolve_elicitation(
        session_id, elicitation_id, body.action, body.content
    )
    return ResolveResult(resolved).to_dict(), 202


@blueprint.get("/sessions/<session_id>/elicitations/<elicitation_id>")
async def get_elicitation(session_id: str, elicitation_id: str) -> dict[str, Any]:
    from ._answers import ResolvedElicitation  # imported by the first answer: see _answers

    await session_access(session_id, READ)
    request = await visible_pending(session_id, elicitation_id)
    if request is None:
        return ResolvedElicitation("resolved", elicitation_id).to_dict()
    return pending_view(request).to_dict()


async def visible_pending(session_id: str, elicitation_id: str) -> ElicitationRequest | None:
    """The pending request as ``session_id`` sees it, if it owns it or is an ancestor.

    A request owned by a descendant comes back with ``params.target_session_id`` set to
    its owner, as the mirrored event and the snapshot show it — and only to a caller
    who may read that descendant (the core's viewer rule).
    """
    info = await state().runtime.get_elicitation(session_id, elicitation_id, viewer=viewer())
    return info.request if info.status == "pending" else None


def pending_view(request: ElicitationRequest) -> PendingElicitation:
    """The ``GET`` answer for a pending request (optional fields only when present)."""
    from ._answers import PendingElicitation  # imported by the first answer: see _answers

    params = request.params
    return PendingElicitation(
        "pending",
        request.elicitation_id,
        params.message,
        params.phase,
        params.policy_name,
        requested_schema=params.requestedSchema,
        content_preview=content_preview(request),
        target_session_id=params.target_session_id,
    )


def content_preview(request: ElicitationRequest) -> str | None:
    """A short text of what is being approved, at most :data:`PREVIEW_CHARS` long.

    The questions (one a line) for an ``AskUserQuestion``; else the tool input as
    compact JSON; ``None`` when there is neither.
    """
    params = request.params
    text: str | None = None
    if params.ask_user_question is not None:
        questions = params.ask_user_question.get("questions")
        if isinstance(questions, list):
            text = "\n".join(str(q.get("question", "")) for q in questions if isinstance(q, dict))
    if text is None and params.tool_input is not None:
        text = json.dumps(params.tool_input, ensure_ascii=False, default=str)
    if text is None:
        return None
    return text if len(text) <= PREVIEW_CHARS else text[: PREVIEW_CHARS - 1] + "…"
