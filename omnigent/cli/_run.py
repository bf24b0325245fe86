"""``omnigent run PATH PROMPT``: one turn of an agent, in this process (or, with
``--server URL``, on a server, its work done here by a runner in this command).

The spec file is the operator's (:class:`~omnigent.cli._specs.OperatorSpec`); the turn
itself is :func:`~omnigent.cli._turn.run_turn`. ``PROMPT`` may be ``-``: the prompt is
then read from stdin (all of it), and approvals, having no stdin left, are declined as
at the end of input unless ``--yes`` or ``--no-input`` answers them.

A store an ``omnigent serve`` holds (its lock names the server's address, and the server
left this user a runner token beside it) is not refused: the turn runs on that server,
its work here, as with ``--server`` (:func:`server_for_turns`). A store any other
process holds is refused before anything starts, naming the holder (see
:mod:`omnigent.cli._records`).
"""

from __future__ import annotations

import argparse
import functools
import logging
import sys

import trio

from .._config import default_db_url
from ..errors import BadRequest
from ._holders import TurnServer, server_for_turns
from ._parser import add_db_option
from ._prompt import Lines, stdin_lines
from ._specs import OperatorSpec
from ._turn import owns_sigint, owns_sigterm, run_turn

__all__ = ["add_approval_options", "declare_run", "read_prompt"]

log = logging.getLogger("omnigent.cli")


def declare_run(run: argparse.ArgumentParser) -> None:
    run.add_argument("path", metavar="PATH", help="agent spec file (YAML, or JSON if *.json)")
    run.add_argument("prompt", metavar="PROMPT", help="the user message; - reads it from stdin")
    run.add_argument("--model", metavar="M", help="use model M for this session")
    add_approval_options(run)
    run.add_argument(
        "--session",
        metavar="ID",
        help="continue session ID (printed by an earlier run) instead of starting one",
    )
    run.add_argument(
        "--policy-module",
        dest="policy_modules",
        action="append",
        default=[],
        metavar="NAME",
        help="a module whose own callables function policies may name (repeatable; "
        "the spec's own function references are always allowed)",
    )
    add_db_option(run)
    run.add_argument(
        "--server",
        metavar="URL",
        default=None,
        help="run the session on this omnigent server, its work here: the spec is "
        "uploaded and a runner on the current directory serves it (docs/runners.md)",
    )
    run.add_argument(
        "--token",
        metavar="TOKEN",
        default=None,
        help="with --server: a runner token the server accepts (default: $OMNIGENT_RUNNER_TOKEN)",
    )
    run.set_defaults(handler=_cmd_run)


def add_approval_options(parser: argparse.ArgumentParser) -> None:
    """``--yes`` / ``--no-input``: how a turn's questions are answered (``run``, ``chat``)."""
    answers = parser.add_mutually_exclusive_group()
    answers.add_argument(
        "--yes",
        dest="approvals",
        action="store_const",
        const="yes",
        help="approve every tool call a policy asks about, without asking",
    )
    answers.add_argument(
        "--no-input",
        dest="approvals",
        action="store_const",
        const="no-input",
        help="decline every approval without asking (never reads stdin)",
    )
    parser.set_defaults(approvals="ask")


def read_prompt(prompt: str) -> str:
    """``prompt``, or for ``-`` everything on stdin (a final newline dropped).

    Raises:
        BadRequest: ``-`` and stdin is empty, or not text.
    """
    if prompt != "-":
        return prompt
    try:
        text = sys.stdin.read() if sys.stdin is not None else ""
    except (OSError, UnicodeDecodeError) as exc:
        raise BadRequest(f"cannot read the prompt from stdin: {exc}") from exc
    text = text.removesuffix("\n")
    if not text.strip():
        raise BadRequest("the prompt from stdin (-) is empty")
    return text


# The prompt's stdin is patched here by tests that answer approvals from a pipe.
_stdin_lines = stdin_lines


def _no_lines() -> Lines:
    return Lines(None)


def _cmd_run(args: argparse.Namespace) -> int:
    operator = OperatorSpec.read(args.path)
    server = server_for_turns(args, "omnigent run")
    if server is not None:
        return _cmd_run_on_server(args, operator, server)
    db = getattr(args, "db", None) or default_db_url()
    prompt = read_prompt(args.prompt)
    turn = functools.partial(
        run_turn,
        operator.spec,
        prompt,
        db=db,
        model=args.model,
        approvals=args.approvals,
        watch_sigint=owns_sigint(),
        watch_sigterm=owns_sigterm(),
        # The prompt took stdin: approvals meet the end of input.
        open_lines=_no_lines if args.prompt == "-" else _stdin_lines,
        session_id=args.session,
        **operator.runtime_options(policy_modules=tuple(args.policy_modules)),
    )
    # Ctrl-C outside the turn (while the runtime opens, say) then surfaces at a
    # checkpoint of the main task, where every cleanup below still runs.
    return trio.run(turn, restrict_keyboard_interrupt_to_checkpoints=True)


def _cmd_run_on_server(args: argparse.Namespace, operator: OperatorSpec, server: TurnServer) -> int:
    """``run`` on a server (``--server URL``, or the one holding the store): the spec
    uploaded to it, its work done here by a runner inside this command
    (``docs/runners.md``)."""
    from ._remote_turn import run_on_server

    prompt = read_prompt(args.prompt)
    turn = functools.partial(
        run_on_server,
        operator.spec,
        prompt,
        server=server.url,
        token=server.token,
        local=server.local,
        model=args.model,
        approvals=args.approvals,
        watch_sigint=owns_sigint(),
        watch_sigterm=owns_sigterm(),
        open_lines=_no_lines if args.prompt == "-" else _stdin_lines,
        session_id=args.session,
    )
    return trio.run(turn, restrict_keyboard_interrupt_to_checkpoints=True)
