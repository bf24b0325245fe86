"""The command line's parser, built for the one command that runs.

Every command is a row of :data:`COMMANDS`: its name, its help line, and the function
that declares its arguments (``"module:function"`` in this package). The parser lists
every command, but only the one on the command line is declared in full — importing
its module — so ``omnigent --version`` and ``omnigent --help`` import no runtime at all
(``benchmarks/cli_startup.py``), and ``omnigent serve`` pays for the HTTP server only.
:func:`build_parser` with ``every=True`` declares them all (``omnigent completion``).

Global options — ``-v``/``--verbose``, ``-q``/``--quiet``, ``--log-format`` and ``--db
URL`` — may come before or after the command (``omnigent --db x.db agents list`` and
``omnigent agents list --db x.db``): each command's parser gets a copy that leaves the
value alone when it is not given, and ``-v``/``-q`` given in both places add up
(:func:`verbosity`).
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Literal, NamedTuple, TypeAlias

from .._version import __version__

if TYPE_CHECKING:
    _Subparsers: TypeAlias = argparse._SubParsersAction[argparse.ArgumentParser]

__all__ = [
    "COMMANDS",
    "Command",
    "add_db_option",
    "build_parser",
    "log_format",
    "selected_command",
    "verbosity",
]

DB_HELP = "database URL (default: $OMNIGENT_DB, else sqlite:///$OMNIGENT_HOME/omnigent.db)"
VERBOSE_HELP = "log INFO (-vv: DEBUG) to stderr"
QUIET_HELP = "log errors only (default: warnings)"
LOG_FORMAT_HELP = "log lines as text, or as one JSON object each (default: text)"
LOG_FORMATS = ("text", "json")
# Global options that take a value (the command is the first word after them).
_VALUED = frozenset({"--db", "--log-format"})


class Command(NamedTuple):
    """One command: ``declare`` adds its arguments and sets its ``handler``."""

    name: str
    help: str
    declare: str
    store: bool = True
    """Whether it works on a store (and so takes ``--db``)."""


COMMANDS: tuple[Command, ...] = (
    Command(
        "init", "write a first agent spec (a sandboxed one)", "_init:declare_init", store=False
    ),
    Command("run", "run one turn of an agent and print its answer", "_run:declare_run"),
    Command("chat", "talk with an agent, turn after turn", "_chat:declare_chat"),
    Command(
        "serve", "serve sessions over HTTP + SSE (and ACP on /v1/ws)", "_servers:declare_serve"
    ),
    Command(
        "stdio", "serve one agent over ACP on stdin/stdout (editors)", "_servers:declare_stdio"
    ),
    Command(
        "runner",
        "run sessions' work on this machine for a server (docs/runners.md)",
        "_servers:declare_runner",
        store=False,
    ),
    Command("agents", "register, list and show agents", "_agents:declare_agents"),
    Command("sessions", "list, show, follow and delete sessions", "_sessions:declare_sessions"),
    Command(
        "approve", "accept what a session is waiting for (on a server)", "_approve:declare_approve"
    ),
    Command("deny", "decline what a session is waiting for (on a server)", "_approve:declare_deny"),
    Command(
        "completion",
        "print a shell completion script (bash, zsh, fish)",
        "_completion:declare_completion",
        store=False,
    ),
    Command(
        "mock-llm",
        "a scripted OpenAI-compatible model server, for trying agents without a key",
        "_mock_llm:declare_mock_llm",
        store=False,
    ),
)


def build_parser(argv: Sequence[str] = (), *, every: bool = False) -> argparse.ArgumentParser:
    """The ``omnigent`` parser, with the command ``argv`` names declared in full.

    Args:
        argv: the arguments after the program name (to see which command runs).
        every: declare every command (for completion scripts and tests).
    """
    parser = argparse.ArgumentParser(
        prog="omnigent",
        description="A Trio-native runtime for LLM agent sessions.",
        allow_abbrev=False,
    )
    parser.add_argument("--version", action="version", version=f"omnigent {__version__}")
    parser.add_argument("-v", "--verbose", action="count", default=0, help=VERBOSE_HELP)
    parser.add_argument("-q", "--quiet", action="count", default=0, help=QUIET_HELP)
    parser.add_argument("--log-format", choices=LOG_FORMATS, default="text", help=LOG_FORMAT_HELP)
    parser.add_argument("--db", metavar="URL", default=None, help=DB_HELP)
    subparsers = parser.add_subparsers(title="commands", metavar="COMMAND", required=True)
    chosen = None if every else selected_command(argv)
    for command in COMMANDS:
        sub = subparsers.add_parser(
            command.name, help=command.help, description=command.help, allow_abbrev=False
        )
        if every or command.name == chosen:
            _declare(command, sub)
    return parser


def selected_command(argv: Sequence[str]) -> str | None:
    """The command ``argv`` names: its first word that is neither an option nor the
    value of ``--db`` or ``--log-format``."""
    index = 0
    while index < len(argv):
        word = argv[index]
        if word == "--":
            return argv[index + 1] if index + 1 < len(argv) else None
        if word in _VALUED:
            index += 2
            continue
        if not word.startswith("-"):
            return word
        index += 1
    return None


def verbosity(args: argparse.Namespace) -> int:
    """How many ``-v`` were given, before and after the command, less the ``-q``."""
    louder = int(args.verbose) + int(getattr(args, "verbose_after", 0))
    quieter = int(args.quiet) + int(getattr(args, "quiet_after", 0))
    return louder - quieter


def log_format(args: argparse.Namespace) -> Literal["text", "json"]:
    """``--log-format``, given after the command or before it."""
    chosen: Literal["text", "json"] = getattr(args, "log_format_after", args.log_format)
    return chosen


def add_db_option(parser: argparse.ArgumentParser) -> None:
    """``--db URL`` on a command's parser (the global option, given after the command)."""
    parser.add_argument("--db", metavar="URL", default=argparse.SUPPRESS, help=DB_HELP)


def _declare(command: Command, parser: argparse.ArgumentParser) -> None:
    module_name, _, function = command.declare.partition(":")
    module = importlib.import_module(f"{__package__}.{module_name}")
    declare: Callable[[argparse.ArgumentParser], None] = getattr(module, function)
    declare(parser)
    for leaf in _leaves(parser):
        _globals_after_the_command(leaf, store=command.store)


def _leaves(parser: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
    """The parsers that run something: ``parser`` itself, or its sub-commands'."""
    nested = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not nested:
        yield parser
        return
    for action in nested:
        for sub in dict.fromkeys(action.choices.values()):
            yield from _leaves(sub)


def _globals_after_the_command(parser: argparse.ArgumentParser, *, store: bool) -> None:
    """Let ``-v``, ``-q``, ``--log-format`` and ``--db`` follow the command without
    undoing what came before it."""
    parser.add_argument(
        "-v",
        "--verbose",
        dest="verbose_after",
        action="count",
        default=argparse.SUPPRESS,
        help=VERBOSE_HELP,
    )
    parser.add_argument(
        "-q",
        "--quiet",
        dest="quiet_after",
        action="count",
        default=argparse.SUPPRESS,
        help=QUIET_HELP,
    )
    parser.add_argument(
        "--log-format",
        dest="log_format_after",
        choices=LOG_FORMATS,
        default=argparse.SUPPRESS,
        help=LOG_FORMAT_HELP,
    )
    declared = [a for a in parser._actions if a.dest == "db"]
    for action in declared:
        action.default = argparse.SUPPRESS  # a value given before the command stays
    if store and not declared:
        add_db_option(parser)
