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
"""

from __future__ import annotations

import argparse
import signal
from pathlib import Path

import trio

from ..core import Runtime, open_runtime
from ._output import Chunk, write
from ._parser import add_db_option
from ._prompt import Approvals, Lines, stdin_lines
from ._render import ApprovalMode, TurnRenderer, session_note
from ._report import EXIT_OK
from ._run import add_approval_options, store_for_turns
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
    chat.set_defaults(handler=_cmd_chat)


# Tests answer from a pipe by patching this.
_stdin_lines = stdin_lines


def _cmd_chat(args: argparse.Namespace) -> int:
    operator = OperatorSpec.read(args.path)
    db = store_for_turns(args, "omnigent chat")
    loop = _Chat(operator, db, args.model, args.session, args.approvals, _stdin_lines())
    return trio.run(loop.run, restrict_keyboard_interrupt_to_checkpoints=True)


class _Chat:
    """The loop: prompt, turn, prompt; Ctrl-C aimed at whichever is open."""

    def __init__(
        self,
        operator: OperatorSpec,
        db: str,
        model: str | None,
        session_id: str | None,
        approvals: ApprovalMode,
        lines: Lines,
    ) -> None:
        self._operator = operator
        self._db = db
        self._model = model
        self._session_id = session_id
        self._approvals = approvals
        self._lines = lines
        self._live = stderr_is_terminal()
        # What Ctrl-C reaches: the prompt's read, or the running turn.
        self._prompting: trio.CancelScope | None = None
        self._turn: tuple[Runtime, str] | None = None
        self._ending = trio.Event()

    async def run(self) -> int:
        # The safe defaults of `run`: a command, or a write outside the working
        # directory, that no policy decides is asked about (--yes answers it).
        async with open_runtime(
            db=self._db,
            default_cwd=Path.cwd(),
            safe_defaults=True,
            **self._operator.runtime_options(),
        ) as rt:
            spec = self._operator.spec
            agent = await rt.create_agent(spec)
            session = await open_session(
                rt, agent.id, spec.name, self._session_id, None, self._model
            )
            write([Chunk("stderr", f"{spec.name}, session {session.id} (Ctrl-D ends)\n")])
            async with trio.open_nursery() as nursery:
                await nursery.start(self._take_signals, nursery.cancel_scope)
                await self._converse(rt, session.id)
                nursery.cancel_scope.cancel()
        write([Chunk("stderr", session_note(session.id))])
        return EXIT_OK

    async def _converse(self, rt: Runtime, session_id: str) -> None:
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
            await self._one_turn(rt, session_id, line)

    async def _one_turn(self, rt: Runtime, session_id: str, line: str) -> None:
        renderer = TurnRenderer(live=self._live)
        answering = Approvals(rt, session_id, renderer, self._approvals, lambda: self._lines)
        self._turn = (rt, session_id)
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(answering.run)
                await answer(rt, session_id, line, answering)
                nursery.cancel_scope.cancel()
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
    async def _stop_turn(rt: Runtime, session_id: str) -> None:
        # As `run` does: the turn ends cancelled, with what else the session runs.
        await rt.interrupt(session_id)
        await rt.stop_session(session_id)
