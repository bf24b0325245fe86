"""Routes for sessions: create, list, read, update, delete, fork, items, child sessions.

Every route checks the caller's level first (:func:`._access.session_access`): reading
needs read, changing needs edit, deleting needs manage; lists hold only what the
caller may read. A fork needs only read on its source: it is a new session, the
caller's own.
"""

from __future__ import annotations

from typing import Any

from quart import Blueprint

from ...model import ChildSessionSummary, structure
from ._access import EDIT, MANAGE, READ, session_access, viewer
from ._params import (
    json_body,
    owner,
    query_bool,
    query_choice,
    query_int,
    query_str,
    state,
    structured_body,
)

__all__ = ["blueprint"]

blueprint = Blueprint("omnigent_sessions", __name__)


@blueprint.post("/sessions")
async def create_session() -> tuple[dict[str, Any], int]:
    caller = owner()
    from ._bodies import CreateSessionBody  # the first request's: see _bodies

    body = await structured_body(CreateSessionBody)
    if body.parent_session_id is not None:
        # A child runs under the parent's root and shares its grants: making one is a
        # change to the parent.
        await session_access(body.parent_session_id, EDIT)
    snapshot = await state().runtime.create_session(
        body.agent_id,
        agent_name=body.agent_name,
        title=body.title,
        parent_session_id=body.parent_session_id,
        harness_override=body.harness_override,
        model_override=body.model_override,
        labels=body.labels,
        initial_items=body.initial_items,
        owner=caller,
        viewer=viewer(),
        runner_id=body.runner_id,
    )
    return snapshot.to_dict(), 201


@blueprint.get("/sessions")
async def list_sessions() -> dict[str, Any]:
    page = await state().runtime.list_sessions(
        agent_name=query_str("agent_name"),
        parent_session_id=query_str("parent_session_id"),
        limit=query_int("limit", low=1, high=100) or 20,
        after=query_str("after"),
        viewer=viewer(),
        top_level=query_bool("top_level"),
    )
    return page.to_dict()


@blueprint.get("/sessions/<session_id>")
async def get_session(session_id: str) -> dict[str, Any]:
    await session_access(session_id, READ)
    return (await state().runtime.get_session(session_id, viewer=viewer())).to_dict()


@blueprint.patch("/sessions/<session_id>")
async def update_session(session_id: str) -> dict[str, Any]:
    await session_access(session_id, EDIT)
    body = await json_body()
    from ._bodies import UpdateSessionBody  # the first request's: see _bodies

    structure(body, UpdateSessionBody)  # unknown keys and wrong types are 422
    # Only the keys sent change: absent leaves a field alone, null clears it.
    snapshot = await state().runtime.update_session(session_id, viewer=viewer(), **body)
    return snapshot.to_dict()


@blueprint.delete("/sessions/<session_id>")
async def delete_session(session_id: str) -> dict[str, Any]:
    from ._answers import SessionDeleted  # imported by the first answer: see _answers

    await session_access(session_id, MANAGE)
    await state().runtime.delete_session(session_id)
    return SessionDeleted(session_id).to_dict()


@blueprint.post("/sessions/<session_id>/fork")
async def fork_session(session_id: str) -> tuple[dict[str, Any], int]:
    await session_access(session_id, READ)
    from ._bodies import ForkSessionBody  # the first request's: see _bodies

    body = await structured_body(ForkSessionBody)
    snapshot = await state().runtime.fork_session(
        session_id,
        up_to_item_id=body.up_to_item_id,
        title=body.title,
        owner=owner(),
        viewer=viewer(),
    )
    return snapshot.to_dict(), 201


@blueprint.get("/sessions/<session_id>/items")
async def list_items(session_id: str) -> dict[str, Any]:
    await session_access(session_id, READ)
    page = await state().runtime.list_items(
        session_id,
        order=query_choice("order", ("asc", "desc"), "asc"),
        limit=query_int("limit", low=1, high=100),
        after=query_str("after"),
    )
    return page.to_dict()


@blueprint.get("/sessions/<session_id>/child_sessions")
async def child_sessions(session_id: str) -> dict[str, Any]:
    from ._answers import ChildSessionList  # imported by the first answer: see _answers

    runtime = state().runtime
    await session_access(session_id, READ)
    # Whoever reads a session reads the sessions below it; the list is filtered all the
    # same (the one rule: nothing about a session the caller may not read).
    who = viewer()
    children: list[ChildSessionSummary] = []
    after: str | None = None
    while True:
        page = await runtime.list_sessions(
            parent_session_id=session_id, limit=100, after=after, viewer=who
        )
        children.extend([await runtime.child_summary(s.id, viewer=who) for s in page.data])
        if not page.has_more or not page.data:
            break
        after = page.data[-1].id
    return ChildSessionList(tuple(children)).to_dict()
