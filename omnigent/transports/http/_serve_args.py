"""The options of ``omnigent serve`` (argparse), apart from what runs them."""

from __future__ import annotations

import argparse

__all__ = ["add_serve_arguments"]


def add_serve_arguments(parser: argparse.ArgumentParser) -> None:
    """Add every ``serve`` option to ``parser`` (the ``serve`` sub-command's)."""
    parser.add_argument(
        "--host", default="127.0.0.1", help="address to listen on (default: %(default)s)"
    )
    parser.add_argument(
        "--port", type=int, default=6767, help="port, 0 for any free one (default: %(default)s)"
    )
    parser.add_argument(
        "--db",
        metavar="URL",
        default=None,
        help="store URL (default: $OMNIGENT_DB, else sqlite:///$OMNIGENT_HOME/omnigent.db)",
    )
    parser.add_argument(
        "--auth",
        choices=("none", "header"),
        default="none",
        help="none: everyone is 'local'; header: the caller is the X-Forwarded-Email "
        "header (default: %(default)s)",
    )
    parser.add_argument(
        "--agents",
        metavar="DIR",
        default=None,
        help="register every *.yaml, *.yml and *.json agent spec in DIR at start (default: none)",
    )
    parser.add_argument(
        "--policies",
        default=None,
        metavar="FILE",
        help="YAML list of default policies applied to every session (default: none)",
    )
    parser.add_argument(
        "--policy-module",
        dest="policy_modules",
        action="append",
        default=[],
        metavar="NAME",
        help="a module whose own callables agents' function policies may name; "
        "repeatable (default: none)",
    )
    parser.add_argument(
        "--ask-by-default",
        action="store_true",
        help="ask before an agent runs a command or writes outside its working directory "
        "when none of its policies decide (the safe defaults of omnigent run)",
    )
    parser.add_argument(
        "--tool-module",
        dest="tool_modules",
        action="append",
        default=[],
        metavar="NAME",
        help="a module whose own callables agent specs sent by clients may name as "
        "Python tools (tools.python); the --agents specs may name any; repeatable "
        "(default: none)",
    )
    parser.add_argument(
        "--allow-command",
        dest="allowed_commands",
        action="append",
        default=[],
        metavar="PROGRAM",
        help="a program that agent specs sent by clients may name to run (an external "
        "harness, a stdio MCP server, a terminal's command); clients choose its "
        "arguments, so never a shell or an interpreter; repeatable (default: none)",
    )
    parser.add_argument(
        "--allow-env",
        dest="allowed_env",
        action="append",
        default=[],
        metavar="NAME",
        help="an environment variable (or a prefix ending in '*') that agent specs and "
        "/v1/ws clients may set for the programs they name; repeatable (default: none)",
    )
    parser.add_argument(
        "--allow-model-url",
        dest="allowed_model_urls",
        action="append",
        default=[],
        metavar="URL",
        help="a URL prefix (https://models.example/v1) under which agent specs sent by "
        "clients may name their model endpoint (executor.config.base_url); repeatable "
        "(default: none)",
    )
    parser.add_argument(
        "--allow-mcp-url",
        dest="allowed_mcp_urls",
        action="append",
        default=[],
        metavar="URL",
        help="a URL prefix (https://mcp.example/) under which agent specs sent by clients "
        "and /v1/ws clients may name HTTP MCP servers; repeatable (default: none)",
    )
    parser.add_argument(
        "--workspace-root",
        dest="workspace_roots",
        action="append",
        default=[],
        metavar="DIR",
        help="a directory clients' sessions may work in (ACP's cwd over /v1/ws); "
        "repeatable (default: the directory serve runs in)",
    )
    parser.add_argument(
        "--max-message-bytes",
        type=_positive_int,
        default=None,
        metavar="N",
        help="the largest message a session takes, text and inline images (default: "
        "8 MiB); a larger one is 413",
    )
    parser.add_argument(
        "--purge-workspaces",
        action="store_true",
        help="delete a session's workspace ($OMNIGENT_HOME/workspaces/ID) with the "
        "session (default: kept)",
    )
    parser.add_argument(
        "--allowed-origin",
        action="append",
        default=[],
        metavar="URL",
        help="a web app origin (https://app.example) that may call the API, with CORS; repeatable",
    )
    parser.add_argument(
        "--allowed-host",
        action="append",
        default=[],
        metavar="NAME",
        help="a Host name to answer besides this server's address and localhost "
        "(a proxy's public name; '*' for any); repeatable",
    )
    parser.add_argument(
        "--shutdown-grace",
        type=_non_negative,
        default=5.0,
        metavar="SECONDS",
        help="at shutdown, how long running turns get to end before what is stuck is "
        "abandoned (default 5)",
    )
    parser.add_argument(
        "--server-id",
        metavar="NAME",
        default=None,
        help="this server's name among several on one PostgreSQL database (default: HOST:PID)",
    )
    parser.add_argument(
        "--runner-token",
        dest="runner_tokens",
        action="append",
        default=[],
        metavar="TOKEN",
        help="a token runners may connect with (GET /v1/runners/connect); repeatable "
        "(default: $OMNIGENT_RUNNER_TOKEN; without any, runners are refused)",
    )
    parser.add_argument(
        "--runner-wait",
        type=_non_negative,
        default=60.0,
        metavar="SECONDS",
        help="how long a turn waits for its session's runner to connect before it "
        "fails runner_offline (default 60)",
    )
    parser.add_argument(
        "--runner-timeout",
        type=_non_negative,
        default=10.0,
        metavar="SECONDS",
        help="seconds without a word from a runner after which its link ends and its "
        "turns fail runner_disconnected (default 10)",
    )
    parser.add_argument(
        "--lease-ttl",
        type=float,
        default=None,
        metavar="SECONDS",
        help="PostgreSQL: how long a server's session leases outlive it, i.e. how soon "
        "another server takes over after a crash (default: 10)",
    )


def _non_negative(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a number of seconds >= 0, not {text!r}")
    return value


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {text!r}")
    return value
