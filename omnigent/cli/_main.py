"""The ``omnigent`` command line: :func:`main`.

:func:`main` parses the arguments (:mod:`omnigent.cli._parser` declares only the command
that runs, so ``--version`` and ``--help`` import no runtime), sets up logging on stderr,
and calls the command's ``handler(args) -> int``. Handlers raise
:class:`~omnigent.errors.OmnigentError` for what went wrong; :func:`main` turns it into
``Error: …`` on stderr and an exit code (:mod:`omnigent.cli._report`), so no handler
prints its own errors.

Exit codes: 0 done; 1 the turn failed, or omnigent failed (a 5xx error); 2 the user asked
for something impossible (a 4xx error: a bad spec, a missing file, an unknown harness,
or a bad option); 130 interrupted; 143 terminated.

The commands live in private modules, one area each: ``_run`` (``run``) and ``_chat``
(``chat``) over ``_turn`` (one turn in the terminal, Ctrl-C) and ``_prompt`` (approvals
on the TTY); ``_agents`` and ``_sessions`` over ``_records`` (a local store, or the
server that holds it); ``_approve``, ``_completion``, ``_servers`` (``serve``,
``stdio``), ``_mock_llm``. What is printed is decided without I/O in ``_render`` and
``_approval_render``, and written by ``_output``.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Sequence

from .._gc import full_passes_held
from ._parser import build_parser, log_format, selected_command, verbosity

__all__ = ["main"]

_EXIT_USAGE = 2


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code (``sys.exit(main())``).

    Args:
        argv: the arguments after the program name; ``None`` reads ``sys.argv``.
    """
    arguments = list(sys.argv[1:] if argv is None else argv)
    # A server's start: no full collection until it has settled (see omnigent._gc).
    serving = selected_command(arguments) == "serve"
    with full_passes_held() if serving else contextlib.nullcontext():
        return _run(arguments)


def _run(arguments: list[str]) -> int:
    try:
        args = build_parser(arguments).parse_args(arguments)
    except SystemExit as exc:  # --help, --version, or a usage error argparse printed
        return exc.code if isinstance(exc.code, int) else _EXIT_USAGE
    # Past the parser a command runs: only now is the exception tree (attrs) imported.
    from ..errors import OmnigentError
    from ..observability import configure_logging, open_tracing
    from ._report import report

    handler: Callable[..., int] = args.handler
    with configure_logging(verbosity(args), log_format(args)), open_tracing():
        try:
            code = handler(args)
            sys.stdout.flush()
        except (KeyboardInterrupt, OmnigentError, BaseExceptionGroup, BrokenPipeError) as exc:
            code = report(exc)
    return code
