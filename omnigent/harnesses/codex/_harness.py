"""The ``codex`` harness: Codex (``codex app-server``) as a session's agent loop.

One app-server process per conversation (``docs/harnesses.md``, "Codex"), spawned by
the runtime's process manager in its own process group, speaking JSON-RPC on stdio,
kept for later turns. A session is one Codex thread: its id is kept on the omnigent
session (:class:`~omnigent.harnesses.base.HarnessState` key ``thread_id``), so a new
process — after a reap, a crash, a server restart — resumes it (``thread/resume``); a
thread Codex no longer knows is started afresh, told the session's earlier messages.
A message is one Codex turn.

Threads run with ``approvalPolicy: "untrusted"``: Codex asks about every command and
file change, and each request is answered from the session's policies — ALLOW / DENY
without asking, an ASK (or no opinion at all) as an elicitation with phase
``codex_command_approval`` / ``codex_file_change_approval``.

Interrupt: ``turn/interrupt``, then the turn's end is read (bounded by
:data:`INTERRUPT_GRACE`); a process that has not ended the turn by then is killed with
its group (the cancel is then best-effort, and logged). The pure half is
:mod:`._protocol`; the JSON-RPC framing here is private and small (newline
JSON, ids of our own, server requests answered by id).
"""

from __future__ import annotations

import logging
from collections import deque
from typing import Any

import trio

from ..._version import __version__
from ...errors import HarnessError
from ...processes import ManagedProcess, base_environment
from ..base import HarnessEnv, TurnContext, TurnRequest
from ..bridge import BridgeAddress, TurnTools, offered, serve_bridge, shim_command
from ..native import (
    CODEX_CLI,
    GPT_MODELS,
    ChannelClosed,
    Finished,
    ItemRelay,
    NativeHarness,
    NativeProcess,
    drive_turn,
    preamble,
)
from ._protocol import (
    COMMAND_APPROVAL,
    DEFAULT_BASE_URL,
    FILE_APPROVAL,
    approval_event,
    approval_params,
    codex_argv,
    codex_environment,
    decision,
    error_response,
    notification,
    request,
    result,
    thread_params,
    turn_input,
)
from ._stream import CodexReader, Response, ServerRequest, Withdrawn, read_message

__all__ = ["INTERRUPT_GRACE", "CodexHarness"]

log = logging.getLogger(__name__)

STATE_KEY = "thread_id"
DEFAULT_SANDBOX = "workspace-write"
INTERRUPT_GRACE = 3.0
"""Seconds Codex gets to end an interrupted turn before its group is killed."""
_MAX_PENDING = 32


class _RpcFailed(Exception):
    """Codex answered one of our requests with an error."""


class _Codex(NativeProcess):
    """One live app-server process and what omnigent knows about it (kept on it)."""

    def __init__(
        self, process: ManagedProcess, bridge: BridgeAddress, bridged: frozenset[str]
    ) -> None:
        super().__init__(process, "Codex", bridge=bridge, bridged=bridged)
        self.thread_id = ""
        self.past_turns: deque[str] = deque(maxlen=8)

    def next_id(self) -> int:
        return next(self._ids)

    async def call(self, method: str, params: dict[str, Any]) -> Any:
        """A request answered before anything else runs (setup): read until its answer.

        Raises:
            ChannelClosed: the process went away. _RpcFailed: Codex refused it.
        """
        request_id = self.next_id()
        await self.channel.send(request(request_id, method, params))
        while True:
            for raw in await self.channel.receive_batch():
                message = read_message(raw)
                if isinstance(message, Response) and message.id == request_id:
                    if message.error is not None:
                        raise _RpcFailed(message.error)
                    return message.result
                if isinstance(message, ServerRequest):
                    await self.channel.send(error_response(message.id, "not in a turn"))


class CodexHarness(NativeHarness):
    """The runtime's side of one session's Codex (see the module docstring)."""

    def __init__(self, env: HarnessEnv) -> None:
        super().__init__(env, CODEX_CLI)
        sandbox = env.config.options.get("sandbox")
        self._sandbox = sandbox if isinstance(sandbox, str) else DEFAULT_SANDBOX

    async def run_turn(self, request: TurnRequest, ctx: TurnContext) -> None:
        if request.model and (refusal := GPT_MODELS.refusal(self._harness, request.model)):
            raise HarnessError(refusal)
        bridged = frozenset(tool.name for tool in offered(request.tools))
        live = await self._live(_Codex, bridged)
        if live is not None and not live.thread_id:
            await live.kill()  # it never got a thread: start over
            live = None
        address = await self._bridge_address(live)
        async with ItemRelay(ctx) as relay:
            tools = TurnTools(
                ctx, request.tools, harness=self._harness, before_call=relay.end_message
            )
            async with serve_bridge(address, tools):
                codex = live or await self._connect(request, ctx, address, bridged)
                turn = _Turn(codex, request, ctx, relay)
                await drive_turn(codex, turn.run, turn.interrupt)

    # -- the process -------------------------------------------------------------------

    async def _connect(
        self,
        request: TurnRequest,
        ctx: TurnContext,
        address: BridgeAddress,
        bridged: frozenset[str],
    ) -> _Codex:
        self._check_installed()
        async with ctx.launching():
            codex = await self._spawn_codex(request, address, bridged)
            try:
                with trio.fail_after(self._startup_timeout):
                    await self._open_thread(codex, request)
            except trio.TooSlowError:
                await codex.kill()
                raise HarnessError(
                    f"Codex did not start within {self._startup_timeout:g} s"
                ) from None
            except ChannelClosed:
                await codex.wait_exit()
                raise HarnessError(
                    f"Codex exited before it was ready: {codex.process.describe_exit()}"
                ) from None
            except _RpcFailed as exc:
                await codex.kill()
                raise HarnessError(f"Codex refused to start the thread: {exc}") from None
            except BaseException:
                await codex.kill()
                raise
        return codex

    async def _spawn_codex(
        self, request: TurnRequest, address: BridgeAddress, bridged: frozenset[str]
    ) -> _Codex:
        binary = self._binary()
        endpoint = self._endpoint(
            base_url_variable="OPENAI_BASE_URL", api_key_variable="OPENAI_API_KEY"
        )
        home = await self._data_dir("home")
        shim = shim_command(address, __version__) if bridged else None
        argv = codex_argv(str(binary), endpoint=endpoint, model=request.model, shim=shim)
        environment = codex_environment(
            base_environment(),
            home=home,
            endpoint=endpoint,
            extra=self._env.config.env,
            bridge_token=address.token if bridged else None,
        )
        process = await self._spawn(
            binary,
            argv,
            environment,
            private=(home,),
            endpoint=endpoint.base_url or DEFAULT_BASE_URL,
        )
        codex = _Codex(process, address, bridged)
        process.owner_state = codex
        return codex

    async def _open_thread(self, codex: _Codex, request: TurnRequest) -> None:
        """``initialize``, then resume the session's thread or start one."""
        client = {"name": "omnigent", "title": "omnigent", "version": __version__}
        await codex.call("initialize", {"clientInfo": client})
        await codex.channel.send(notification("initialized"))
        cwd = await self._env.working_directory()

        def params(thread_id: str | None) -> dict[str, Any]:
            return thread_params(
                cwd=cwd,
                sandbox=self._sandbox,
                instructions=request.instructions,
                model=request.model,
                thread_id=thread_id,
            )

        stored = await self._env.state.get(STATE_KEY)
        answer: Any = None
        if stored:
            try:
                answer = await codex.call("thread/resume", params(stored))
            except _RpcFailed as exc:
                log.info("Codex cannot resume thread %s (%s): starting a new one", stored, exc)
        if answer is None:
            answer = await codex.call("thread/start", params(None))
            codex.fresh = True
        thread = answer.get("thread") if isinstance(answer, dict) else None
        if not isinstance(thread, dict) or not isinstance(thread.get("id"), str):
            raise _RpcFailed("its answer names no thread")
        codex.thread_id = thread["id"]
        if codex.thread_id != stored:
            await self._env.state.set(STATE_KEY, codex.thread_id)


def _turn_of(message: dict[str, Any]) -> Any:
    """The ``turnId`` a message names, if any."""
    params = message.get("params")
    return params.get("turnId") if isinstance(params, dict) else None


class _Turn:
    """One Codex turn: ``turn/start``, then the thread's notifications until it ends."""

    def __init__(
        self, codex: _Codex, request: TurnRequest, ctx: TurnContext, relay: ItemRelay
    ) -> None:
        self._codex = codex
        self._request = request
        self._ctx = ctx
        self._relay = relay
        self._reader = CodexReader(codex.thread_id)
        self._start_id = -1
        self._sent = False
        self._pending: dict[Any, trio.CancelScope] = {}
        self._finished: Finished | None = None

    async def run(self) -> None:
        codex = self._codex
        earlier = preamble(self._request.history) if codex.fresh else None
        codex.fresh = False
        params: dict[str, Any] = {
            "threadId": codex.thread_id,
            "input": turn_input(self._request.input, earlier),
        }
        if self._request.model:
            params["model"] = self._request.model
        self._start_id = codex.next_id()
        relay = self._relay
        async with trio.open_nursery() as nursery:
            self._sent = True
            await codex.channel.send(request(self._start_id, "turn/start", params))
            while self._finished is None:
                await self._step(relay, nursery)
            nursery.cancel_scope.cancel()  # approvals left open (none should be)
        if self._reader.turn_id is not None:
            codex.past_turns.append(self._reader.turn_id)
        if self._finished.error is not None:
            self._ctx.report_response_status("failed", self._finished.error)

    async def _batch(self) -> list[Any]:
        try:
            batch = await self._codex.channel.receive_batch()
        except ChannelClosed:
            raise await self._codex.died() from None
        past = set(self._codex.past_turns)
        return self._reader.feed([m for m in batch if _turn_of(m) not in past])

    async def _step(self, relay: ItemRelay | None, nursery: trio.Nursery | None) -> None:
        for message in await self._batch():
            if isinstance(message, Finished):
                self._finished = message
            elif isinstance(message, Response):
                self._answered(message)
            elif isinstance(message, ServerRequest):
                await self._server_request(message, nursery)
            elif isinstance(message, Withdrawn):
                scope = self._pending.get(message.id)
                if scope is not None:
                    scope.cancel()  # withdraws its elicitation
            elif relay is not None:
                await relay.apply(message)

    def _answered(self, response: Response) -> None:
        if response.id != self._start_id:
            return
        if response.error is not None:
            raise HarnessError(f"Codex refused the turn: {response.error}")
        turn = response.result.get("turn") if isinstance(response.result, dict) else None
        if isinstance(turn, dict) and isinstance(turn.get("id"), str):
            self._reader.turn_id = self._reader.turn_id or turn["id"]

    async def _server_request(self, message: ServerRequest, nursery: trio.Nursery | None) -> None:
        channel = self._codex.channel
        ours = message.params.get("threadId") in (None, self._codex.thread_id)
        if nursery is None or not ours or message.method not in (COMMAND_APPROVAL, FILE_APPROVAL):
            text = f"omnigent does not handle {message.method!r} requests"
            await channel.send(error_response(message.id, text))
        elif len(self._pending) >= _MAX_PENDING:
            await channel.send(error_response(message.id, "too many open requests", -32000))
        else:
            scope = trio.CancelScope()
            self._pending[message.id] = scope
            nursery.start_soon(self._approve, message, scope)

    async def _approve(self, message: ServerRequest, scope: trio.CancelScope) -> None:
        try:
            with scope:
                event = approval_event(message, self._reader)
                params = approval_params(message, event)
                verdict = await self._ctx.evaluate_policy(event, ask=params)
                outcome = verdict.get("result")
                if outcome == "POLICY_ACTION_ALLOW":
                    accepted = True
                elif outcome == "POLICY_ACTION_DENY":
                    accepted = False
                else:  # no policy has an opinion: Codex's own question goes to the person
                    action, _content = await self._ctx.elicit(params)
                    accepted = action == "accept"
                await self._codex.channel.send(result(message.id, decision(accepted)))
        finally:
            self._pending.pop(message.id, None)

    async def interrupt(self) -> None:
        """``turn/interrupt``, then read to the end of the turn; kill the group if that
        takes longer than :data:`INTERRUPT_GRACE`. Shielded, bounded."""
        if not self._sent:
            return
        codex = self._codex
        with trio.move_on_after(INTERRUPT_GRACE, shield=True):
            try:
                while self._reader.turn_id is None and self._finished is None:
                    await self._step(None, None)  # the turn's id is not known yet
                if self._finished is None:
                    params = {"threadId": codex.thread_id, "turnId": self._reader.turn_id}
                    await codex.channel.send(request(codex.next_id(), "turn/interrupt", params))
                while self._finished is None:
                    await self._step(None, None)
                if self._reader.turn_id is not None:
                    codex.past_turns.append(self._reader.turn_id)
                return
            except HarnessError:
                pass  # it is gone, or going
        log.warning("Codex did not confirm the interrupt of thread %s: killing it", codex.thread_id)
        await codex.kill()
