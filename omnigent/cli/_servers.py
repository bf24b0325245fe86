"""``omnigent serve``, ``omnigent stdio`` and ``omnigent runner``: the transports' own
commands, declared here.

Their options and runners live with their transports (:mod:`omnigent.transports.http`,
:mod:`omnigent.transports.acp`); each is imported only when its command runs. Around
them the command line adds what it knows about the machine: a store another process
holds is refused up front, naming the holder; a store an ``omnigent serve`` holds makes
``stdio`` a relay to that server (:mod:`._stdio_relay`).
"""

from __future__ import annotations

import argparse

from ._holders import server_for_turns, store_for_turns

__all__ = ["declare_runner", "declare_serve", "declare_stdio"]


def declare_serve(parser: argparse.ArgumentParser) -> None:
    from ..transports.http import add_serve_arguments

    add_serve_arguments(parser)
    parser.set_defaults(handler=_cmd_serve)


def declare_stdio(parser: argparse.ArgumentParser) -> None:
    from ..transports.acp import add_stdio_arguments

    add_stdio_arguments(parser)
    parser.add_argument(
        "--server",
        metavar="URL",
        default=None,
        help="relay the editor to this omnigent server, its work here (default: the "
        "server holding the store, if one does)",
    )
    parser.add_argument(
        "--token",
        metavar="TOKEN",
        default=None,
        help="with --server: a runner token the server accepts (default: "
        "$OMNIGENT_RUNNER_TOKEN, else the store's own server's)",
    )
    parser.set_defaults(handler=_cmd_stdio)


def declare_runner(parser: argparse.ArgumentParser) -> None:
    from ..runner import add_runner_arguments, run_runner

    add_runner_arguments(parser)
    parser.set_defaults(handler=run_runner)


def _cmd_serve(args: argparse.Namespace) -> int:
    from ..transports.http import run_serve

    store_for_turns(args, "omnigent serve")
    return run_serve(args)


def _cmd_stdio(args: argparse.Namespace) -> int:
    server = server_for_turns(args, "omnigent stdio")
    if server is not None:
        from ._stdio_relay import run_relay

        return run_relay(args, server)
    from ..transports.acp import run_stdio

    return run_stdio(args)
