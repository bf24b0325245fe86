"""The ``omnigent`` command line.

Every subcommand is a pair: ``_add_<name>_parser(subparsers)`` declares its arguments
and sets ``handler`` to a ``_cmd_<name>(args) -> int`` function; adding a subcommand is
writing that pair and listing the first in :data:`_SUBCOMMANDS`. Handlers raise
:class:`~omnigent.errors.OmnigentError` for what went wrong; :func:`main` turns it into
``Error: …`` on stderr and an exit code, so no handler prints its own errors.

Exit codes: 0 done; 1 the turn failed, or omnigent failed (a 5xx error); 2 the user asked
for something impossible (a 4xx error: a bad spec, a missing file, an unknown harness,
or a bad option); 130 interrupted.

The rest of the command line is in private modules, one job each:
:mod:`omnigent.cli._init` writes a first (sandboxed) agent spec;
:mod:`omnigent.cli._turn` runs the turn of ``run`` and takes Ctrl-C;
:mod:`omnigent.cli._prompt` answers its approvals on the terminal; what is printed is
decided, without I/O, in :mod:`omnigent.cli._render` (turns, listings, errors) and
:mod:`omnigent.cli._approval_render` (approval prompts and answers); and
:mod:`omnigent.cli._output` writes it.
"""

from __future__ import annotations

import argparse
import functools
import sys
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, TypeAlias, TypeVar

import trio

from .._config import default_db_url
from .._version import __version__
from ..core import PolicyFunction, Runtime, SessionSnapshot, open_runtime
from ..core import load_policy_function as load_function
from ..errors import BadRequest, OmnigentError
from ..model import Item
from ..observability import configure_logging, open_tracing
from ..spec import AgentSpec, agent_references
from ._init import add_init_parser
from ._mock_llm import add_mock_llm_parser
from ._output import Chunk, write

# Approvals and Lines are not used here: tests reach the prompt machinery through
# this module, and patch _stdin_lines here to answer a turn's prompts from a pipe.
from ._prompt import Approvals as _Approvals  # noqa: F401
from ._prompt import Lines as _Lines  # noqa: F401
from ._prompt import stdin_lines as _stdin_lines
from ._render import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_USAGE,
    format_agent,
    format_agents,
    format_error,
    format_session,
    format_sessions,
)
from ._turn import owns_sigint, owns_sigterm, run_turn

__all__ = ["build_parser", "default_db_url", "main"]

T = TypeVar("T")
Handler = Callable[[argparse.Namespace], int]
if TYPE_CHECKING:
    _Subparsers: TypeAlias = argparse._SubParsersAction[argparse.ArgumentParser]


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit code (``sys.exit(main())``).

    Args:
        argv: the arguments after the program name; ``None`` reads ``sys.argv``.
    """
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:  # --help, --version, or a usage error argparse printed
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    handler: Handler = args.handler
    verbosity = args.verbose - args.quiet
    with configure_logging(verbosity, args.log_format), open_tracing():
        try:
            return handler(args)
        except (KeyboardInterrupt, OmnigentError, BaseExceptionGroup) as exc:
            return _report(exc)


def _report(exc: BaseException) -> int:
    """The exit code for an error that reached :func:`main`, after telling the user.

    Raises:
        exc itself, if it is a bug rather than the user's or the world's doing: a
        traceback is then the most useful thing to show.
    """
    if isinstance(exc, BaseExceptionGroup):
        _, rest = exc.split(KeyboardInterrupt)
        if rest is None:
            exc = KeyboardInterrupt()
        elif len(leaves := list(_leaves(rest))) == 1 and isinstance(leaves[0], OmnigentError):
            exc = leaves[0]
    if isinstance(exc, KeyboardInterrupt):
        write([Chunk("stderr", "Interrupted.\n")])
        return EXIT_INTERRUPTED
    if not isinstance(exc, OmnigentError):
        raise exc
    for line in format_error(exc):
        print(line, file=sys.stderr)
    return EXIT_USAGE if exc.status < 500 else EXIT_FAILED


def _leaves(exc: BaseException) -> Iterator[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            yield from _leaves(inner)
    else:
        yield exc


# -- the parser -------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    """The ``omnigent`` argument parser, with every subcommand of :data:`_SUBCOMMANDS`."""
    parser = argparse.ArgumentParser(
        prog="omnigent", description="A Trio-native runtime for LLM agent sessions."
    )
    parser.add_argument("--version", action="version", version=f"omnigent {__version__}")
    parser.add_argument(
        "-v", "--verbose", action="count", default=0, help="log INFO (-vv: DEBUG) to stderr"
    )
    parser.add_argument(
        "-q", "--quiet", action="count", default=0, help="log errors only (default: warnings)"
    )
    parser.add_argument(
        "--log-format",
        choices=("text", "json"),
        default="text",
        help="log lines as text, or as one JSON object each (default: text)",
    )
    subparsers = parser.add_subparsers(title="commands", metavar="COMMAND", required=True)
    for add_parser in _SUBCOMMANDS:
        add_parser(subparsers)
    return parser


def _add_db_option(parser: argparse.ArgumentParser) -> None:
    # Resolved when the command runs, so OMNIGENT_DB / OMNIGENT_HOME are read late.
    parser.add_argument(
        "--db",
        metavar="URL",
        default=None,
        help="database URL (default: $OMNIGENT_DB, else sqlite:///$OMNIGENT_HOME/omnigent.db)",
    )


def _db_url(args: argparse.Namespace) -> str:
    db: str | None = args.db
    return db or default_db_url()


def _add_run_parser(subparsers: _Subparsers) -> None:
    run = subparsers.add_parser("run", help="run one turn of an agent and stream its answer")
    run.add_argument("path", metavar="PATH", help="agent spec file (YAML, or JSON if *.json)")
    run.add_argument("prompt", metavar="PROMPT", help="the user message")
    run.add_argument("--model", metavar="M", help="use model M for this session")
    answers = run.add_mutually_exclusive_group()
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
    run.set_defaults(approvals="ask")
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
    _add_db_option(run)
    run.set_defaults(handler=_cmd_run)


def _add_agents_parser(subparsers: _Subparsers) -> None:
    agents = subparsers.add_parser("agents", help="register and list agents")
    commands = agents.add_subparsers(metavar="COMMAND", required=True)
    add = commands.add_parser("add", help="register an agent (a new version if the name exists)")
    add.add_argument("path", metavar="PATH", help="agent spec file")
    _add_db_option(add)
    add.set_defaults(handler=_cmd_agents_add)
    listing = commands.add_parser("list", help="list agents (latest versions)")
    _add_db_option(listing)
    listing.set_defaults(handler=_cmd_agents_list)


def _add_sessions_parser(subparsers: _Subparsers) -> None:
    sessions = subparsers.add_parser("sessions", help="list and show sessions")
    commands = sessions.add_subparsers(metavar="COMMAND", required=True)
    listing = commands.add_parser("list", help="list sessions, newest first")
    listing.add_argument("--agent", metavar="NAME", help="only sessions of this agent")
    listing.add_argument("--limit", metavar="N", type=int, default=20, help="at most N (1-100)")
    _add_db_option(listing)
    listing.set_defaults(handler=_cmd_sessions_list)
    show = commands.add_parser("show", help="a session's status and items")
    show.add_argument("session_id", metavar="ID", help="the session id")
    _add_db_option(show)
    show.set_defaults(handler=_cmd_sessions_show)


def _add_serve_parser(subparsers: _Subparsers) -> None:
    from ..transports.http import add_serve_parser, run_serve

    add_serve_parser(subparsers).set_defaults(handler=run_serve)


def _add_stdio_parser(subparsers: _Subparsers) -> None:
    from ..transports.acp import add_stdio_parser, run_stdio

    add_stdio_parser(subparsers).set_defaults(handler=run_stdio)


_SUBCOMMANDS: tuple[Callable[[_Subparsers], None], ...] = (
    add_init_parser,
    _add_run_parser,
    _add_serve_parser,
    _add_stdio_parser,
    _add_agents_parser,
    _add_sessions_parser,
    add_mock_llm_parser,
)


# -- the handlers -----------------------------------------------------------------------


def _cmd_run(args: argparse.Namespace) -> int:
    spec = _load_spec(args.path)
    turn = functools.partial(
        run_turn,
        spec,
        args.prompt,
        db=_db_url(args),
        model=args.model,
        approvals=args.approvals,
        watch_sigint=owns_sigint(),
        watch_sigterm=owns_sigterm(),
        open_lines=_stdin_lines,
        session_id=args.session,
        policy_functions=_own_policy_functions(spec),
        policy_modules=[*args.policy_modules, *_own_agent_modules(spec)],
    )
    # Ctrl-C outside the turn (while the runtime opens, say) then surfaces at a
    # checkpoint of the main task, where every cleanup below still runs.
    return trio.run(turn, restrict_keyboard_interrupt_to_checkpoints=True)


def _cmd_agents_add(args: argparse.Namespace) -> int:
    spec = _load_spec(args.path)
    functions = _own_policy_functions(spec)
    agent = _with_runtime(
        _db_url(args),
        lambda rt: rt.create_agent(spec),
        policy_functions=functions,
        policy_modules=_own_agent_modules(spec),
    )
    print(format_agent(agent))
    return 0


def _cmd_agents_list(args: argparse.Namespace) -> int:
    agents = _with_runtime(_db_url(args), lambda rt: rt.list_agents())
    _print_lines(format_agents(agents))
    return 0


def _cmd_sessions_list(args: argparse.Namespace) -> int:
    page = _with_runtime(
        _db_url(args), lambda rt: rt.list_sessions(agent_name=args.agent, limit=args.limit)
    )
    _print_lines(format_sessions(page.data))
    if page.has_more:
        print(f"(more sessions: raise --limit above {args.limit})", file=sys.stderr)
    return 0


def _cmd_sessions_show(args: argparse.Namespace) -> int:
    async def show(rt: Runtime) -> tuple[SessionSnapshot, list[Item]]:
        session = await rt.get_session(args.session_id)
        items: list[Item] = []
        after: str | None = None
        while True:
            page = await rt.list_items(args.session_id, limit=1000, after=after)
            items.extend(page.data)
            if not page.has_more:
                return session, items
            after = page.last_id

    session, items = _with_runtime(_db_url(args), show)
    _print_lines(format_session(session, items))
    return 0


def _own_policy_functions(spec: AgentSpec) -> dict[str, PolicyFunction]:
    """The ``function`` policies a spec file names, imported: the person running the
    command line is the operator, and the file is theirs.

    Raises:
        InvalidInput: a reference cannot be imported (the command prints it).
    """
    refs = dict.fromkeys(p.function for p in spec.policies if p.function is not None)
    return {ref: load_function(ref) for ref in refs if ":" in ref or "." in ref}


def _own_agent_modules(spec: AgentSpec) -> list[str]:
    """The modules of the ``openai-agents`` agents a spec file names: the file is the
    operator's, so its agents are trusted (imported only in their harness's process)."""
    return [ref.partition(":")[0] for ref in agent_references(spec)]


def _load_spec(path: str) -> AgentSpec:
    """The spec in ``path``.

    Raises:
        BadRequest: the file cannot be read. SpecError: it is not a valid spec.
    """
    try:
        return AgentSpec.load(path)
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise BadRequest(f"cannot read agent spec {path!r}: {reason}") from exc
    except UnicodeDecodeError as exc:
        raise BadRequest(f"cannot read agent spec {path!r}: not UTF-8 text") from exc


def _with_runtime(
    db: str,
    action: Callable[[Runtime], Awaitable[T]],
    *,
    policy_functions: dict[str, PolicyFunction] | None = None,
    policy_modules: Sequence[str] = (),
) -> T:
    """Open a runtime on ``db``, await ``action(runtime)``, close it; its result."""

    async def run() -> T:
        # Records only, beside a server that may own the database.
        async with open_runtime(
            db=db,
            exclusive=False,
            policy_functions=policy_functions,
            policy_modules=policy_modules,
        ) as rt:
            return await action(rt)

    return trio.run(run, restrict_keyboard_interrupt_to_checkpoints=True)


# -- output and logging -----------------------------------------------------------------


def _print_lines(lines: Iterable[str]) -> None:
    for line in lines:
        print(line)
