"""One ``session/prompt``'s turn: followed to its end, and interrupted if the prompt is not.

:class:`~._agent.AcpAgent` answers ``session/prompt`` with the ``stopReason`` of the turn
it starts, so :func:`run_prompt` follows the turn
(:meth:`~omnigent.Runtime.open_turn_stream`) to its terminal event. The prompt can end
first — the client cancels the request, or the connection goes away and its nursery
with it — and a turn nobody follows must not run on: the turn is then interrupted,
shielded and bounded, so it ends ``cancelled``.

An untitled session is named after its first prompt (:func:`name_session`), and the
client hears of it as a ``session_info_update``.
"""

from __future__ import annotations

import contextlib
from typing import Any

import trio

from ...core import Runtime
from ...errors import OmnigentError
from ...model import Event
from ...rpc import ConnectionClosed, RpcConnection
from ._content import prompt_title
from ._outcomes import is_terminal, iso

__all__ = ["name_session", "run_prompt"]

# How long a cancelled prompt waits for its turn's interrupt to be taken.
_INTERRUPT_TIMEOUT = 5.0


async def run_prompt(
    runtime: Runtime, session_id: str, content: list[dict[str, Any]], *, viewer: str | None
) -> Event | None:
    """Send the prompt and follow its turn to the end; the turn's terminal event.

    Args:
        runtime: the open runtime.
        session_id: the session prompted.
        content: the prompt's content blocks (:func:`~._content.prompt_content`).
        viewer: whose access limits what the turn shows (None: nobody's).

    Raises:
        OmnigentError: the runtime refused the prompt
            (:meth:`~omnigent.Runtime.open_turn_stream`).

    Cancellation: the connection went away (or the client cancelled the request):
    the turn is interrupted, so it ends ``cancelled`` rather than running on.
    """
    terminal: Event | None = None
    try:
        turn = runtime.open_turn_stream(session_id, content, viewer=viewer)
        async with turn as (_accepted, events):
            async for event in events:
                terminal = event
    except trio.Cancelled:
        if not is_terminal(terminal):
            with (
                trio.move_on_after(_INTERRUPT_TIMEOUT, shield=True),
                contextlib.suppress(OmnigentError),
            ):
                await runtime.interrupt(session_id)
        raise
    return terminal


async def name_session(
    runtime: Runtime, connection: RpcConnection, session_id: str, content: list[dict[str, Any]]
) -> None:
    """Title an untitled session after its first prompt, and tell the client."""
    title = prompt_title(content)
    if title is None:
        return
    snapshot = await runtime.update_session(session_id, title=title)
    update = {
        "sessionUpdate": "session_info_update",
        "title": title,
        "updatedAt": iso(snapshot.updated_at or snapshot.created_at),
    }
    with contextlib.suppress(ConnectionClosed):
        await connection.notify("session/update", {"sessionId": session_id, "update": update})
