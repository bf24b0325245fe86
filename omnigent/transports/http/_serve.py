"""The server runner: ``omnigent serve`` (a runtime, its agents, Hypercorn).

:func:`serve` opens the runtime, registers the agents of a directory and serves the
HTTP app with Hypercorn's Trio worker until ``stop`` is set (or it is cancelled).
:func:`run_serve` is the CLI entry: it runs :func:`serve` under ``trio.run``, prints
``omnigent serving on URL`` when ready, and shuts down cleanly on SIGINT/SIGTERM.

The CLI wires it with::

    from omnigent.transports.http._serve import add_serve_parser, run_serve
    add_serve_parser(subparsers)          # sets func=run_serve on the sub-parser

Shutdown order (Hypercorn #106: never cancel Hypercorn's own nursery): stop the
runtime's sessions (every running turn ends ``cancelled`` and its terminal events are
published; what is stuck after ``--shutdown-grace`` seconds is abandoned), set the
app's ``stopping`` event (every open SSE stream forwards those terminal events, then
ends), trigger Hypercorn's shutdown (it closes its listeners and waits for responses
in flight, at most ``graceful_timeout``), then leave the runtime (the store closes).
"""

from __future__ import annotations

import argparse
import errno
import logging
import os
import re
import secrets
import signal
import socket
import sys
from collections.abc import Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import attrs
import hypercorn.trio
import trio
from hypercorn.config import Config

from ..._config import default_db_url, omnigent_home
from ..._gc import settle_after_startup
from ..._malloc import return_large_blocks
from ..._private import private_dir, warn_if_shared
from ...core import MAX_MESSAGE_BYTES, open_runtime
from ...errors import BadRequest
from ...link import TOKEN_VARIABLE
from ...outbound import url_prefix_problem
from ...spec import env_name_problem
from ...stores import (
    announce_server,
    forget_runner_token,
    is_postgres_url,
    parse_sqlite_url,
    publish_runner_token,
)
from ..runner import RunnerSettings, open_runner_hub
from ._app import create_app
from ._fence import Fence
from ._serve_args import add_serve_arguments
from ._serve_files import load_policies, register_agents
from ._ws_slots import WS_MAX_MESSAGE_BYTES

__all__ = ["add_serve_parser", "listen_error", "load_policies", "run_serve", "serve"]

log = logging.getLogger(__name__)

GRACEFUL_TIMEOUT = 3.0
_SERVER_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$")
# Beyond Hypercorn's own graceful timeout: the most a shutdown may take.
_SHUTDOWN_DEADLINE = GRACEFUL_TIMEOUT + 5.0


async def serve(
    runtime_db: str | None,
    host: str,
    port: int,
    agents_dir: str | Path | None,
    auth: str,
    *,
    policies: Sequence[Mapping[str, Any]] = (),
    policy_modules: Sequence[str] = (),
    safe_defaults: bool = False,
    tool_modules: Sequence[str] = (),
    allowed_commands: Sequence[str] = (),
    allowed_env: Sequence[str] = (),
    allowed_mcp_urls: Sequence[str] = (),
    allowed_model_urls: Sequence[str] = (),
    allowed_origins: Sequence[str] = (),
    allowed_hosts: Sequence[str] = (),
    server_id: str | None = None,
    lease_ttl: float | None = None,
    runners: RunnerSettings | None = None,
    stop: trio.Event | None = None,
    shutdown_grace: float = 5.0,
    purge_workspaces: bool = False,
    max_message_bytes: int = MAX_MESSAGE_BYTES,
    workspace_roots: Sequence[str | Path] | None = None,
    task_status: trio.TaskStatus[str] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve omnigent over HTTP until ``stop`` is set or this is cancelled.

    Args:
        runtime_db: the store URL (``None``: in memory).
        host, port: where to listen (port 0 picks a free port).
        agents_dir: register every ``*.yaml``, ``*.yml`` and ``*.json`` in it first
            (``None``: none).
        auth: ``none`` or ``header``.
        policies: server-wide default policies (``open_runtime(default_policies=...)``).
        policy_modules: modules whose callables agents' ``function`` policies may name
            (``open_runtime(policy_modules=...)``).
        safe_defaults: ask before a command or a write outside the working directory
            when no policy has an opinion (``--ask-by-default``; a console for people
            turns it on: ``open_runtime(safe_defaults=...)``).
        tool_modules: modules whose callables a client's spec may name as Python tools
            (``--tool-module``; ``open_runtime(tool_modules=...)``); the ``--agents``
            specs are the operator's and may name any.
        allowed_commands: programs a client's spec (``POST /v1/agents``) may name to
            run (``--allow-command``); the ``--agents`` specs are the operator's and
            may name any. Also the stdio MCP servers a ``/v1/ws`` client may pass.
        allowed_env: variables (names, ``PREFIX*``) a client may set for the programs
            it names (``--allow-env``; default none).
        allowed_mcp_urls: URL prefixes under which a client's spec or a ``/v1/ws``
            client may name HTTP MCP servers (``--allow-mcp-url``; default none).
        allowed_model_urls: URL prefixes under which a client's spec may name its
            model endpoint (``--allow-model-url``; default none).
        allowed_origins: web app origins admitted with CORS (``--allowed-origin``).
        allowed_hosts: ``Host`` names answered besides the server's own address
            (``--allowed-host``); see ``docs/security.md``.
        server_id: this server's name among those sharing a PostgreSQL database
            (``--server-id``; default ``HOST:PID``).
        lease_ttl: seconds a server's leases outlive its last renewal (``--lease-ttl``;
            PostgreSQL only): how long a dead server's sessions wait to be taken over.
        runners: which runners may connect (``--runner-token``) and how long a turn
            waits for one (``--runner-wait``); see ``docs/runners.md``. On a SQLite
            file, a fresh token is admitted besides and written beside the store's
            lock (``0600``), for this user's own command line (``omnigent run`` and
            ``omnigent stdio`` beside the server); it is removed when the server stops.
        stop: set it to shut down; without it, cancel the caller's scope.
        shutdown_grace: seconds running turns get to end at shutdown (then what is
            stuck is abandoned); see ``open_runtime``.
        purge_workspaces: a deleted session's workspace goes with it
            (``--purge-workspaces``).
        max_message_bytes: the largest message a session takes
            (``--max-message-bytes``; larger is 413).
        workspace_roots: the directories a client may name for a session (``cwd`` over
            ``/v1/ws``; ``--workspace-root``); ``None``: the current directory.
        task_status: started with the bound URL (``http://HOST:PORT``).

    Raises:
        BadRequest: the address cannot be listened on (in use, a bad port, a host
            that does not resolve), or ``agents_dir`` is not a directory.
        SpecError: an agent in ``agents_dir`` is invalid.

    Cancellation: cancelling runs the same orderly shutdown as ``stop``, bounded by
    a deadline; open streams end and every turn ends ``cancelled``.
    """
    stop = trio.Event() if stop is None else stop
    runtime_options: dict[str, Any] = {
        "default_policies": policies,
        "policy_modules": policy_modules,
        "safe_defaults": safe_defaults,
        "tool_modules": tool_modules,
        "allowed_commands": allowed_commands,
        "allowed_env": allowed_env,
        "allowed_mcp_urls": allowed_mcp_urls,
        "allowed_model_urls": allowed_model_urls,
        "shutdown_grace": shutdown_grace,
        "server_id": server_id,
        "purge_workspaces": purge_workspaces,
        "max_message_bytes": max_message_bytes,
        "workspace_roots": (Path.cwd(),) if workspace_roots is None else workspace_roots,
    }
    if lease_ttl is not None:
        runtime_options["lease_ttl"] = lease_ttl
    runners = runners or RunnerSettings()
    # This user's own runners (the command line beside the server) need no token of the
    # operator's: the store's folder is theirs, and the token waits there (0600).
    local_token = secrets.token_urlsafe(32) if _sqlite_file(runtime_db) else None
    if local_token is not None:
        runners = attrs.evolve(runners, local_token=local_token)
    async with (
        open_runner_hub(runners) as hub,
        open_runtime(runtime_db, runners=hub, **runtime_options) as runtime,
    ):
        if agents_dir is not None:
            await register_agents(runtime, agents_dir)
        stopping = trio.Event()
        app = create_app(
            runtime,
            auth=auth,  # type: ignore[arg-type]
            stopping=stopping,
            allowed_origins=allowed_origins,
            allowed_hosts=allowed_hosts,
            runners=hub,
        )
        config = Config()
        config.bind = [f"{host}:{port}"]
        config.graceful_timeout = GRACEFUL_TIMEOUT
        config.accesslog = None
        config.loglevel = "WARNING"  # its "Running on …": we print our own line
        # A remote client's ACP message is bounded tighter than the editor's over stdio.
        config.websocket_max_message_size = WS_MAX_MESSAGE_BYTES
        hypercorn_done = trio.Event()
        shutdown = trio.Event()
        # Shielded so that a cancel from outside reaches Hypercorn only as its
        # shutdown trigger; the deadline set below bounds the shutdown.
        hypercorn_scope = trio.CancelScope(shield=True)
        async with trio.open_nursery() as nursery:
            try:
                urls: list[str] = await nursery.start(
                    _run_hypercorn, app, config, shutdown, hypercorn_scope, hypercorn_done
                )
            except (OSError, OverflowError, BaseExceptionGroup) as exc:
                error = listen_error(exc, host, port)
                if error is exc:
                    raise
                raise error from exc
            # The store's lock now says where this server answers: the command line
            # reads it to talk to us rather than fail on a store in use.
            announced = await trio.to_thread.run_sync(announce_server, runtime_db, urls[0])
            if announced and local_token is not None:
                await trio.to_thread.run_sync(publish_runner_token, runtime_db, local_token)
            task_status.started(urls[0])
            try:
                await stop.wait()
            finally:
                if local_token is not None:
                    forget_runner_token(runtime_db, local_token)
                # First the turns end (and say so), while every stream is still open.
                await runtime.shutdown()
                hypercorn_scope.deadline = trio.current_time() + _SHUTDOWN_DEADLINE
                stopping.set()
                shutdown.set()
                with trio.CancelScope(shield=True, deadline=hypercorn_scope.deadline):
                    await hypercorn_done.wait()


def _sqlite_file(db: str | None) -> bool:
    """Whether ``db`` names a SQLite file (one user's store, with a lock beside it)."""
    return not is_postgres_url(db) and parse_sqlite_url(db) is not None


def listen_error(exc: BaseException, host: str, port: int) -> BaseException:
    """The user's error for a failure to listen on ``host:port``, or ``exc`` itself.

    Hypercorn binds when it starts, and a busy port, a port out of range or a host that
    does not resolve surfaces as an ``OSError``/``OverflowError`` (in a nursery's
    group): this names the address and the reason in one :class:`BadRequest`.
    """
    leaves = [exc]
    while len(leaves) == 1 and isinstance(leaves[0], BaseExceptionGroup):
        leaves = list(leaves[0].exceptions)
    if len(leaves) != 1 or not isinstance(leaves[0], OSError | OverflowError):
        return exc
    leaf = leaves[0]
    where = f"cannot listen on {host}:{port}"
    if isinstance(leaf, socket.gaierror):
        return BadRequest(f"{where}: cannot resolve host {host!r} ({leaf.strerror})")
    if isinstance(leaf, OverflowError):
        return BadRequest(f"{where}: the port must be between 0 and 65535")
    if leaf.errno == errno.EADDRINUSE:
        return BadRequest(f"{where}: the address is already in use (another server?)")
    if leaf.errno == errno.EADDRNOTAVAIL:
        return BadRequest(f"{where}: {host!r} is not an address of this machine")
    if leaf.errno == errno.EACCES:
        return BadRequest(f"{where}: permission denied (ports below 1024 need privileges)")
    return BadRequest(f"{where}: {leaf.strerror or leaf}")


async def _run_hypercorn(
    app: Any,
    config: Config,
    shutdown: trio.Event,
    scope: trio.CancelScope,
    done: trio.Event,
    *,
    task_status: trio.TaskStatus[list[str]] = trio.TASK_STATUS_IGNORED,
) -> None:
    try:
        with scope:
            await hypercorn.trio.serve(
                app, config, shutdown_trigger=shutdown.wait, task_status=task_status
            )
    finally:
        done.set()


def add_serve_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``serve`` sub-command to an argparse ``subparsers`` (``func=run_serve``)."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "serve", help="HTTP + SSE server", description="Serve omnigent over HTTP + SSE."
    )
    add_serve_arguments(parser)
    parser.set_defaults(func=run_serve)
    return parser


def run_serve(args: argparse.Namespace) -> int:
    """Run the server until SIGINT/SIGTERM; returns the exit code (0 on a clean stop).

    Raises:
        OmnigentError: a mistake on the command line (a bad port, a missing
            ``--agents`` folder, an address that cannot be listened on, a bad
            policies file); the command line prints it as one ``Error:`` line.
    """
    if not 0 <= args.port <= 65535:
        raise BadRequest(f"--port must be between 0 and 65535, got {args.port}")
    if args.agents is not None and not Path(args.agents).is_dir():
        raise BadRequest(f"--agents {args.agents}: no such directory")
    db = args.db or default_db_url()
    # A server's files are its own: the database, the workspaces, what tools write
    # there (an existing file keeps its mode, and is warned about below).
    os.umask(0o077)
    return_large_blocks()  # a message's megabytes go back when freed: see omnigent._malloc
    warn_if_shared(omnigent_home(), db)
    if db.startswith("sqlite:///"):
        private_dir(Path(db.removeprefix("sqlite:///")).expanduser().parent)
    options: dict[str, Any] = {
        "policies": load_policies(args.policies) if getattr(args, "policies", None) else [],
        "policy_modules": tuple(getattr(args, "policy_modules", None) or ()),
        "tool_modules": tuple(getattr(args, "tool_modules", None) or ()),
        "allowed_commands": tuple(getattr(args, "allowed_commands", None) or ()),
        **_trusted_options(args),
        "allowed_origins": getattr(args, "allowed_origin", None) or [],
        "allowed_hosts": getattr(args, "allowed_host", None) or [],
        "shutdown_grace": float(getattr(args, "shutdown_grace", 5.0)),
        "server_id": getattr(args, "server_id", None),
        "lease_ttl": getattr(args, "lease_ttl", None),
        "purge_workspaces": bool(getattr(args, "purge_workspaces", False)),
        "safe_defaults": bool(getattr(args, "ask_by_default", False)),
        "workspace_roots": _workspace_roots(getattr(args, "workspace_roots", None) or ()),
    }
    if getattr(args, "max_message_bytes", None) is not None:
        options["max_message_bytes"] = args.max_message_bytes
    try:
        Fence.of(options["allowed_origins"], options["allowed_hosts"])
    except ValueError as exc:
        raise BadRequest(str(exc)) from exc
    server_id = options["server_id"]
    if server_id is not None and not _SERVER_ID.match(server_id):
        raise BadRequest(f"--server-id must match {_SERVER_ID.pattern}, got {server_id!r}")
    lease_ttl = options["lease_ttl"]
    if lease_ttl is not None and not 0.5 <= lease_ttl <= 3600:
        raise BadRequest(f"--lease-ttl must be between 0.5 and 3600 seconds, got {lease_ttl}")
    tokens = tuple(getattr(args, "runner_tokens", None) or ())
    if not tokens and os.environ.get(TOKEN_VARIABLE):
        tokens = (os.environ[TOKEN_VARIABLE],)
    for token in tokens:
        if not token.strip() or any(c.isspace() for c in token):
            raise BadRequest("--runner-token must be a non-empty token without spaces")
    runner_timeout = float(getattr(args, "runner_timeout", 10.0))
    if not 1 <= runner_timeout <= 3600:
        raise BadRequest(
            f"--runner-timeout must be between 1 and 3600 seconds, got {runner_timeout}"
        )
    options["runners"] = RunnerSettings(
        tokens, wait=float(getattr(args, "runner_wait", 60.0)), timeout=runner_timeout
    )
    trio.run(partial(_main, db, args.host, args.port, args.agents, args.auth, options))
    return 0


def _workspace_roots(given: Sequence[str]) -> tuple[Path, ...]:
    """``--workspace-root`` directories (absolute), else the current directory.

    Raises:
        BadRequest: one that is not a directory.
    """
    roots = []
    for raw in given:
        root = Path(raw).expanduser().absolute()
        if not root.is_dir():
            raise BadRequest(f"--workspace-root {raw}: no such directory")
        roots.append(root)
    return tuple(roots) or (Path.cwd(),)


def _trusted_options(args: argparse.Namespace) -> dict[str, tuple[str, ...]]:
    """``--allow-env``, ``--allow-mcp-url`` and ``--allow-model-url``, each checked.

    Raises:
        BadRequest: naming the option and the bad entry.
    """
    checks = (
        ("allowed_env", "--allow-env", env_name_problem),
        ("allowed_mcp_urls", "--allow-mcp-url", url_prefix_problem),
        ("allowed_model_urls", "--allow-model-url", url_prefix_problem),
    )
    found: dict[str, tuple[str, ...]] = {}
    for dest, option, check in checks:
        found[dest] = tuple(getattr(args, dest, None) or ())
        for entry in found[dest]:
            if (problem := check(entry)) is not None:
                raise BadRequest(f"{option} {problem}")
    return found


async def _main(
    db: str, host: str, port: int, agents: str | None, auth: str, options: dict[str, Any]
) -> None:
    """:func:`serve` with ``options`` (its keyword arguments) until SIGINT/SIGTERM."""
    stop = trio.Event()
    # Opened before anything starts, so a signal during startup is a clean stop too.
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with trio.open_nursery() as nursery:
            run = partial(serve, db, host, port, agents, auth, stop=stop, **options)
            url = await nursery.start(run)
            settle_after_startup()  # a server from now on: see omnigent._gc
            print(f"omnigent serving on {url}", flush=True)
            async for signum in signals:
                log.info("signal %s: shutting down", signum)
                stop.set()
                break
    sys.stdout.flush()
