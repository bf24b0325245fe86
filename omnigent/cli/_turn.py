"""One turn of ``omnigent run``: stream it, answer its approvals, and take Ctrl-C.

:func:`run_turn` registers the spec, opens a session (or continues one) and streams one
turn to the terminal, with :class:`~omnigent.cli._prompt.Approvals` beside it answering
what the turn asks. When that turn leaves work behind — an orchestrator's children, a
background task, a wake-up turn to come — it follows the session until it is settled
(:meth:`~omnigent.Runtime.wait_settled`): each child's progress on a line of its own
(redrawn in place on a terminal), each wake-up turn streamed like the first, so the
last thing printed is the orchestrator's final answer; the exit code is its last turn's.

Ctrl-C is taken as a message rather than as ``KeyboardInterrupt`` at an arbitrary point,
so that an interrupted turn ends through the runtime like any other: recorded
``cancelled``, with everything else the session runs (its children too), its runtime
closed, its open prompt abandoned. SIGTERM (what ``kill``, a service manager or a
container runtime sends) is taken the same way, and the command then exits 143.
:func:`owns_sigint` and :func:`owns_sigterm` say whether those signals are ours to take
at all.
"""

from __future__ import annotations

import logging
import signal
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any, Protocol

import trio

from ..core import Runtime, SessionSnapshot, open_runtime
from ..errors import BadRequest
from ..spec import AgentSpec
from ._approval_render import ApprovalMode
from ._interrupts import finish_command, interrupt_on_signals, watched_signals
from ._output import one_line
from ._prompt import Approvals, Lines
from ._render import TurnRenderer

PolicyFunction = Callable[..., Any]

__all__ = [
    "AgentsSession",
    "answer",
    "check_agent",
    "open_session",
    "owns_sigint",
    "owns_sigterm",
    "run_turn",
    "stderr_is_terminal",
]

# The command line's logger: what -v shows is named as it was before this module
# was split out of omnigent.cli.
log = logging.getLogger("omnigent.cli")

_TITLE_LENGTH = 80


async def run_turn(
    spec: AgentSpec,
    prompt: str,
    *,
    db: str,
    model: str | None,
    approvals: ApprovalMode,
    watch_sigint: bool,
    open_lines: Callable[[], Lines],
    session_id: str | None = None,
    policy_functions: Mapping[str, PolicyFunction] | None = None,
    policy_modules: Sequence[str] = (),
    cwd: Path | None = None,
    watch_sigterm: bool = False,
    safe_defaults: bool = True,
) -> int:
    """Register ``spec``, open a session (or continue one) and stream one turn.

    Returns the exit code (see :class:`~omnigent.cli._render.TurnRenderer`).
    Elicitations the stream shows are answered as ``approvals`` says (see
    :class:`~omnigent.cli._prompt.Approvals`), reading the terminal's answers from
    ``open_lines()``, which is called at the first prompt. The session's id is written
    to stderr once the turn ends, however it ends.

    Args:
        session_id: continue this session (of the agent ``spec`` names) instead of
            opening a new one; it keeps the agent version it was created with.
        policy_functions, policy_modules: what the spec's ``function`` policies may
            name (see ``open_runtime``).
        cwd: where the OS tools act when the spec names no ``os_env.cwd`` (default:
            the current directory).
        safe_defaults: ask before a command or a write outside the working directory
            that no policy of the agent decides (see ``docs/policies.md``, "Safe
            defaults"); ``approvals`` then answers those questions like any other.
        watch_sigint, watch_sigterm: take these signals as an interrupt of the turn.

    Raises:
        SessionNotFound: ``session_id`` does not exist. BadRequest: it is a session of
            another agent.

    Cancellation: a first Ctrl-C (or SIGTERM, with ``watch_sigterm``) interrupts the
    turn, which ends ``cancelled`` and is recorded so; a second stops waiting for it.
    Either way the runtime closes, and an open prompt is abandoned.
    """
    renderer = TurnRenderer(live=stderr_is_terminal())
    used: str | None = None
    with trio.CancelScope() as give_up:
        async with open_runtime(
            db=db,
            default_cwd=cwd or Path.cwd(),
            policy_functions=policy_functions,
            policy_modules=policy_modules,
            safe_defaults=safe_defaults,
        ) as rt:
            agent = await rt.create_agent(spec)
            title = one_line(prompt, _TITLE_LENGTH) or None
            session = await open_session(rt, agent.id, spec.name, session_id, title, model)
            used = session.id
            answering = Approvals(rt, session.id, renderer, approvals, open_lines)
            async with trio.open_nursery() as nursery:
                interrupt = partial(_interrupt_turn, rt, session.id, renderer)
                watched = watched_signals(watch_sigint, watch_sigterm)
                await nursery.start(interrupt_on_signals, interrupt, give_up, watched, renderer)
                nursery.start_soon(answering.run)
                await answer(rt, session.id, prompt, answering)
                nursery.cancel_scope.cancel()
    return finish_command(renderer, give_up, used)


async def answer(rt: Runtime, session_id: str, prompt: str, answering: Approvals) -> None:
    """Send ``prompt``, feed the turn that answers it to ``answering`` (which renders it
    and answers its questions; its ``run`` must be running beside), then follow the
    session until it is settled (:func:`_until_settled`)."""
    last = 0
    async with rt.open_turn_stream(session_id, prompt) as (_, events):
        log.info("session %s: turn started", session_id)
        async for event in events:
            last = event.event_id
            answering.feed(event)
    await _until_settled(rt, session_id, last, answering)


async def _until_settled(rt: Runtime, session_id: str, after: int, answering: Approvals) -> None:
    """Follow the session from event ``after`` until it is settled, feeding each event to
    ``answering`` (which renders it and answers its questions).

    Events are read (and questions answered) all along: a child waiting for an approval
    settles only once it has one. Once :meth:`~omnigent.Runtime.wait_settled` returns
    nothing more happens on the session; the events up to its last one are read, and the
    follow ends.
    """
    seen = after
    end: int | None = None

    async def until_settled(reading: trio.CancelScope) -> None:
        nonlocal end
        await rt.wait_settled(session_id)
        end = await rt.last_event_id(session_id)
        if seen >= end:
            reading.cancel()

    async with rt.subscribe(session_id, after=after) as events, trio.open_nursery() as nursery:
        nursery.start_soon(until_settled, nursery.cancel_scope)
        async for event in events:
            seen = event.event_id
            answering.feed(event)
            if end is not None and seen >= end:
                break
        nursery.cancel_scope.cancel()


def stderr_is_terminal() -> bool:
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


async def open_session(
    rt: Runtime,
    agent_id: str,
    agent_name: str,
    session_id: str | None,
    title: str | None,
    model: str | None,
) -> SessionSnapshot:
    """A new session of the agent, or ``session_id`` (checked to be one of it)."""
    if session_id is None:
        return await rt.create_session(agent_id, title=title, model_override=model)
    session = await rt.get_session(session_id)
    check_agent(session, agent_id, agent_name)
    if model is not None:
        session = await rt.update_session(session_id, model_override=model)
    return session


class AgentsSession(Protocol):
    """A session, as the runtime and the client both describe it: whose it is."""

    @property
    def id(self) -> str: ...

    @property
    def agent_id(self) -> str: ...

    @property
    def agent_name(self) -> str: ...


def check_agent(session: AgentsSession, agent_id: str, agent_name: str) -> None:
    """Refuse to continue ``session`` with the spec of another agent than its own.

    Raises:
        BadRequest: ``session`` is a session of another agent than ``agent_id``.
    """
    if session.agent_id != agent_id:
        raise BadRequest(
            f"session {session.id} is a session of agent {session.agent_name!r}, "
            f"not of {agent_name!r}: run it with that agent's spec"
        )


async def _interrupt_turn(rt: Runtime, session_id: str, renderer: TurnRenderer) -> None:
    log.info("session %s: interrupting the turn", session_id)
    # The turn ends cancelled; so does everything else the session runs — an
    # orchestrator's children, its background tasks — for `run` ends with them. Before a
    # turn has taken the message there is nothing to interrupt: the stop drops the
    # message instead, and the turn stream ends on the session's status.
    turn_ran = await rt.interrupt(session_id)
    await rt.stop_session(session_id)
    if not turn_ran:
        renderer.note_stopped()


def owns_sigterm() -> bool:
    """Whether SIGTERM is ours to handle: it has its default action (and we are on the
    main thread, where signals arrive)."""
    on_main_thread = threading.current_thread() is threading.main_thread()
    return on_main_thread and signal.getsignal(signal.SIGTERM) is signal.SIG_DFL


def owns_sigint() -> bool:
    """Whether Ctrl-C is ours to handle: Python's default handler has it.

    Not off the main thread, where signals never arrive, nor when the process was
    started with SIGINT ignored or someone embedding us installed their own handler.
    Asked before ``trio.run``, which puts its own handler in place of the default.
    """
    on_main_thread = threading.current_thread() is threading.main_thread()
    return on_main_thread and signal.getsignal(signal.SIGINT) is signal.default_int_handler
