"""The ``pi`` harness: the pi coding agent as a session's agent loop.

One ``pi --mode rpc`` process per conversation (``docs/harnesses.md``, "pi"), spawned
by the runtime's process manager in its own process group, in the session's working
directory, and kept for later turns. pi keeps the conversation in a session file of
its own; the file's path is kept on the omnigent session
(:class:`~omnigent.harnesses.base.HarnessState` key ``session_file``), so a new
process — after a reap, a crash, a server restart — continues it (``--session``); a
file pi no longer has starts afresh, told the session's earlier messages.

Every turn serves the session's tool bridge: omnigent's extension in pi registers
omnigent's tools (their calls run in the turn, through its policies) and asks the
session's policies about each of pi's own tool calls before it runs (DENY blocks it,
ASK asks the person). A process is replaced when the turn's model or tools differ
from those it was started with (pi takes both at start).

Interrupt: pi's ``abort``, then the turn's end is read (bounded by
:data:`INTERRUPT_GRACE`); a process that has not ended the turn by then is killed with
its group. The pure half is :mod:`._protocol`.
"""

from __future__ import annotations

import itertools
from typing import Any

import trio

from ...errors import HarnessError
from ...processes import ManagedProcess, base_environment
from ..base import HarnessEnv, TurnContext, TurnRequest
from ..bridge import BridgeAddress, TurnTools, offered, serve_bridge
from ..native import (
    PI_CLI,
    ChannelClosed,
    Finished,
    ItemRelay,
    NativeHarness,
    NativeProcess,
    drive_turn,
    preamble,
)
from ._protocol import (
    APIS,
    DEFAULT_API,
    Answered,
    PiReader,
    abort_command,
    pi_argv,
    pi_environment,
    prompt_command,
    registered,
    state_command,
)

__all__ = ["INTERRUPT_GRACE", "PiHarness"]

STATE_KEY = "session_file"
INTERRUPT_GRACE = 3.0
"""Seconds pi gets to end an aborted turn before its group is killed."""


class _Pi(NativeProcess):
    """One live pi process and what omnigent knows about it (kept on it)."""

    def __init__(
        self, process: ManagedProcess, bridge: BridgeAddress, model: str, tools: frozenset[str]
    ) -> None:
        super().__init__(process, "pi", bridge=bridge, bridged=tools)
        self.model = model
        self._numbers = itertools.count(1)

    def next_id(self) -> str:
        return f"omnigent_{next(self._numbers)}"

    async def ask(self, command: dict[str, Any]) -> Answered:
        """Send a command and read until pi answers it (no turn is running).

        Raises:
            ChannelClosed: the process went away.
        """
        reader = PiReader()
        await self.channel.send(command)
        while True:
            for action in reader.feed(await self.channel.receive_batch()):
                if isinstance(action, Answered) and action.request_id == command.get("id"):
                    return action


class PiHarness(NativeHarness):
    """The runtime's side of one session's pi (see the module docstring)."""

    def __init__(self, env: HarnessEnv) -> None:
        super().__init__(env, PI_CLI)
        api = env.config.options.get("api")
        self._api = api if isinstance(api, str) and api in APIS else DEFAULT_API

    async def run_turn(self, request: TurnRequest, ctx: TurnContext) -> None:
        model = request.model
        if not model:
            raise HarnessError(
                f"harness {self._harness!r} needs a model: set executor.config.model "
                "(or give the session a model_override)"
            )
        wanted = registered(tool.name for tool in offered(request.tools))
        live = await self._live(_Pi, wanted)
        if live is not None and live.model != model:
            await live.process.terminate()  # pi takes its model at start: a new one
            live = None
        address = await self._bridge_address(live)
        async with ItemRelay(ctx, bridged=wanted.__contains__) as relay:
            tools = TurnTools(
                ctx, request.tools, harness=self._harness, before_call=relay.end_message
            )
            async with serve_bridge(address, tools):
                pi = live or await self._connect(request, ctx, address, wanted)
                turn = _Turn(pi, request, ctx, relay)
                await drive_turn(pi, turn.run, turn.interrupt)

    async def _connect(
        self,
        request: TurnRequest,
        ctx: TurnContext,
        address: BridgeAddress,
        tools: frozenset[str],
    ) -> _Pi:
        self._check_installed()
        async with ctx.launching():
            stored = await self._env.state.get(STATE_KEY)
            pi = await self._start(request, address, tools, stored)
            try:
                with trio.fail_after(self._startup_timeout):
                    answer = await pi.ask(state_command(pi.next_id()))
            except ChannelClosed:
                await pi.wait_exit()
                raise HarnessError(
                    f"pi exited before it was ready: {pi.process.describe_exit()}"
                ) from None
            except trio.TooSlowError:
                await pi.kill()
                raise HarnessError(f"pi did not start within {self._startup_timeout:g} s") from None
            except BaseException:
                await pi.kill()
                raise
            data = answer.data if isinstance(answer.data, dict) else {}
            session_file = data.get("sessionFile")
            if not answer.success or not isinstance(session_file, str):
                await pi.kill()
                raise HarnessError(f"pi did not say which session it keeps: {answer.error}")
            pi.fresh = data.get("messageCount") == 0
            if session_file != stored:
                await self._env.state.set(STATE_KEY, session_file)
        return pi

    async def _start(
        self,
        request: TurnRequest,
        address: BridgeAddress,
        tools: frozenset[str],
        session_file: str | None,
    ) -> _Pi:
        binary = self._binary()
        base_url_variable, api_key_variable = APIS[self._api]
        endpoint = self._endpoint(
            base_url_variable=base_url_variable, api_key_variable=api_key_variable
        )
        if not endpoint.base_url:
            raise HarnessError(
                f"harness {self._harness!r} has no model endpoint: set "
                f"executor.config.base_url (or {base_url_variable})"
            )
        assert request.model is not None
        sessions, agent_dir = await self._data_dir("sessions"), await self._data_dir("agent")
        argv = pi_argv(str(binary), session_dir=sessions, session_file=session_file)
        environment = pi_environment(
            base_environment(),
            agent_dir=agent_dir,
            endpoint=endpoint,
            api=self._api,
            model=request.model,
            instructions=request.instructions,
            bridge=address,
            extra=self._env.config.env,
        )
        process = await self._spawn(
            binary, argv, environment, private=(sessions, agent_dir), endpoint=endpoint.base_url
        )
        pi = _Pi(process, address, request.model, tools)
        process.owner_state = pi
        return pi


class _Turn:
    """One turn's conversation with the process."""

    def __init__(self, pi: _Pi, request: TurnRequest, ctx: TurnContext, relay: ItemRelay) -> None:
        self._pi = pi
        self._request = request
        self._ctx = ctx
        self._relay = relay
        self._reader = PiReader()
        self._prompt_id = pi.next_id()
        self._finished: Finished | None = None
        self._sent = False

    async def run(self) -> None:
        pi = self._pi
        earlier = preamble(self._request.history) if pi.fresh else None
        pi.fresh = False
        command = prompt_command(self._prompt_id, self._request.input, earlier)
        self._sent = True
        await pi.channel.send(command)
        while self._finished is None:
            for action in self._reader.feed(await self._batch()):
                if isinstance(action, Finished):
                    self._finished = action
                elif isinstance(action, Answered):
                    self._answered(action)
                else:
                    await self._relay.apply(action)
        if self._finished.error is not None:
            self._ctx.report_response_status("failed", self._finished.error)

    async def _batch(self) -> list[dict[str, Any]]:
        try:
            return await self._pi.channel.receive_batch()
        except ChannelClosed:
            raise await self._pi.died() from None

    def _answered(self, answer: Answered) -> None:
        if answer.request_id == self._prompt_id and not answer.success:
            self._finished = Finished(f"pi refused the prompt: {answer.error}")

    async def interrupt(self) -> None:
        """pi's ``abort``, then read to the end of the turn; kill the group if that
        takes longer than :data:`INTERRUPT_GRACE`. Shielded, bounded."""
        if not self._sent:
            return
        pi = self._pi
        with trio.move_on_after(INTERRUPT_GRACE, shield=True):
            try:
                await pi.channel.send(abort_command())
                while True:
                    for action in self._reader.feed(await pi.channel.receive_batch()):
                        if isinstance(action, Finished):
                            return
            except (ChannelClosed, HarnessError):
                pass  # it is gone, or going
        await pi.kill()
