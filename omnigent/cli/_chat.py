"""``omnigent chat PATH``: talk with an agent, turn after turn, in one session.

A loop on the terminal: ``you> `` on stderr, a line from stdin, the turn that answers
it streamed as ``run`` streams one (text on stdout, tool calls and questions on stderr;
an orchestrator followed until it is settled), then the next prompt. Each turn sees the
session's history; ``--session ID`` goes on with an earlier one, ``run``'s or ``chat``'s.

- **Ctrl-C during a turn** interrupts it (it ends ``cancelled``, with what else the
  session runs) and the loop goes on; **Ctrl-C at the prompt** drops the line typed so
  far. **Ctrl-D** (end of input) at the prompt ends the chat, exit 0; so does SIGTERM.
- Lines are read from stdin through one cancellable reader
  (:class:`~omnigent.cli._prompt.Lines`), which the approval prompts share: in a pipe,
  prompts and answers are simply the next lines. On a terminal, the line is edited as
  the terminal edits it (backspace, Ctrl-U, Ctrl-W).

The spec file is the operator's, as for ``run`` (:class:`~omnigent.cli._specs.OperatorSpec`).
Beside an ``omnigent serve`` holding the store (or with ``--server URL``) the turns run
on that server and their work here, as ``run``'s do (:mod:`._remote_turn`): the loop is
the same, only where a turn is taken and how it is stopped differ (:class:`_Turns`).
"""

from __future__ import annotations

import argparse
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

import trio

from .._config import default_db_url
from ..core import Runtime, open_runtime
from ._holders import TurnServer, server_for_turns
from ._output import Chunk, write
from ._parser import add_db_option
from ._prompt import Approvals, Lines, stdin_lines
from ._render import ApprovalMode, TurnRenderer, session_note
from ._report import EXIT_OK
from ._run import add_approval_options
from ._specs import OperatorSpec
from ._turn import answer, open_session, stderr_is_terminal

__all__ = ["declare_chat"]

PROMPT = "you> "


def declare_chat(chat: argparse.ArgumentParser) -> None:
    chat.add_argument("path", metavar="PATH", help="agent spec file (YAML, or JSON if *.json)")
    chat.add_argument("--model", metavar="M", help="use model M for this session")
    chat.add_argument("--session", metavar="ID", help="go on with session ID")
    add_approval_options(chat)
    add_db_option(chat)
    chat.add_argument(
        "--server",
        metavar="URL",
        default=None,
        help="talk on this omnigent server, the work here (default: the server holding "
        "the store, if one does)",
    )
    chat.add_argument(
        "--token",
        metavar="TOKEN",
        default=None,
        help="with --server: a runner token the server accepts (default: "
        "$OMNIGENT_RUNNER_TOKEN, else the store's own server's)",
    )
    chat.set_defaults(handler=_cmd_chat)


# Tests answer from a pipe by patching this.
_stdin_lines = stdin_lines


def _cmd_chat(args: argparse.Namespace) -> int:
    operator = OperatorSpec.read(args.path)
    server = server_for_turns(args, "omnigent chat")
    chat = _Chat(args.model, args.session, args.approvals, _stdin_lines())
    if server is not None:
        return trio.run(_on_server, chat, operator, server)
    db = getattr(args, "db", None) or default_db_url()
    return trio.run(_here, chat, operator, db, restrict_keyboard_interrupt_to_checkpoints=True)


class _Turns(Protocol):
    """Where the chat's turns run: this process's runtime, or a server."""

    async def take(
        self, session_id: str, line: str, renderer: TurnRenderer, lines: Callable[[], Lines]
    ) -> None:
        """Send ``line`` and render the turn that answers it (and what it leaves)."""
        ...

    async def stop(self, session_id: str) -> None:
        """Interrupt the running turn (Ctrl-C), as ``run`` does."""
        ...


class _LocalTurns:
    def __init__(self, rt: Runtime, approvals: ApprovalMode) -> None:
        self._rt = rt
        self._approvals = approvals

    async def take(
        self, session_id: str, line: str, renderer: TurnRenderer, lines: Callable[[], Lines]
    ) -> None:
        answering = Approvals(self._rt, session_id, renderer, self._approvals, lines)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(answering.run)
            await answer(self._rt, session_id, line, answering)
            nursery.cancel_scope.cancel()

    async def stop(self, session_id: str) -> None:
        # As `run` does: the turn ends cancelled, with what else the session runs.
        await self._rt.interrupt(session_id)
        await self._rt.stop_session(session_id)


async def _here(chat: _Chat, operator: OperatorSpec, db: str) -> int:
    # The safe defaults of `run`: a command, or a write outside the working
    # directory, that no policy decides is asked about (--yes answers it).
    async with open_runtime(
        db=db, default_cwd=Path.cwd(), safe_defaults=True, **operator.runtime_options()
    ) as rt:
        spec = operator.spec
        agent = await rt.create_agent(spec)
        session = await open_session(rt, agent.id, spec.name, chat.session_id, None, chat.model)
        await chat.run(_LocalTurns(rt, chat.approvals), spec.name, session.id)
    write([Chunk("stderr", session_note(session.id))])
    return EXIT_OK


async def _on_server(chat: _Chat, operator: OperatorSpec, server: TurnServer) -> int:
    from ._remote_turn import RemoteTurns, open_remote_session

    async with open_remote_session(
        operator.spec, server, chat.session_id, chat.model, Path.cwd()
    ) as (client, session_id):
        await chat.run(RemoteTurns(client, chat.approvals), operator.spec.name, session_id)
    write([Chunk("stderr", session_note(session_id))])
    return EXIT_OK


class _Chat:
    """The loop: prompt, turn, prompt; Ctrl-C aimed at whichever is open."""

    def __init__(
        self,
        model: str | None,
        session_id: str | None,
        approvals: ApprovalMode,
        lines: Lines,
    ) -> None:
        self.model = model
        self.session_id = session_id
        self.approvals: ApprovalMode = approvals
        self._lines = lines
        self._live = stderr_is_terminal()
        # What Ctrl-C reaches: the prompt's read, or the running turn.
        self._prompting: trio.CancelScope | None = None
        self._turn: tuple[_Turns, str] | None = None
        self._ending = trio.Event()

    async def run(self, turns: _Turns, name: str, session_id: str) -> None:
        """Converse in ``session_id`` until the end of input (or SIGTERM)."""
        write([Chunk("stderr", f"{name}, session {session_id} (Ctrl-D ends)\n")])
        async with trio.open_nursery() as nursery:
            await nursery.start(self._take_signals, nursery.cancel_scope)
            await self._converse(turns, session_id)
            nursery.cancel_scope.cancel()

    async def _converse(self, turns: _Turns, session_id: str) -> None:
        while not self._ending.is_set():
            write([Chunk("stderr", PROMPT)])
            with trio.CancelScope() as prompting:
                self._prompting = prompting
                line = await self._lines.readline()
            self._prompting = None
            if prompting.cancelled_caught:  # Ctrl-C: the line is dropped
                write([Chunk("stderr", "\n")])
                continue
            if line is None:  # Ctrl-D, or the end of a pipe
                write([Chunk("stderr", "\n")] if self._lines.is_terminal else [])
                return
            if not line.strip():
                continue
            if not self._lines.is_terminal:
                write([Chunk("stderr", line + "\n")])  # a transcript reads as typed
            await self._one_turn(turns, session_id, line)

    async def _one_turn(self, turns: _Turns, session_id: str, line: str) -> None:
        renderer = TurnRenderer(live=self._live)
        self._turn = (turns, session_id)
        try:
            await turns.take(session_id, line, renderer, lambda: self._lines)
        finally:
            self._turn = None
        write(renderer.finish())

    async def _take_signals(
        self,
        everything: trio.CancelScope,
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        async with trio.open_nursery() as interrupting:
            with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
                task_status.started()
                async for signum in signals:
                    if signum == signal.SIGTERM:
                        self._ending.set()
                        if self._turn is not None:
                            interrupting.start_soon(self._stop_turn, *self._turn)
                        if self._prompting is not None:
                            everything.cancel()
                    elif self._turn is not None:
                        interrupting.start_soon(self._stop_turn, *self._turn)
                    elif self._prompting is not None:
                        self._prompting.cancel()

    @staticmethod
    async def _stop_turn(turns: _Turns, session_id: str) -> None:
        await turns.stop(session_id)
