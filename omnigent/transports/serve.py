"""The server runner: ``omnigent serve`` (a runtime, its agents, Hypercorn).

:func:`serve` opens the runtime, registers the agents of a directory and serves the
HTTP app with Hypercorn's Trio worker until ``stop`` is set (or it is cancelled).
:func:`run_serve` is the CLI entry: it runs :func:`serve` under ``trio.run``, prints
``omnigent serving on URL`` when ready, and shuts down cleanly on SIGINT/SIGTERM.

The CLI wires it with::

    from omnigent.transports.serve import add_serve_parser, run_serve
    add_serve_parser(subparsers)          # sets func=run_serve on the sub-parser

Shutdown order (Hypercorn #106: never cancel Hypercorn's own nursery): set the app's
``stopping`` event (every open SSE stream ends), trigger Hypercorn's shutdown (it
closes its listeners and waits for responses in flight, at most ``graceful_timeout``),
then leave the runtime (every turn ends ``cancelled``, the store closes).
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
from collections.abc import Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import hypercorn.trio
import trio
import yaml
from hypercorn.config import Config

from .._config import default_db_url
from ..core import Runtime, open_runtime
from ..errors import BadRequest, ErrorDetail, SpecError
from ..spec import AgentSpec, parse_policy_spec
from .http import create_app

__all__ = ["add_serve_parser", "load_policies", "run_serve", "serve"]

log = logging.getLogger(__name__)

GRACEFUL_TIMEOUT = 3.0
# Beyond Hypercorn's own graceful timeout: the most a shutdown may take.
_SHUTDOWN_DEADLINE = GRACEFUL_TIMEOUT + 5.0


async def register_agents(runtime: Runtime, agents_dir: str | Path) -> list[str]:
    """Register every ``*.yaml`` spec in ``agents_dir``; returns the agent names.

    Raises:
        SpecError: naming the file, for an invalid spec. OSError: unreadable file.
    """
    names: list[str] = []
    paths = sorted(await trio.to_thread.run_sync(lambda: list(Path(agents_dir).glob("*.yaml"))))
    for path in paths:
        spec = await trio.to_thread.run_sync(AgentSpec.load, path)
        agent = await runtime.create_agent(spec)
        names.append(agent.name)
    return names


def load_policies(path: str | Path) -> list[dict[str, Any]]:
    """The server-wide default policies in a YAML file: a list of policy specs.

    Each entry is written as in an agent spec's ``policies`` list; they apply to every
    session after its agent's own policies.

    Raises:
        SpecError: naming the file and the bad entry (``[1].tools``).
        BadRequest: the file cannot be read.
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise BadRequest(f"cannot read the policies file {path}: {exc}") from exc
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise SpecError(f"{path}: invalid YAML: {exc}", [ErrorDetail("$", str(exc))]) from exc
    if data is None:
        return []
    if not isinstance(data, list) or not all(isinstance(p, dict) for p in data):
        detail = ErrorDetail("$", "expected a list of policies")
        raise SpecError(f"{path}: expected a list of policies", [detail])
    for index, policy in enumerate(data):
        try:
            parse_policy_spec(policy, root=f"[{index}]")
        except SpecError as exc:
            raise SpecError(f"{path}: {exc.message}", exc.details) from exc
    return data


async def serve(
    runtime_db: str | None,
    host: str,
    port: int,
    agents_dir: str | Path | None,
    auth: str,
    *,
    policies: Sequence[Mapping[str, Any]] = (),
    stop: trio.Event | None = None,
    task_status: trio.TaskStatus[str] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve omnigent over HTTP until ``stop`` is set or this is cancelled.

    Args:
        runtime_db: the store URL (``None``: in memory).
        host, port: where to listen (port 0 picks a free port).
        agents_dir: register every ``*.yaml`` in it first (``None``: none).
        auth: ``none`` or ``header``.
        policies: server-wide default policies (``open_runtime(default_policies=...)``).
        stop: set it to shut down; without it, cancel the caller's scope.
        task_status: started with the bound URL (``http://HOST:PORT``).

    Cancellation: cancelling runs the same orderly shutdown as ``stop``, bounded by
    a deadline; open streams end and every turn ends ``cancelled``.
    """
    stop = trio.Event() if stop is None else stop
    async with open_runtime(runtime_db, default_policies=policies) as runtime:
        if agents_dir is not None:
            await register_agents(runtime, agents_dir)
        stopping = trio.Event()
        app = create_app(runtime, auth=auth, stopping=stopping)  # type: ignore[arg-type]
        config = Config()
        config.bind = [f"{host}:{port}"]
        config.graceful_timeout = GRACEFUL_TIMEOUT
        config.accesslog = None
        hypercorn_done = trio.Event()
        shutdown = trio.Event()
        # Shielded so that a cancel from outside reaches Hypercorn only as its
        # shutdown trigger; the deadline set below bounds the shutdown.
        hypercorn_scope = trio.CancelScope(shield=True)
        async with trio.open_nursery() as nursery:
            urls: list[str] = await nursery.start(
                _run_hypercorn, app, config, shutdown, hypercorn_scope, hypercorn_done
            )
            task_status.started(urls[0])
            try:
                await stop.wait()
            finally:
                hypercorn_scope.deadline = trio.current_time() + _SHUTDOWN_DEADLINE
                stopping.set()
                shutdown.set()
                with trio.CancelScope(shield=True, deadline=hypercorn_scope.deadline):
                    await hypercorn_done.wait()


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
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=6767)
    parser.add_argument(
        "--db", default=None, help="store URL (default: $OMNIGENT_DB, else $OMNIGENT_HOME)"
    )
    parser.add_argument("--auth", choices=("none", "header"), default="none")
    parser.add_argument("--agents", default=None, help="register every *.yaml in DIR")
    parser.add_argument(
        "--policies",
        default=None,
        metavar="FILE",
        help="YAML list of default policies applied to every session",
    )
    parser.set_defaults(func=run_serve)
    return parser


def run_serve(args: argparse.Namespace) -> int:
    """Run the server until SIGINT/SIGTERM; returns the exit code (0 on a clean stop)."""
    db = args.db or default_db_url()
    if db.startswith("sqlite:///"):
        Path(db.removeprefix("sqlite:///")).expanduser().parent.mkdir(parents=True, exist_ok=True)
    policies = load_policies(args.policies) if getattr(args, "policies", None) else []
    trio.run(_main, db, args.host, args.port, args.agents, args.auth, policies)
    return 0


async def _main(
    db: str, host: str, port: int, agents: str | None, auth: str, policies: list[dict[str, Any]]
) -> None:
    stop = trio.Event()
    # Opened before anything starts, so a signal during startup is a clean stop too.
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with trio.open_nursery() as nursery:
            url = await nursery.start(
                partial(serve, db, host, port, agents, auth, policies=policies, stop=stop)
            )
            print(f"omnigent serving on {url}", flush=True)
            async for signum in signals:
                log.info("signal %s: shutting down", signum)
                stop.set()
                break
    sys.stdout.flush()


def main(argv: list[str] | None = None) -> int:
    """``python -m omnigent.transports.serve`` (the same options as ``omnigent serve``)."""
    parser = argparse.ArgumentParser(prog="omnigent")
    add_serve_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["serve", *(argv if argv is not None else sys.argv[1:])])
    code: int = args.func(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
