"""``omnigent stdio``: an ACP v1 agent on stdin/stdout, for editors.

An editor (Zed, a JetBrains IDE, a Neovim ACP plugin) starts ``omnigent stdio [--agent
PATH]`` (without ``--agent``: the project's ``.omnigent/agent.yaml``, else the built-in
editor agent, :func:`default_agent_spec`) and speaks the Agent Client Protocol to it:
newline-delimited JSON-RPC 2.0 on stdin/stdout (:mod:`._agent`). Sessions live in the
store (``--db``, by default ``$OMNIGENT_HOME/omnigent.db``), so ``session/load`` works
from a new process.

stdout carries protocol messages only. Before anything runs, the protocol keeps
private copies of file descriptors 0 and 1; fd 0 then reads ``/dev/null`` and fd 1
writes to stderr, so nothing else — a ``print``, a library's warning, a tool's child
process — can write into the protocol stream or steal its input. Logs go to stderr.

The CLI wires it with::

    from omnigent.transports.acp._stdio import add_stdio_parser, run_stdio
    add_stdio_parser(subparsers)          # sets func=run_stdio on the sub-parser

The editor started this process and is its operator: the MCP servers it passes with
``session/new`` and ``session/load`` are connected for as long as it stays connected
(stdio ones run in the session's directory; see :mod:`._mcp_servers`).
``--no-client-mcp`` refuses them (they are ignored and named in the answer's
``_meta.omnigent.ignoredMcpServers``).

An unreadable or invalid spec raises before the runtime opens (the CLI prints one
``Error: …`` on stderr and exits 2). The spec file is the operator's own, so the
``function`` policies it names are allowed (as ``omnigent run`` allows them).

The end: when the editor closes stdin, or on SIGINT/SIGTERM, omnigent reads nothing
more but answers every request it has read — a prompt in flight answers ``stopReason:
cancelled`` once its turn has ended (see :mod:`omnigent.rpc`) — and then exits 0,
after every turn has ended. A second signal cuts the wait short.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any

import trio

from ..._config import default_db_url, omnigent_home
from ..._gc import settle_after_startup
from ..._malloc import return_large_blocks
from ..._private import private_dir, warn_if_shared
from ...core import Agent, PolicyFunction, open_runtime
from ...core import load_policy_function as load_function
from ...errors import BadRequest, SpecError
from ...rpc import NdjsonStream
from ...spec import AgentSpec, agent_references, importable_beside
from ._agent import AcpAgent, serve_acp

__all__ = [
    "add_stdio_arguments",
    "add_stdio_parser",
    "default_agent_spec",
    "load_agent_spec",
    "own_policy_functions",
    "protocol_fds",
    "run_stdio",
    "serve_stdio",
]

log = logging.getLogger(__name__)


PROJECT_AGENT = Path(".omnigent") / "agent.yaml"
DEFAULT_MODEL = "gpt-4o-mini"


def default_agent_spec(folder: Path, environ: Mapping[str, str] | None = None) -> AgentSpec:
    """The agent ``omnigent stdio`` serves without ``--agent``.

    The project's own, ``.omnigent/agent.yaml`` in ``folder`` (the directory the editor
    started omnigent in), if there is one; else the built-in editor agent: the ``loop``
    harness on the OpenAI-compatible endpoint of ``OPENAI_BASE_URL`` /
    ``OPENAI_API_KEY``, the model ``$OMNIGENT_MODEL`` (default ``gpt-4o-mini``), asking
    before it runs a command or changes a file. This is what an editor that installs
    omnigent from the ACP registry (``uvx omnigent stdio``) runs.

    Raises:
        BadRequest, SpecError: the project's spec cannot be read or is invalid.
    """
    own = folder / PROJECT_AGENT
    if own.is_file():
        return load_agent_spec(own)
    env = os.environ if environ is None else environ
    return AgentSpec.from_dict(
        {
            "name": "coder",
            "description": "omnigent's editor agent (no --agent and no .omnigent/agent.yaml)",
            "prompt": (
                "You are a careful coding agent working in the user's project. Read before "
                "you edit, keep changes small, and run the tests you touch."
            ),
            "executor": {
                "type": "omnigent",
                "config": {"harness": "loop", "model": env.get("OMNIGENT_MODEL") or DEFAULT_MODEL},
            },
            "policies": [
                {"name": "ask_shell", "type": "ask_tools", "tools": ["sys_os_shell"],
                 "reason": "Run this command?"},
                {"name": "ask_writes", "type": "ask_tools",
                 "tools": ["sys_os_write", "sys_os_edit"], "reason": "Change this file?"},
            ],
        }
    )  # fmt: skip


def load_agent_spec(path: str | Path) -> AgentSpec:
    """The spec in ``path``.

    Raises:
        BadRequest: the file cannot be read. SpecError: it is not a valid spec.
    """
    try:
        return AgentSpec.load(path)
    except SpecError as exc:
        raise SpecError(f"{path}: {exc.message}", exc.details) from exc
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise BadRequest(f"cannot read agent spec {str(path)!r}: {reason}") from exc
    except UnicodeDecodeError as exc:
        raise BadRequest(f"cannot read agent spec {str(path)!r}: not UTF-8 text") from exc


def own_policy_functions(spec: AgentSpec) -> dict[str, PolicyFunction]:
    """The ``function`` policies a spec file names, imported (the file is the operator's).

    Raises:
        InvalidInput: a reference cannot be imported.
    """
    refs = dict.fromkeys(p.function for p in spec.policies if p.function is not None)
    return {ref: load_function(ref) for ref in refs if ":" in ref or "." in ref}


async def serve_stdio(
    spec: AgentSpec,
    db: str | None,
    receive_stream: trio.abc.ReceiveStream,
    send_stream: trio.abc.SendStream,
    *,
    policy_functions: Mapping[str, PolicyFunction] | None = None,
    client_mcp: bool = True,
    task_status: trio.TaskStatus[AcpAgent] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Register ``spec`` and serve ACP over the two streams until input ends.

    Args:
        spec: the agent ``session/new`` creates sessions of.
        db: the store URL (``None``: in memory).
        receive_stream, send_stream: the protocol's input and output.
        policy_functions: callables the spec's ``function`` policies may name.
        client_mcp: connect the MCP servers the editor passes (``False``: ignore them).
        task_status: started with the connection's agent side (its
            ``connection.stop_reading()`` ends the input early: a signal).

    The ``openai-agents`` agents ``spec`` names are trusted: the spec is the operator's
    (``omnigent run`` trusts its file the same way).

    Cancellation: every turn ends ``cancelled`` and the store closes.
    """
    own_agents = [ref.partition(":")[0] for ref in agent_references(spec)]
    async with open_runtime(
        db, policy_functions=policy_functions, policy_modules=own_agents
    ) as runtime:
        agent = await runtime.create_agent(spec)
        log.info("serving agent %s (version %d) over stdio", agent.name, agent.version)

        async def resolve() -> Agent:
            return await runtime.get_agent(agent.id)

        stream = NdjsonStream(receive_stream, send_stream)
        async with trio.open_nursery() as nursery:
            acp_agent = await nursery.start(
                partial(serve_acp, client_mcp="operator" if client_mcp else "off"),
                runtime,
                stream,
                resolve,
            )
            task_status.started(acp_agent)
        log.info("the input ended and every request was answered: shutting down")


def add_stdio_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``stdio`` sub-command to an argparse ``subparsers`` (``func=run_stdio``)."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "stdio",
        help="ACP agent on stdin/stdout (for editors)",
        description="Serve one agent over the Agent Client Protocol on stdin/stdout.",
    )
    add_stdio_arguments(parser)
    parser.set_defaults(func=run_stdio)
    return parser


def add_stdio_arguments(parser: argparse.ArgumentParser) -> None:
    """Add every ``stdio`` option to ``parser`` (the ``stdio`` sub-command's)."""
    parser.add_argument(
        "--agent",
        metavar="PATH",
        default=None,
        help="agent spec file (default: .omnigent/agent.yaml here, else the built-in one)",
    )
    parser.add_argument(
        "--db",
        metavar="URL",
        default=None,
        help="database URL (default: $OMNIGENT_DB, else sqlite:///$OMNIGENT_HOME/omnigent.db)",
    )
    parser.add_argument(
        "--no-client-mcp",
        dest="client_mcp",
        action="store_false",
        help="ignore the MCP servers the editor passes (default: run them for the session)",
    )


def run_stdio(args: argparse.Namespace) -> int:
    """Serve until stdin closes or a signal arrives; returns the exit code.

    Raises:
        BadRequest, SpecError: the spec cannot be read or is invalid (nothing has
        been written to stdout). StoreBusy: another process owns the database.
    """
    spec = load_agent_spec(args.agent) if args.agent else default_agent_spec(Path.cwd())
    if args.agent:
        importable_beside(args.agent)  # the operator's file: modules beside it import
    functions = own_policy_functions(spec)
    db: str = args.db or default_db_url()
    warn_if_shared(omnigent_home(), db)
    if db.startswith("sqlite:///"):
        private_dir(Path(db.removeprefix("sqlite:///")).expanduser().parent)
    with protocol_fds() as (fd_in, fd_out):
        client_mcp = bool(getattr(args, "client_mcp", True))
        trio.run(_main, spec, db, functions, client_mcp, fd_in, fd_out)
    return 0


async def _main(
    spec: AgentSpec,
    db: str,
    functions: dict[str, PolicyFunction],
    client_mcp: bool,
    fd_in: int,
    fd_out: int,
) -> None:
    stdin = trio.lowlevel.FdStream(os.dup(fd_in))
    stdout = trio.lowlevel.FdStream(os.dup(fd_out))
    async with stdin, stdout:
        with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            async with trio.open_nursery() as nursery:
                serving: list[AcpAgent] = []

                async def serve() -> None:
                    run = partial(
                        serve_stdio,
                        spec,
                        db,
                        stdin,
                        stdout,
                        policy_functions=functions,
                        client_mcp=client_mcp,
                    )
                    async with trio.open_nursery() as inner:
                        serving.append(await inner.start(run))
                        settle_after_startup()  # a server from now on: see omnigent._gc
                        return_large_blocks()  # see omnigent._malloc
                    nursery.cancel_scope.cancel()  # all answered: stop watching signals

                nursery.start_soon(serve)
                async for signum in signals:
                    if serving and not serving[0].connection.input_ended:
                        # Read nothing more, answer what was read, then exit.
                        log.info("signal %s: answering what is in flight, then exiting", signum)
                        serving[0].connection.stop_reading()
                        continue
                    log.info("signal %s: shutting down now", signum)
                    nursery.cancel_scope.cancel()
                    break


@contextmanager
def protocol_fds() -> Iterator[tuple[int, int]]:
    """Private copies of fds 0 and 1; meanwhile fd 0 reads /dev/null and fd 1 is stderr."""
    sys.stdout.flush()
    saved_in, saved_out = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDONLY)
    try:
        os.dup2(null, 0)
        os.dup2(2, 1)
        yield saved_in, saved_out
    finally:
        sys.stdout.flush()
        os.dup2(saved_in, 0)
        os.dup2(saved_out, 1)
        for fd in (null, saved_in, saved_out):
            os.close(fd)
