"""The ``claude-code`` harness: Claude Code as a session's agent loop.

One Claude Code process per conversation (``docs/harnesses.md``, "Claude Code"),
spawned by the runtime's process manager in its own process group, in the session's
working directory, and kept for later turns — also by the next harness instance after
the session went idle. Its session id is kept on the omnigent session
(:class:`~omnigent.harnesses.base.HarnessState` key ``session_id``): a new process —
after a reap, a crash, a server restart — continues the conversation with
``--resume``; a conversation Claude Code no longer knows starts afresh, told the
session's earlier messages.

Every tool call reaches omnigent first through a ``PreToolUse`` hook callback: the
session's policies ALLOW or DENY it (an ASK asks the person), and with no opinion
Claude Code's own rules apply — what it then asks about (``can_use_tool``,
``AskUserQuestion`` included) becomes an elicitation on the session.

Interrupt: Claude Code's own control ``interrupt``, then the turn's end is read
(bounded by :data:`INTERRUPT_GRACE`); a process that has not ended the turn by then is
killed with its group. The pure half is :mod:`._protocol`.
"""

from __future__ import annotations

import functools
import uuid
from typing import Any

import trio

from ..._version import __version__
from ...errors import HarnessError
from ...processes import ManagedProcess, base_environment
from ..base import HarnessEnv, TurnContext, TurnRequest
from ..bridge import BridgeAddress, TurnTools, offered, serve_bridge, shim_command
from ..native import (
    CLAUDE_CLI,
    CLAUDE_MODELS,
    ChannelClosed,
    Finished,
    ItemRelay,
    NativeHarness,
    NativeProcess,
    drive_turn,
    preamble,
)
from ._protocol import (
    DEFAULT_BASE_URL,
    HOOK_ID,
    always_denied,
    bridged_hook,
    bridged_name,
    claude_argv,
    claude_environment,
    control_error,
    control_request,
    control_success,
    hook_answer,
    hook_event,
    initialize_body,
    mcp_config,
    permission_answer,
    permission_params,
    user_message,
)
from ._stream import (
    ControlCancel,
    ControlRequest,
    ControlResponse,
    SessionStarted,
    StreamReader,
)

__all__ = ["INTERRUPT_GRACE", "ClaudeCodeHarness"]

STATE_KEY = "session_id"
INTERRUPT_GRACE = 3.0
"""Seconds Claude Code gets to end an interrupted turn before its group is killed."""
_CONTROL_TIMEOUT = 10.0
_MAX_PENDING = 32
_NO_CONVERSATION = "No conversation found"
_BRIDGED_REASON = "omnigent's tool: the session's policies decide as omnigent runs it"
_NOT_LOGGED_IN = "Not logged in"
_KEY_HINT = (
    "omnigent gave it no key: set ANTHROPIC_API_KEY or executor.config.api_key"
    " (or a provider's api_key_env in config.yaml)"
)


class _Claude(NativeProcess):
    """One live Claude Code process and what omnigent knows about it (kept on it)."""

    def __init__(
        self,
        process: ManagedProcess,
        model: str | None,
        bridge: BridgeAddress,
        bridged: frozenset[str],
    ) -> None:
        super().__init__(process, "Claude Code", bridge=bridge, bridged=bridged)
        self.model = model
        self.keyless = False  # started without a model key

    def next_id(self) -> str:
        return f"omnigent_{next(self._ids)}"

    async def call(self, body: dict[str, Any]) -> Any:
        """Send a control request and read until its answer (nothing else is running).

        Raises:
            ChannelClosed: the process went away. HarnessError: it refused.
        """
        request_id = self.next_id()
        await self.channel.send(control_request(request_id, body))
        reader = StreamReader()
        while True:
            for message in reader.feed(await self.channel.receive_batch()):
                if isinstance(message, ControlResponse) and message.request_id == request_id:
                    if not message.ok:
                        raise HarnessError(f"Claude Code refused {body['subtype']}: {message.body}")
                    return message.body
                if isinstance(message, ControlRequest):
                    await self.channel.send(control_error(message.request_id, "not in a turn"))


class ClaudeCodeHarness(NativeHarness):
    """The runtime's side of one session's Claude Code (see the module docstring)."""

    def __init__(self, env: HarnessEnv) -> None:
        super().__init__(env, CLAUDE_CLI)

    async def run_turn(self, request: TurnRequest, ctx: TurnContext) -> None:
        if request.model and (refusal := CLAUDE_MODELS.refusal(self._harness, request.model)):
            raise HarnessError(refusal)
        bridged = frozenset(tool.name for tool in offered(request.tools))
        live = await self._live(_Claude, bridged)
        address = await self._bridge_address(live)
        async with ItemRelay(ctx, bridged=bridged_name) as relay:
            tools = TurnTools(
                ctx, request.tools, harness=self._harness, before_call=relay.end_message
            )
            async with serve_bridge(address, tools):
                claude = live or await self._connect(request, ctx, address, bridged)
                turn = _Turn(claude, request, ctx, self._env, relay)

                async def run() -> None:
                    if request.model and request.model != claude.model:
                        await self._set_model(claude, request.model)
                    await turn.run()

                await drive_turn(claude, run, turn.interrupt)

    async def _set_model(self, claude: _Claude, model: str) -> None:
        """Switch the running process to ``model`` (a new ``model_override``).

        Raises:
            HarnessError: Claude Code refused it, went away, or took over 10 s.
        """
        try:
            with trio.fail_after(_CONTROL_TIMEOUT):
                await claude.call({"subtype": "set_model", "model": model})
        except trio.TooSlowError:
            raise HarnessError(f"Claude Code did not switch to model {model!r}") from None
        except ChannelClosed:
            raise HarnessError(f"Claude Code {claude.process.describe_exit()}") from None
        claude.model = model

    # -- the process -------------------------------------------------------------------

    async def _connect(
        self,
        request: TurnRequest,
        ctx: TurnContext,
        address: BridgeAddress,
        bridged: frozenset[str],
    ) -> _Claude:
        self._check_installed()
        async with ctx.launching():
            stored = await self._env.state.get(STATE_KEY)
            start = functools.partial(self._start, request, address=address, bridged=bridged)
            claude = await start(stored, resume=True) if stored else None
            if claude is None:
                conversation = str(uuid.uuid4())
                claude = await start(conversation, resume=False)
                assert claude is not None
                claude.fresh = True
                await self._env.state.set(STATE_KEY, conversation)
        return claude

    async def _start(
        self,
        request: TurnRequest,
        conversation: str,
        *,
        resume: bool,
        address: BridgeAddress,
        bridged: frozenset[str],
    ) -> _Claude | None:
        """Spawn and initialize a process; ``None`` if Claude Code has no such
        conversation to resume.

        Raises:
            HarnessError: it could not be started, or exited or stalled while starting.
        """
        binary = self._binary()
        endpoint = self._endpoint(
            base_url_variable="ANTHROPIC_BASE_URL", api_key_variable="ANTHROPIC_API_KEY"
        )
        config_dir = await self._data_dir("config")
        servers = mcp_config(shim_command(address, __version__)) if bridged else None
        argv = claude_argv(
            str(binary),
            conversation=conversation,
            resume=resume,
            model=request.model,
            instructions=request.instructions,
            mcp_config=servers,
            disallowed=always_denied(self._env.spec.policies),
        )
        environment = claude_environment(
            base_environment(),
            config_dir=config_dir,
            endpoint=endpoint,
            extra=self._env.config.env,
            bridge_token=address.token if bridged else None,
        )
        process = await self._spawn(
            binary,
            argv,
            environment,
            private=(config_dir,),
            endpoint=endpoint.base_url or DEFAULT_BASE_URL,
        )
        claude = _Claude(process, request.model, address, bridged)
        claude.keyless = endpoint.api_key is None
        process.owner_state = claude
        try:
            with trio.fail_after(self._startup_timeout):
                await claude.call(initialize_body())
        except ChannelClosed:
            await claude.wait_exit()
            if resume and _NO_CONVERSATION in process.stderr_tail():
                return None
            raise HarnessError(
                f"Claude Code exited before it was ready: {process.describe_exit()}"
            ) from None
        except trio.TooSlowError:
            await claude.kill()
            raise HarnessError(
                f"Claude Code did not start within {self._startup_timeout:g} s"
            ) from None
        except BaseException:
            await claude.kill()
            raise
        return claude


class _Turn:
    """One turn's conversation with the process."""

    def __init__(
        self,
        claude: _Claude,
        request: TurnRequest,
        ctx: TurnContext,
        env: HarnessEnv,
        relay: ItemRelay,
    ) -> None:
        self._claude = claude
        self._request = request
        self._ctx = ctx
        self._env = env
        self._relay = relay
        self._reader = StreamReader()
        self._pending: dict[str, trio.CancelScope] = {}
        self._finished: Finished | None = None
        self._sent = False

    async def run(self) -> None:
        claude = self._claude
        earlier = preamble(self._request.history) if claude.fresh else None
        claude.fresh = False
        relay = self._relay
        async with trio.open_nursery() as nursery:
            self._sent = True
            await claude.channel.send(user_message(self._request.input, earlier))
            while self._finished is None:
                try:
                    batch = await claude.channel.receive_batch()
                except ChannelClosed:
                    raise await claude.died() from None
                for message in self._reader.feed(batch):
                    await self._handle(message, relay, nursery)
            nursery.cancel_scope.cancel()  # nothing should be pending after a result
        error = self._finished.error
        if error is not None:
            if claude.keyless and _NOT_LOGGED_IN in error:
                error += f" ({_KEY_HINT})"
            self._ctx.report_response_status("failed", error)

    async def _handle(self, message: Any, relay: ItemRelay, nursery: trio.Nursery) -> None:
        if isinstance(message, Finished):
            self._finished = message
        elif isinstance(message, ControlRequest):
            await self._control(message, nursery)
        elif isinstance(message, ControlCancel):
            scope = self._pending.get(message.request_id)
            if scope is not None:
                scope.cancel()  # withdraws its elicitation
        elif isinstance(message, SessionStarted):
            if message.session_id != await self._env.state.get(STATE_KEY):
                await self._env.state.set(STATE_KEY, message.session_id)
        elif not isinstance(message, ControlResponse):
            await relay.apply(message)

    async def _control(self, request: ControlRequest, nursery: trio.Nursery) -> None:
        channel = self._claude.channel
        known = request.subtype == "can_use_tool" or (
            request.subtype == "hook_callback" and request.body.get("callback_id") == HOOK_ID
        )
        if not known:
            message = f"omnigent does not handle {request.subtype!r} requests"
            await channel.send(control_error(request.request_id, message))
        elif len(self._pending) >= _MAX_PENDING:
            await channel.send(control_error(request.request_id, "too many open requests"))
        else:
            scope = trio.CancelScope()
            self._pending[request.request_id] = scope
            nursery.start_soon(self._answer, request, scope)

    async def _answer(self, request: ControlRequest, scope: trio.CancelScope) -> None:
        try:
            with scope:
                if request.subtype == "hook_callback":
                    response = await self._pre_tool_use(request.body)
                else:
                    response = await self._permission(request.body)
                await self._claude.channel.send(control_success(request.request_id, response))
        finally:
            self._pending.pop(request.request_id, None)

    async def _pre_tool_use(self, body: Any) -> dict[str, Any]:
        if bridged_hook(body):
            return hook_answer({"result": "POLICY_ACTION_ALLOW", "reason": _BRIDGED_REASON})
        event = hook_event(body)
        if event is None:
            return hook_answer({"result": "POLICY_ACTION_DENY", "reason": "malformed hook call"})
        return hook_answer(await self._ctx.evaluate_policy(event))

    async def _permission(self, body: Any) -> dict[str, Any]:
        params = permission_params(body)
        if params is None:
            return {"behavior": "deny", "message": "omnigent could not read this request"}
        action, content = await self._ctx.elicit(params)
        return permission_answer(action, content, body)

    async def interrupt(self) -> None:
        """Claude Code's own interrupt, then read to the end of the turn; kill the group
        if that takes longer than :data:`INTERRUPT_GRACE`. Shielded, bounded."""
        if not self._sent:
            return
        claude = self._claude
        with trio.move_on_after(INTERRUPT_GRACE, shield=True):
            try:
                interrupt = control_request(claude.next_id(), {"subtype": "interrupt"})
                await claude.channel.send(interrupt)
                while True:
                    for message in self._reader.feed(await claude.channel.receive_batch()):
                        if isinstance(message, Finished):
                            return
                        if isinstance(message, ControlRequest):
                            await claude.channel.send(
                                control_error(message.request_id, "the turn was interrupted")
                            )
            except (ChannelClosed, HarnessError):
                pass  # it is gone, or going: nothing to wait for
        await claude.kill()
