"""``omnigent runner``: its options, and the process around :func:`~._runner.serve_runner`.

The runner prints one line on stderr for each connection made, lost or failed; it stops
cleanly on SIGINT or SIGTERM (every link ends, every process it started is terminated)
and exits 0. What the server refuses for good — a wrong token, a name another runner
holds, another protocol version — is one ``Error: …`` line and exit status 1, as is a
bad option.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import socket
import sys
from pathlib import Path

import trio

from .._config import omnigent_home
from ..errors import BadRequest, OmnigentError
from ..link import TOKEN_VARIABLE, check_name
from ..outbound import UrlAllowList, url_prefix_problem
from ..spec import ClientTrust, env_name_problem
from ._runner import RunnerOptions, connect_url, serve_runner

__all__ = [
    "TOKEN_VARIABLE",
    "add_runner_arguments",
    "default_runner_name",
    "run_runner",
]

EXIT_REFUSED = 1


def default_runner_name() -> str:
    """This machine's host name, made a valid runner name."""
    name = re.sub(r"[^A-Za-z0-9._-]", "-", socket.gethostname()).strip("-._")[:64]
    return name or "runner"


def add_runner_arguments(parser: argparse.ArgumentParser) -> None:
    """Add every ``runner`` option to ``parser`` (the ``runner`` command's)."""
    parser.add_argument(
        "--server", required=True, metavar="URL", help="the server (http(s)://HOST:PORT)"
    )
    parser.add_argument(
        "--token",
        default=None,
        metavar="TOKEN",
        help=f"a runner token the server accepts (default: ${TOKEN_VARIABLE})",
    )
    parser.add_argument(
        "--name",
        default=None,
        metavar="NAME",
        help="the name sessions bind to (default: the host name)",
    )
    parser.add_argument(
        "--workspace",
        default=None,
        metavar="DIR",
        help="where the sessions' files and processes live; no path leaves it "
        "(default: the current directory)",
    )
    parser.add_argument(
        "--allow-command",
        dest="allowed_commands",
        action="append",
        default=[],
        metavar="PROGRAM",
        help="a program the specs the server sends may name (an external harness, a "
        "stdio MCP server, a terminal's command); repeatable (default: none)",
    )
    parser.add_argument(
        "--allow-env",
        dest="allowed_env",
        action="append",
        default=[],
        metavar="NAME",
        help="an environment variable (or a prefix ending in '*') those specs may set "
        "for the programs they name; repeatable (default: none)",
    )
    parser.add_argument(
        "--allow-model-url",
        dest="allowed_model_urls",
        action="append",
        default=[],
        metavar="URL",
        help="a URL prefix under which those specs may name their model endpoint "
        "(executor.config.base_url), reached from this machine; repeatable (default: none)",
    )


def options_from(args: argparse.Namespace) -> RunnerOptions:
    """The runner's options from the command line and the environment.

    Raises:
        BadRequest: a missing token, a bad name, URL or workspace.
    """
    token = args.token or os.environ.get(TOKEN_VARIABLE)
    if not token:
        raise BadRequest(f"a runner needs a token: --token TOKEN or ${TOKEN_VARIABLE}")
    name = args.name or default_runner_name()
    if (problem := check_name(name)) is not None:
        raise BadRequest(f"--name {problem}, got {name!r}")
    connect_url(args.server, name)
    workspace = Path(args.workspace or os.getcwd()).expanduser()
    if not workspace.is_dir():
        raise BadRequest(f"--workspace {workspace}: no such directory")
    return RunnerOptions(
        server=args.server,
        token=token,
        name=name,
        workspace=workspace,
        home=omnigent_home(),
        trust=_trust(args),
    )


def _trust(args: argparse.Namespace) -> ClientTrust:
    """What the runner's operator allows the server's specs to name here.

    Raises:
        BadRequest: an ``--allow-env`` or ``--allow-model-url`` entry that is not one.
    """
    for name in args.allowed_env:
        if (problem := env_name_problem(name)) is not None:
            raise BadRequest(f"--allow-env {problem}")
    for prefix in args.allowed_model_urls:
        if (problem := url_prefix_problem(prefix)) is not None:
            raise BadRequest(f"--allow-model-url {problem}")
    return ClientTrust(
        commands=args.allowed_commands,
        env=args.allowed_env,
        model_urls=UrlAllowList(tuple(args.allowed_model_urls)),
    )


def run_runner(args: argparse.Namespace) -> int:
    """Run the runner until SIGINT/SIGTERM (0), or until the server refuses it (1)."""
    try:
        options = options_from(args)
        trio.run(_main, options)
    except OmnigentError as exc:
        return _refused(exc)
    except BaseExceptionGroup as group:
        matched, rest = group.split(OmnigentError)
        if matched is None or rest is not None:
            raise
        return _refused(_first(matched))
    return 0


def _first(exc: BaseException) -> BaseException:
    while isinstance(exc, BaseExceptionGroup):
        exc = exc.exceptions[0]
    return exc


def _refused(exc: BaseException) -> int:
    message = exc.message if isinstance(exc, OmnigentError) else str(exc)
    print(f"Error: {message}", file=sys.stderr, flush=True)
    return EXIT_REFUSED


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


async def _main(options: RunnerOptions) -> None:
    stop = trio.Event()
    async with trio.open_nursery() as nursery:
        await nursery.start(_on_signals, options.name, stop, nursery.cancel_scope)
        await serve_runner(options, say=_say, stop=stop)
        nursery.cancel_scope.cancel()


async def _on_signals(
    name: str,
    stop: trio.Event,
    scope: trio.CancelScope,
    *,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """A first SIGINT/SIGTERM stops the runner (the server is told); a second, at once."""
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        task_status.started()
        async for _ in signals:
            if stop.is_set():
                scope.cancel()
                return
            _say(f"runner {name}: stopping")
            stop.set()
