"""``omnigent run --server URL PATH PROMPT``: the session on a server, the work here.

:func:`run_on_server` uploads the spec to the server (``POST /v1/agents``), starts a
runner inside this command on the current directory (:func:`omnigent.runner.
serve_runner`, trusting the spec it uploaded), opens a session bound to it (or continues
one), sends the prompt and streams the turn from the server — rendered, with its
approvals answered, exactly as a local ``run`` does (:class:`~._render.TurnRenderer`,
:class:`~._prompt.Approvals`) and with the same exit codes. Ctrl-C interrupts the turn
on the server (a second stops waiting). When the turn has ended, the runner stops: the
session stays on the server, bound to this runner's name, for a later ``run --session
ID --server URL`` from the same directory.

The runner's name is made from this machine's name and the directory (``run-HOST-HASH``),
so a later run from the same place serves the same sessions. Two commands in one
directory at once (a ``run`` beside an editor's ``stdio``): the second finds the name
taken and connects as ``run-HOST-HASH-PID`` instead (:func:`start_local_runner`).

Without ``--server``, ``omnigent run`` comes here too when an ``omnigent serve`` holds
the store (``local=True``): the server is this user's own, and the runner connects
with the token it left beside the store's lock (``docs/cli.md``, "A store in use").
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import signal
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any

import trio

from .._config import omnigent_home
from ..client import ApiError, OmnigentClient
from ..client import SessionInfo as RemoteSession
from ..errors import BadRequest, OmnigentError, RunnerNameTaken
from ..model import ResponseCreated, SessionStatusChanged
from ..runner import RunnerOptions, default_runner_name, serve_runner
from ..spec import AgentSpec
from ._approval_render import ApprovalMode
from ._holders import TurnServer
from ._interrupts import finish_command, interrupt_on_signals, watched_signals
from ._output import one_line
from ._prompt import Approvals, Lines
from ._render import TurnRenderer
from ._turn import check_agent

__all__ = [
    "RemoteTurns",
    "ServerRefused",
    "local_runner_name",
    "open_remote_session",
    "run_on_server",
    "spec_hint",
    "start_local_runner",
]

log = logging.getLogger("omnigent.cli")

_TITLE_LENGTH = 80


class ServerRefused(OmnigentError):
    """What the server answered when it refused a request of ``run --server``."""

    def __init__(self, error: ApiError, hint: str = "") -> None:
        super().__init__(f"the server refused: {error.message}{hint}")
        self.status = error.status
        self.code = error.code


def spec_hint(server: str) -> str:
    """Why the server holding the store refused a spec ``run`` would run here."""
    return (
        f" (the server at {server} holds the store and takes this spec as a client's, "
        "under its --allow-* and --tool-module rules; to run it in this process "
        "instead, give it a store of its own: --db FILE)"
    )


def local_runner_name(cwd: Path) -> str:
    """The name of this directory's runner on this machine (``run-HOST-HASH``)."""
    digest = hashlib.sha256(str(cwd.resolve()).encode()).hexdigest()[:8]
    return f"run-{default_runner_name()[:48]}-{digest}"


async def run_on_server(
    spec: AgentSpec,
    prompt: str,
    *,
    server: str,
    token: str,
    model: str | None,
    approvals: ApprovalMode,
    watch_sigint: bool,
    open_lines: Callable[[], Lines],
    session_id: str | None = None,
    cwd: Path | None = None,
    watch_sigterm: bool = False,
    local: bool = False,
) -> int:
    """Run one turn of ``spec`` on ``server``, its work on this machine; the exit code.

    ``local``: the server was found holding the store (this user's own): a spec it
    refuses is said so, with the way to run it here instead.

    Raises:
        ServerRefused: the server refused the spec, the session or the message.
        OmnigentError: the server refused this runner (a wrong token, the name is
            taken: another run in this directory).
        BadRequest: ``session_id`` is a session of another agent.

    Cancellation: as a local ``run`` (a first Ctrl-C interrupts the turn on the server).
    """
    renderer = TurnRenderer()
    used: str | None = None
    title = one_line(prompt, _TITLE_LENGTH) or None
    where = TurnServer(server, token, local)
    with trio.CancelScope() as give_up:
        try:
            async with open_remote_session(
                spec, where, session_id, model, cwd or Path.cwd(), title=title
            ) as (client, used):
                await _stream_turn(
                    client,
                    used,
                    prompt,
                    renderer,
                    approvals,
                    open_lines,
                    give_up,
                    watched_signals(watch_sigint, watch_sigterm),
                )
        except ApiError as exc:
            raise ServerRefused(exc) from None
    return finish_command(renderer, give_up, used)


@asynccontextmanager
async def open_remote_session(
    spec: AgentSpec,
    server: TurnServer,
    session_id: str | None,
    model: str | None,
    cwd: Path,
    *,
    title: str | None = None,
) -> AsyncIterator[tuple[OmnigentClient, str]]:
    """A client of ``server`` and a session of ``spec`` there (new, or ``session_id``),
    served by a runner in this process on ``cwd``, for the length of the block; the
    runner says goodbye when it ends.

    Raises:
        ServerRefused: the server refused the spec (with the way out when it is the
            store's own server), or the session.
        BadRequest: ``session_id`` is another agent's, or another directory's.
        OmnigentError: the server refused the runner (a wrong token).
    """
    workspace = Path(await trio.Path(cwd).resolve())
    async with OmnigentClient(server.url) as client, trio.open_nursery() as nursery:
        try:
            agent = await client.create_agent(spec.to_dict())
            existing = None if session_id is None else await client.get_session(session_id)
        except ApiError as exc:
            hint = spec_hint(server.url) if server.local and session_id is None else ""
            raise ServerRefused(exc, hint) from None
        stop = trio.Event()
        runner = await start_local_runner(
            nursery,
            server=server.url,
            token=server.token,
            workspace=workspace,
            trusted_agent=agent.id,
            stop=stop,
            prefer=None if existing is None else existing.raw.get("runner_id"),
        )
        try:
            session = await _open_session(
                client, agent.id, spec.name, existing, title, model, runner, workspace
            )
            yield client, session.id
        finally:
            stop.set()  # the runner says goodbye


class RemoteTurns:
    """``chat``'s turns on a server: each sent and streamed as ``run --server``'s."""

    def __init__(self, client: OmnigentClient, approvals: ApprovalMode) -> None:
        self._client = client
        self._approvals: ApprovalMode = approvals

    async def take(
        self, session_id: str, line: str, renderer: TurnRenderer, lines: Callable[[], Lines]
    ) -> None:
        try:
            with trio.CancelScope() as give_up:
                await _stream_turn(
                    self._client, session_id, line, renderer, self._approvals, lines, give_up, ()
                )
        except ApiError as exc:
            raise ServerRefused(exc) from None

    async def stop(self, session_id: str) -> None:
        with contextlib.suppress(ApiError):  # it may have ended meanwhile
            await self._client.interrupt(session_id)


async def start_local_runner(
    nursery: trio.Nursery,
    *,
    server: str,
    token: str,
    workspace: Path,
    trusted_agent: str,
    stop: trio.Event,
    prefer: object = None,
) -> str:
    """Start a runner on ``workspace`` in ``nursery`` (stopped by ``stop``); its name.

    The name is ``prefer`` (a session's runner, to continue it) when it is this
    directory's, else ``run-HOST-HASH``; when that name is taken (another command in
    this directory is connected), ``run-HOST-HASH-PID``. The runner trusts the specs of
    ``trusted_agent`` (its own user's upload): they may name any program.

    Raises:
        OmnigentError: the server refused the runner (a wrong token, another protocol).
    """
    base = local_runner_name(workspace)
    names = [base, f"{base}-{os.getpid()}"]
    if isinstance(prefer, str) and prefer.startswith(base) and prefer not in names:
        names.insert(0, prefer)
    for index, name in enumerate(names):
        options = RunnerOptions(
            server=server,
            token=token,
            name=name,
            workspace=workspace,
            home=omnigent_home(),
            trusted_agent=trusted_agent,
        )
        taken = False
        try:
            await nursery.start(partial(serve_runner, options, say=_quiet, stop=stop))
        except* RunnerNameTaken:
            if index == len(names) - 1:
                raise
            log.info("runner %s is connected from elsewhere: trying another name", name)
            taken = True
        if not taken:
            return name
    raise AssertionError("unreachable: the last name's refusal is raised")


async def _open_session(
    client: OmnigentClient,
    agent_id: str,
    agent_name: str,
    session: RemoteSession | None,
    title: str | None,
    model: str | None,
    runner: str,
    workspace: Path,
) -> RemoteSession:
    if session is None:
        fields: dict[str, Any] = {"title": title, "runner_id": runner}
        if model is not None:
            fields["model_override"] = model
        return await client.create_session(agent_id, **fields)
    session_id = session.id
    check_agent(session, agent_id, agent_name)
    bound = session.raw.get("runner_id")
    if bound is None:
        raise BadRequest(
            f"session {session_id} runs in the server's own process, on no runner: "
            "send it messages through the server (omnigent sessions tail shows it)"
        )
    if not str(bound).startswith(local_runner_name(workspace)):
        raise BadRequest(
            f"session {session_id} runs on runner {bound!r}, not on this directory's "
            f"({runner}): continue it from the directory it started in"
        )
    if model is not None:
        session = await client.update_session(session_id, model_override=model)
    return session


async def _stream_turn(
    client: OmnigentClient,
    session_id: str,
    prompt: str,
    renderer: TurnRenderer,
    approvals: ApprovalMode,
    open_lines: Callable[[], Lines],
    give_up: trio.CancelScope,
    watched: tuple[signal.Signals, ...],
) -> None:
    """Send ``prompt`` and render the session's events until the turn that answers it ends.

    That turn is the first whose start (``response.created``) is seen after the message
    was sent: a turn already running when it was sent ends first, unrendered as ended.
    """
    answering = Approvals(client, session_id, renderer, approvals, open_lines)
    async with client.events(session_id) as events, trio.open_nursery() as nursery:
        await client.send_message(session_id, prompt)
        interrupt = partial(client.interrupt, session_id)  # on the server
        await nursery.start(interrupt_on_signals, interrupt, give_up, watched, renderer)
        nursery.start_soon(answering.run)
        started = False
        async for event in events:
            answering.feed(event)
            started = started or isinstance(event, ResponseCreated)
            if started and isinstance(event, SessionStatusChanged) and event.status.terminal:
                break
        nursery.cancel_scope.cancel()


def _quiet(line: str) -> None:
    log.info("%s", line)
