"""One ``session/prompt``'s turn: followed to its end, and interrupted if the prompt is not.

:class:`~._agent.AcpAgent` answers ``session/prompt`` with the ``stopReason`` of the turn
it starts, so :func:`run_prompt` follows the turn
(:meth:`~omnigent.Runtime.open_turn_stream`) to its terminal event. The prompt can end
first — the client cancels the request, or the connection goes away and its nursery
with it — and a turn nobody follows must not run on: the turn is then interrupted,
shielded and bounded, so it ends ``cancelled``.

An untitled session is named after its first prompt (:func:`name_session`), and its
clients hear of it as a ``session_info_update``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import trio

from ...core import Runtime
from ...errors import OmnigentError
from ...model import Event, ResponseCreated
from ._content import prompt_title
from ._outcomes import is_terminal

__all__ = ["name_session", "run_prompt"]

# How long a cancelled prompt waits for its turn's interrupt to be taken.
_INTERRUPT_TIMEOUT = 5.0


async def run_prompt(
    runtime: Runtime,
    session_id: str,
    content: list[dict[str, Any]],
    *,
    viewer: str | None,
    admit: Callable[[], None],
    winding_down: trio.Event,
) -> Event | None:
    """Send the prompt and follow its turn to the end; the turn's terminal event.

    Args:
        runtime: the open runtime.
        session_id: the session prompted.
        content: the prompt's content blocks (:func:`~._content.prompt_content`).
        viewer: whose access limits what the turn shows (None: nobody's).
        admit: called once the message is accepted (the requests behind the prompt
            may start: its place in the session is taken).
        winding_down: set when the client will say nothing more; from then on the
            turn that answers the prompt is interrupted (so it ends ``cancelled``
            and the prompt is answered before the connection closes).

    Raises:
        OmnigentError: the runtime refused the prompt
            (:meth:`~omnigent.Runtime.open_turn_stream`).

    Cancellation: the connection went away (or the client cancelled the request):
    the turn is interrupted, so it ends ``cancelled`` rather than running on.
    """
    terminal: Event | None = None
    accepted = False
    try:
        # Only what the prompt needs (its updates are relayed by the session's relay).
        turn = runtime.open_turn_stream(
            session_id, content, viewer=viewer, types=("response.created",)
        )
        async with turn as (_accepted, events), trio.open_nursery() as nursery:
            accepted = True
            admit()
            nursery.start_soon(_interrupt_when_set, runtime, session_id, winding_down)
            next_event = events.__anext__
            while True:
                try:
                    # Wait for the first event of a batch; take the rest at hand.
                    event: Event | None = await next_event()
                    while event is not None:
                        terminal = event
                        if winding_down.is_set() and isinstance(event, ResponseCreated):
                            # A turn that starts after the wind-down (the one taking
                            # this message, behind another prompt's) is interrupted too.
                            await _interrupt(runtime, session_id)
                        event = await events.next_ready()
                except StopAsyncIteration:
                    break
            nursery.cancel_scope.cancel()
    finally:
        # Cancelled (it may come wrapped in a group from the nursery) or failed while
        # following an accepted message: nobody follows the turn, so it must not run on.
        if accepted and not is_terminal(terminal):
            with trio.move_on_after(_INTERRUPT_TIMEOUT, shield=True):
                await _interrupt(runtime, session_id)
    return terminal


async def _interrupt_when_set(runtime: Runtime, session_id: str, event: trio.Event) -> None:
    await event.wait()
    await _interrupt(runtime, session_id)


async def _interrupt(runtime: Runtime, session_id: str) -> None:
    with contextlib.suppress(OmnigentError):
        await runtime.interrupt(session_id)


async def name_session(runtime: Runtime, session_id: str, content: list[dict[str, Any]]) -> None:
    """Title an untitled session after its first prompt.

    Every client relaying the session hears of it as a ``session_info_update`` (the
    core publishes ``session.info.updated``).
    """
    title = prompt_title(content)
    if title is not None:
        await runtime.update_session(session_id, title=title)
