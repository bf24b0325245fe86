"""External harnesses: agent loops in child processes, spoken to over a Unix socket.

An external harness is any program started as ``command + ["--socket", PATH,
"--conversation-id", ID]`` that serves HTTP on that socket (``API.md``, "External
harness protocol"; ``docs/harnesses.md``). :class:`ExternalHarness` is the runtime's
side:

* **One process per conversation**, spawned by the runtime's
  :class:`~omnigent.processes._manager.ProcessManager` on the session's first turn
  (the session shows ``launching`` meanwhile), health-checked (``GET /health``,
  bounded by ``options.startup_timeout``, default 30 s) and reused for later turns —
  also by the next harness instance after the session went idle. A process that died
  (or was reaped) is spawned again on the next message.
* **The spawn environment** is the non-secret basics (``PATH``, ``HOME``, locale),
  what the spec names in ``executor.config.env``, ``OMNIGENT_HARNESS_AUTH_TOKEN`` (a
  fresh bearer token per spawn, sent on every request) and the session's effective
  model as ``HARNESS_<NAME>_MODEL``; its working directory is the session's.
* **A turn** POSTs ``message`` with the whole history and relays the SSE answer as
  session events: text deltas (coalesced), items, ``function_call`` items with
  ``status: action_required`` run through the core's tool path (policies included)
  with the output posted back as ``tool_result``; the harness's elicitations and
  policy evaluations go through the core too and are answered with ``approval`` /
  ``policy_verdict``. Messages that arrive mid-turn are forwarded as injections.
* **Interrupt**: cancelling the turn posts ``interrupt`` (shielded, bounded) and ends
  the turn ``cancelled``. **A crash** mid-turn — the process exits, or the stream ends
  without ``response.completed`` / ``response.failed`` — ends the turn ``failed`` with
  the exit status and stderr tail; it never hangs.

Register an external harness under a name with :func:`external_harness` (for the
``omnigent.harnesses`` entry-point group) or name it in a spec with ``harness:
external`` and ``command``.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Mapping, Sequence
from contextlib import suppress

import httpx
import trio

from ...errors import HarnessError
from ...processes import (
    ManagedProcess,
    ProcessManager,
    ProcessSpec,
    base_environment,
    open_process_manager,
)
from ..base import Harness, HarnessEnv, HarnessFactory, TurnContext, TurnRequest
from ._turn import Connection, TurnRelay, is_cancelled

__all__ = [
    "TOKEN_ENV",
    "ExternalHarness",
    "ManagedProcess",
    "ProcessManager",
    "ProcessSpec",
    "external_harness",
    "model_variable",
    "open_process_manager",
]

TOKEN_ENV = "OMNIGENT_HARNESS_AUTH_TOKEN"
DEFAULT_STARTUP_TIMEOUT = 30.0
# How long a best-effort message to a harness (interrupt) may take when cancelled.
_CONTROL_TIMEOUT = 2.0


def model_variable(harness_name: str) -> str:
    """``HARNESS_<NAME>_MODEL`` for a harness: ``claude-sdk`` → ``HARNESS_CLAUDE_SDK_MODEL``."""
    return "HARNESS_" + re.sub(r"[^A-Za-z0-9]+", "_", harness_name).strip("_").upper() + "_MODEL"


def external_harness(
    command: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    startup_timeout: float | None = None,
) -> HarnessFactory:
    """A harness factory that runs ``command`` as an external harness.

    For the ``omnigent.harnesses`` entry-point group::

        # mypkg/__init__.py
        harness = external_harness([sys.executable, "-m", "mypkg.harness"])
        # pyproject.toml
        [project.entry-points."omnigent.harnesses"]
        my-harness = "mypkg:harness"

    ``env`` is added to the spawn environment (the spec's ``executor.config.env``
    still applies on top).
    """
    argv = tuple(command)
    extra = dict(env or {})

    def factory(harness_env: HarnessEnv) -> Harness:
        return ExternalHarness(
            harness_env, command=argv, extra_env=extra, startup_timeout=startup_timeout
        )

    return factory


def make_external(env: HarnessEnv) -> Harness:
    """The built-in ``external`` harness: ``executor.config.command`` is the program."""
    if not env.config.command:
        raise HarnessError("harness 'external' needs executor.config.command")
    return ExternalHarness(env, command=env.config.command)


class ExternalHarness:
    """The runtime's side of one session's external harness (see the module docstring)."""

    def __init__(
        self,
        env: HarnessEnv,
        *,
        command: Sequence[str],
        extra_env: Mapping[str, str] | None = None,
        startup_timeout: float | None = None,
    ) -> None:
        if env.processes is None:
            raise HarnessError("external harnesses need a runtime's process manager")
        self._env = env
        self._processes: ProcessManager = env.processes
        self._command = tuple(command)
        self._extra_env = dict(extra_env or {})
        option = env.config.options.get("startup_timeout")
        if startup_timeout is None and isinstance(option, int | float) and option > 0:
            startup_timeout = float(option)
        self._startup_timeout = startup_timeout or DEFAULT_STARTUP_TIMEOUT
        self._connection: Connection | None = None

    @property
    def process(self) -> ManagedProcess | None:
        """The session's live harness process, if one runs."""
        return self._processes.get(self._env.session_id)

    async def aclose(self) -> None:
        """Close the HTTP client. The process stays, for the session's next turn."""
        connection, self._connection = self._connection, None
        if connection is not None:
            await connection.client.aclose()

    # -- the process -------------------------------------------------------------------

    async def _connect(self, request: TurnRequest, ctx: TurnContext) -> Connection:
        """The live connection, spawning (and health-checking) a process if needed."""
        process = self._processes.get(self._env.session_id)
        if self._connection is not None and self._connection.process is process:
            return self._connection
        await self.aclose()
        if process is not None:
            self._connection = self._client_for(process)
            return self._connection
        async with ctx.launching():
            process = await self._spawn(request)
            connection = self._client_for(process)
            try:
                await self._wait_healthy(connection)
            except BaseException:
                await connection.client.aclose()
                await process.terminate(self._processes.grace)
                raise
        self._connection = connection
        return connection

    async def _spawn(self, request: TurnRequest) -> ManagedProcess:
        session_id = self._env.session_id
        sandbox = await self._env.sandbox()
        if sandbox is None:
            socket = await self._processes.socket_path(f"{session_id}.sock")
        else:
            # Inside a sandbox the harness can write only a directory of its own, for
            # its socket: the others' sockets stay out of its sight.
            own = await self._processes.socket_path(f"{session_id}.d")
            await trio.Path(own).mkdir(mode=0o700, exist_ok=True)
            socket = own / "harness.sock"
            sandbox = sandbox.for_process(writes=(own,))
        # A harness that died leaves its socket file behind; the directory is ours.
        await trio.Path(socket).unlink(missing_ok=True)
        token = secrets.token_urlsafe(32)
        child_env = base_environment()
        child_env.update(self._extra_env)
        child_env.update(self._env.config.env)
        child_env[TOKEN_ENV] = token
        if request.model:
            child_env[model_variable(self._env.harness_name)] = request.model
        argv = (*self._command, "--socket", str(socket), "--conversation-id", session_id)
        spec = ProcessSpec(
            argv=argv,
            env=child_env,
            key=session_id,
            cwd=await self._env.working_directory(),
            info={"socket": str(socket), "token": token},
            # A stop or a delete of the session ends its harness too (the next
            # message starts a fresh one); only idle reaping waits for the timeout.
            session_id=session_id,
            sandbox=sandbox,
        )
        try:
            return await self._processes.spawn(spec)
        except OSError as exc:
            raise HarnessError(f"cannot start the external harness {argv[0]!r}: {exc}") from exc

    def _client_for(self, process: ManagedProcess) -> Connection:
        info = process.spec.info
        client = httpx.AsyncClient(
            transport=httpx.AsyncHTTPTransport(uds=info["socket"]),
            base_url="http://harness",
            headers={"Authorization": f"Bearer {info['token']}"},
            timeout=httpx.Timeout(connect=5.0, read=None, write=30.0, pool=30.0),
        )
        return Connection(process, client)

    async def _wait_healthy(self, connection: Connection) -> None:
        """Poll ``GET /health`` until it answers 200, the process exits, or time runs out."""
        process = connection.process
        delay = 0.005
        with trio.move_on_after(self._startup_timeout):
            while process.alive:
                try:
                    response = await connection.client.get("/health")
                    if response.status_code == 200:
                        return
                except httpx.TransportError:
                    pass  # not listening yet
                with trio.move_on_after(delay):
                    await process.exited.wait()
                delay = min(delay * 2, 0.1)
            raise HarnessError(
                f"the external harness exited before it was ready: {process.describe_exit()}"
            )
        tail = process.stderr_tail()
        raise HarnessError(
            f"the external harness did not answer /health within {self._startup_timeout:g} s"
            + (f"; stderr: {tail}" if tail else "")
        )

    # -- a turn ------------------------------------------------------------------------

    async def run_turn(self, request: TurnRequest, ctx: TurnContext) -> None:
        connection = await self._connect(request, ctx)
        with connection.process.in_use():
            try:
                await TurnRelay(connection, request, ctx).run()
            except BaseException as exc:
                if is_cancelled(exc) and connection.process.alive:
                    # It may be gone already; the turn is cancelled either way.
                    with (
                        trio.move_on_after(_CONTROL_TIMEOUT, shield=True),
                        suppress(HarnessError),
                    ):
                        await connection.post(request.session_id, {"type": "interrupt"})
                raise
