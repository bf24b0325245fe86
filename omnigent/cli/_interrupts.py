"""Ctrl-C and SIGTERM during ``omnigent run``'s turn, and what the command prints last.

A local ``run`` (:mod:`._turn`) and ``run --server`` (:mod:`._remote_turn`) take the
signals alike: the first interrupts the turn — through the runtime here, or on the
server — so that it ends ``cancelled`` like any interrupted turn, and a second stops
waiting for that. Only how a turn is interrupted differs, and that is given in.
"""

from __future__ import annotations

import signal
from collections.abc import Awaitable, Callable

import trio

from ._output import Chunk, write
from ._render import TurnRenderer, session_note

__all__ = ["finish_command", "interrupt_on_signals", "watched_signals"]


def watched_signals(sigint: bool, sigterm: bool) -> tuple[signal.Signals, ...]:
    """The signals to take as an interrupt: SIGINT and/or SIGTERM."""
    return (*([signal.SIGINT] if sigint else []), *([signal.SIGTERM] if sigterm else []))


async def interrupt_on_signals(
    interrupt: Callable[[], Awaitable[object]],
    give_up: trio.CancelScope,
    watched: tuple[signal.Signals, ...],
    renderer: TurnRenderer,
    *,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """While running, a signal of ``watched`` calls ``interrupt``; a second cancels
    ``give_up``.

    Taking the signal as a message, instead of letting trio raise ``KeyboardInterrupt``
    at an arbitrary point (or dying at once, for SIGTERM), lets the turn end through
    the runtime like any interrupt: its ``response.cancelled`` is published, persisted
    and rendered. With nothing in ``watched`` it only reports started.

    Cancellation: stops listening, and cancels an ``interrupt`` still running.
    """
    if not watched:
        task_status.started()
        return
    # The interrupt runs beside the receiver: a stop waits for the session's work to
    # end, and a second signal must be heard meanwhile.
    async with trio.open_nursery() as interrupting:
        with trio.open_signal_receiver(*watched) as signals:
            task_status.started()
            interrupted = False
            async for signum in signals:
                if signum == signal.SIGTERM:
                    renderer.note_terminated()
                if interrupted:
                    give_up.cancel()
                    return
                interrupted = True
                interrupting.start_soon(interrupt)


def finish_command(
    renderer: TurnRenderer, give_up: trio.CancelScope, session_id: str | None
) -> int:
    """Write the end of the turn's rendering (that the command stopped waiting, if a
    second signal cancelled ``give_up``) and the session's id, when it has one; the
    command's exit code (see :class:`~._render.TurnRenderer`)."""
    if give_up.cancelled_caught:
        renderer.note_interrupted()
    write(renderer.finish())
    if session_id is not None:
        write([Chunk("stderr", session_note(session_id))])
    return renderer.exit_code
