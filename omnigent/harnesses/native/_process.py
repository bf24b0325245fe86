"""What the native harnesses' process handling shares: the live process, the harness
base, and how a turn ends when it fails or is cancelled.

Claude Code (:mod:`omnigent.harnesses.claude._harness`) and Codex
(:mod:`omnigent.harnesses.codex._harness`) both run one CLI process per session, spawned
by the runtime's process manager in its own process group and kept on it
(``owner_state``) for later turns. They speak different protocols, but they keep the
process, spawn it, wait for it to exit, kill it, and end a failed or cancelled turn the
same way; that is here.
"""

from __future__ import annotations

import itertools
import signal
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import TypeVar

import trio

from ..._config import omnigent_home
from ..._private import private_dir
from ...errors import HarnessError, HarnessUnavailable
from ...processes import ManagedProcess, ProcessManager, ProcessSpec
from ...tools import sanitise_session_id
from ..base import HarnessEnv
from ..bridge import BridgeAddress, bridge_socket_name
from ._cli import ModelEndpoint, Program, model_endpoint
from ._ndjson import LineChannel

P = TypeVar("P", bound="NativeProcess")

__all__ = [
    "DEFAULT_STARTUP_TIMEOUT",
    "EXIT_WAIT",
    "NativeHarness",
    "NativeProcess",
    "cancelled",
    "drive_turn",
]

#: Seconds a native CLI gets to become ready (``executor.config.startup_timeout``).
DEFAULT_STARTUP_TIMEOUT = 30.0
#: Seconds to wait for a process that went away to be reaped (to read its exit).
EXIT_WAIT = 2.0


class NativeProcess:
    """One live CLI process, its line channel, and what omnigent knows about it.

    Subclasses add their protocol's calls; an instance is kept on the process
    (``owner_state``) so the next harness instance finds it.
    """

    def __init__(
        self,
        process: ManagedProcess,
        title: str,
        *,
        bridge: BridgeAddress | None = None,
        bridged: frozenset[str] = frozenset(),
    ) -> None:
        self.process = process
        self.title = title
        self.channel = LineChannel(process, name=title)
        self.fresh = False  # the next turn is a new conversation's first
        # Where its turns serve the tool bridge, and the omnigent tools it was given
        # (a CLI takes its tools once, at start).
        self.bridge = bridge
        self.bridged = bridged
        self._ids = itertools.count(1)

    async def wait_exit(self) -> None:
        """Wait (at most :data:`EXIT_WAIT`) for the process to be reaped."""
        with trio.move_on_after(EXIT_WAIT):
            await self.process.exited.wait()

    async def died(self) -> HarnessError:
        """The error of a turn whose process went away (with its exit, once reaped)."""
        await self.wait_exit()
        return HarnessError(f"{self.title} {self.process.describe_exit()} during the turn")

    async def kill(self) -> None:
        """SIGKILL the group and wait for the exit. Shielded, bounded."""
        with trio.move_on_after(EXIT_WAIT + 5, shield=True):
            self.process.signal_group(signal.SIGKILL)
            await self.process.exited.wait()


class NativeHarness:
    """The runtime's side of one session's native CLI: its key, its process, its options.

    Raises:
        HarnessError: (constructing) the runtime has no process manager.
    """

    def __init__(self, env: HarnessEnv, cli: Program) -> None:
        harness = env.harness_name
        if env.processes is None:
            raise HarnessError(f"harness {harness!r} needs a runtime's process manager")
        self._env = env
        self._cli = cli
        self._harness = harness
        self._processes: ProcessManager = env.processes
        self._key = f"{harness}:{env.session_id}"
        option = env.config.options.get("startup_timeout")
        self._startup_timeout = (
            float(option) if isinstance(option, int | float) and option > 0 else None
        ) or DEFAULT_STARTUP_TIMEOUT

    async def aclose(self) -> None:
        """Nothing to close: the process stays for the session's next turn."""

    async def _live(self, kind: type[P], bridged: frozenset[str]) -> P | None:
        """The session's live process of ``kind``, if it was given exactly the omnigent
        tools ``bridged``; one given others is ended (the next process continues the
        conversation: a CLI learns its tools only when it starts)."""
        process = self._processes.get(self._key)
        if process is None or not isinstance(process.owner_state, kind):
            return None
        live: P = process.owner_state
        if live.bridged == bridged:
            return live
        await process.terminate()
        return None

    async def _bridge_address(self, live: NativeProcess | None) -> BridgeAddress:
        """The tool bridge's address for this turn: the live process's, else a new one
        (a fresh token) for the process about to start.

        In a sandboxed session the socket sits in a directory of its own, which the
        sandbox shows the process (read-only: enough to connect); the others' sockets
        stay out of its sight.
        """
        if live is not None and live.bridge is not None:
            return live.bridge
        folder = await self._bridge_folder()
        if folder is not None:
            return BridgeAddress.new(folder / "bridge.sock")
        name = bridge_socket_name(self._key)
        return BridgeAddress.new(await self._processes.socket_path(name))

    async def _bridge_folder(self) -> Path | None:
        """A sandboxed session's bridge directory (made 0700), None without a sandbox."""
        if await self._env.sandbox() is None:
            return None
        name = bridge_socket_name(self._key).removesuffix(".sock") + ".d"
        folder = await self._processes.socket_path(name)
        await trio.Path(folder).mkdir(mode=0o700, exist_ok=True)
        return folder

    def _check_installed(self) -> None:
        """Raise :class:`HarnessUnavailable` (what to install) if the CLI is missing."""
        missing = self._cli.missing(self._harness)
        if missing is not None:
            raise HarnessUnavailable(self._harness, missing)

    def _binary(self) -> Path:
        """The CLI's executable.

        Raises:
            HarnessUnavailable: it is missing (with what to install).
        """
        binary = self._cli.find()
        if binary is None:
            missing = self._cli.missing(self._harness) or f"{self._cli.title} is missing"
            raise HarnessUnavailable(self._harness, missing)
        return binary

    def _endpoint(self, *, base_url_variable: str, api_key_variable: str) -> ModelEndpoint:
        """The model endpoint (:func:`~._cli.model_endpoint`) for this session."""
        config = self._env.config
        return model_endpoint(
            config.base_url,
            config.api_key,
            base_url_variable=base_url_variable,
            api_key_variable=api_key_variable,
            provider=self._env.provider,
        )

    async def _data_dir(self, name: str) -> Path:
        """The harness's directory ``name`` under its data dir, created if need be.

        A sandboxed session gets one of its own (``sandboxed/<session>/<name>``): the
        CLI inside writes there, and must not see the other sessions' transcripts.
        """
        path = self._env.data_dir or omnigent_home() / "harnesses" / self._harness
        if await self._env.sandbox() is not None:
            path = path / "sandboxed" / sanitise_session_id(self._env.session_id)
        path = path / name
        # Private: a CLI's configuration and transcripts hold keys and conversations.
        await trio.to_thread.run_sync(private_dir, path)
        return path

    async def _spawn(
        self,
        binary: Path,
        argv: tuple[str, ...],
        environment: Mapping[str, str],
        *,
        private: tuple[Path, ...] = (),
        endpoint: str | None = None,
    ) -> ManagedProcess:
        """Spawn the session's process (piped, in the session's working directory).

        In a sandboxed session the whole CLI runs inside the session's sandbox — and
        with it every tool it runs (its shell, its file edits): ``private`` (its
        config directory) is writable there too, its tool bridge's directory visible,
        and ``endpoint`` (its model API) reachable, even if nothing else is (see
        ``docs/sandbox.md``).

        Raises:
            HarnessError: it could not be started.
            SandboxUnavailable: the session's sandbox cannot be created here.
        """
        sandbox = await self._env.sandbox()
        if sandbox is not None:
            bridge = await self._bridge_folder()
            reads = () if bridge is None else (bridge,)
            sandbox = sandbox.for_process(writes=private, reads=reads, endpoint=endpoint)
        spec = ProcessSpec(
            argv=argv,
            env=environment,
            key=self._key,
            cwd=await self._env.working_directory(),
            pipes=True,
            session_id=self._env.session_id,
            sandbox=sandbox,
        )
        try:
            return await self._processes.spawn(spec)
        except OSError as exc:
            raise HarnessError(f"cannot start {self._cli.title} ({binary}): {exc}") from exc


def cancelled(exc: BaseException) -> bool:
    """Whether ``exc`` is (or a group holding) :class:`trio.Cancelled`."""
    if isinstance(exc, BaseExceptionGroup):
        return exc.split(trio.Cancelled)[0] is not None
    return isinstance(exc, trio.Cancelled)


async def drive_turn(
    live: NativeProcess,
    run: Callable[[], Awaitable[None]],
    interrupt: Callable[[], Awaitable[None]],
) -> None:
    """Run one turn on ``live``, holding it in use; end it cleanly if it fails.

    Cancellation: the turn is interrupted (the CLI's own interrupt, bounded), and the
    cancel goes on. Any other failure leaves the conversation with the process in an
    unknown state: the process is killed, so the next turn starts a new one (and
    resumes the conversation).
    """
    with live.process.in_use():
        try:
            await run()
        except BaseException as exc:
            if cancelled(exc):
                await interrupt()
            else:
                await live.kill()
            raise
