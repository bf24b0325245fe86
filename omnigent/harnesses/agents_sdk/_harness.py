"""The ``openai-agents`` harness: an OpenAI Agents SDK agent as a session's agent loop.

The agent (``executor.config.agent``, ``package.module:attr``, operator-allowed) runs
in a child process of its own — asyncio lives there, never in omnigent's Trio
process — spawned by the runtime's process manager in its own process group, in the
session's working directory, and kept for later turns (:mod:`._child`; the wire is
in :mod:`._protocol`). Each turn sends the whole conversation, so the child keeps no
state: a new process (after a reap, a crash, a restart) continues where the last
stopped.

What the child reports becomes the session's items: streamed text, the agent's
function tools and handoffs as ``function_call`` / ``function_call_output``. Before
any of its function tools runs, the child asks, and the session's policies decide:
ALLOW runs it, DENY refuses it (the model is told), an ASK asks the person — and a
tool whose ``needs_approval`` holds is Codex-style: the policies decide, and without
an opinion the person is asked. omnigent's own tools are offered to every agent of
the run; their calls run here, in the turn, like any tool call.

Interrupt: the child cancels the run (``interrupt``), bounded by
:data:`INTERRUPT_GRACE`; a child that does not confirm is killed with its group.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import trio

from ...errors import HarnessError
from ...model import elicitation_params
from ...processes import ManagedProcess, base_environment
from ..base import HarnessEnv, TurnContext, TurnRequest
from ..bridge import offered
from ..native import (
    AGENTS_SDK,
    ChannelClosed,
    Finished,
    ItemRelay,
    NativeHarness,
    NativeProcess,
    drive_turn,
)
from ._protocol import (
    CheckRequest,
    ChildReader,
    Fatal,
    Ready,
    ToolRequest,
    child_argv,
    child_environment,
    sdk_input,
    turn_message,
)

__all__ = ["INTERRUPT_GRACE", "AgentsHarness"]

INTERRUPT_GRACE = 3.0
"""Seconds the child gets to confirm an interrupt before its group is killed."""
_MAX_PENDING = 32


class _Child(NativeProcess):
    """One live child process (kept on it for later turns)."""

    def __init__(self, process: ManagedProcess) -> None:
        super().__init__(process, "the OpenAI Agents SDK agent")
        self.agent = ""


class AgentsHarness(NativeHarness):
    """The runtime's side of one session's agent (see the module docstring)."""

    def __init__(self, env: HarnessEnv) -> None:
        super().__init__(env, AGENTS_SDK)
        api = env.config.options.get("api")
        self._api = api if api == "responses" else "chat_completions"

    async def run_turn(self, request: TurnRequest, ctx: TurnContext) -> None:
        tools = offered(request.tools)
        names = frozenset(tool.name for tool in tools)
        child = await self._live(_Child, frozenset()) or await self._connect(ctx)
        async with ItemRelay(ctx, bridged=names.__contains__) as relay:
            turn = _Turn(child, request, ctx, relay, self._harness)
            message = turn_message(
                sdk_input(request.instructions, (*request.history, *request.input)),
                request.model,
                tools,
            )
            await drive_turn(child, lambda: turn.run(message), turn.interrupt)

    async def _connect(self, ctx: TurnContext) -> _Child:
        self._check_installed()
        agent = self._env.config.agent
        if agent is None:
            raise HarnessError(f"harness {self._harness!r} needs executor.config.agent")
        endpoint = self._endpoint(
            base_url_variable="OPENAI_BASE_URL", api_key_variable="OPENAI_API_KEY"
        )
        environment = child_environment(
            base_environment(),
            agent=agent,
            endpoint=endpoint,
            api=self._api,
            python_path=sys.path,
            extra=self._env.config.env,
        )
        async with ctx.launching():
            process = await self._spawn(
                self._binary(),
                child_argv(),
                environment,
                endpoint=endpoint.base_url or "https://api.openai.com/v1",
            )
            child = _Child(process)
            process.owner_state = child
            try:
                with trio.fail_after(self._startup_timeout):
                    child.agent = await _wait_ready(child)
            except trio.TooSlowError:
                await child.kill()
                raise HarnessError(
                    f"the agent did not start within {self._startup_timeout:g} s"
                ) from None
            except BaseException:
                await child.kill()
                raise
        return child


async def _wait_ready(child: _Child) -> str:
    """The agent's name, once the child loaded it.

    Raises:
        HarnessError: the child could not load it (its reason), or exited.
    """
    reader = ChildReader()
    while True:
        try:
            batch = await child.channel.receive_batch()
        except ChannelClosed:
            raise await child.died() from None
        for message in reader.feed(batch):
            if isinstance(message, Ready):
                return message.agent
            if isinstance(message, Fatal):
                await child.wait_exit()
                raise HarnessError(message.error)


class _Turn:
    """One turn's conversation with the child."""

    def __init__(
        self,
        child: _Child,
        request: TurnRequest,
        ctx: TurnContext,
        relay: ItemRelay,
        harness: str,
    ) -> None:
        self._child = child
        self._request = request
        self._ctx = ctx
        self._relay = relay
        self._harness = harness
        self._reader = ChildReader()
        self._finished: Finished | None = None
        self._sent = False
        self._pending = 0

    async def run(self, message: dict[str, Any]) -> None:
        async with trio.open_nursery() as nursery:
            self._sent = True
            await self._child.channel.send(message)
            while self._finished is None:
                try:
                    batch = await self._child.channel.receive_batch()
                except ChannelClosed:
                    raise await self._child.died() from None
                for action in self._reader.feed(batch):
                    await self._handle(action, nursery)
            nursery.cancel_scope.cancel()  # nothing should be pending at the end
        if self._finished.error is not None:
            self._ctx.report_response_status("failed", self._finished.error)

    async def _handle(self, action: Any, nursery: trio.Nursery) -> None:
        if isinstance(action, Finished):
            self._finished = action
        elif isinstance(action, ToolRequest | CheckRequest):
            if self._pending >= _MAX_PENDING:
                await self._answer(action, "Error: too many calls at once")
                return
            self._pending += 1
            nursery.start_soon(self._serve, action)
        elif not isinstance(action, Ready | Fatal):
            await self._relay.apply(action)

    async def _serve(self, request: ToolRequest | CheckRequest) -> None:
        try:
            if isinstance(request, ToolRequest):
                await self._relay.end_message()  # the model spoke before it called
                output = await self._ctx.call_tool(
                    request.name, request.arguments, call_id=request.call_id or None
                )
                await self._answer(request, output)
            else:
                allow, reason = await self._check(request)
                answer = {"type": "verdict", "id": request.request_id}
                await self._child.channel.send({**answer, "allow": allow, "reason": reason})
        finally:
            self._pending -= 1

    async def _answer(self, request: ToolRequest | CheckRequest, output: str) -> None:
        if isinstance(request, CheckRequest):
            answer = {"type": "verdict", "id": request.request_id, "allow": False}
            await self._child.channel.send({**answer, "reason": output})
        else:
            result = {"type": "tool_result", "id": request.request_id, "output": output}
            await self._child.channel.send(result)

    async def _check(self, request: CheckRequest) -> tuple[bool, str]:
        """The session's verdict on one of the agent's own tool calls (see the module
        docstring for how ``needs_approval`` is honoured)."""
        try:
            arguments = json.loads(request.arguments) if request.arguments else {}
        except ValueError:
            arguments = {}
        tool_input = arguments if isinstance(arguments, dict) else {"arguments": arguments}
        event = {
            "type": "PHASE_TOOL_CALL",
            "data": {"tool_name": request.name, "tool_input": tool_input},
            "context": {"harness": self._harness, "tool_use_id": request.call_id},
        }
        ask = None
        if request.needs_approval:
            message = f"{self._child.agent or 'The agent'} wants to use {request.name}"
            ask = elicitation_params(
                message, "tool_call", tool_name=request.name, tool_input=tool_input
            )
        verdict = await self._ctx.evaluate_policy(event, ask=ask)
        result, reason = verdict.get("result"), verdict.get("reason")
        if result == "POLICY_ACTION_DENY":
            return False, reason if isinstance(reason, str) and reason else "denied by policy"
        if result == "POLICY_ACTION_ALLOW" or ask is None:
            return True, ""
        action, _content = await self._ctx.elicit(ask)  # the agent asks; nobody decided
        if action == "accept":
            return True, ""
        return False, f"The user {'declined' if action == 'decline' else 'cancelled'} this call."

    async def interrupt(self) -> None:
        """The child cancels its run; kill the group if it does not confirm within
        :data:`INTERRUPT_GRACE`. Shielded, bounded."""
        if not self._sent:
            return
        child = self._child
        with trio.move_on_after(INTERRUPT_GRACE, shield=True):
            try:
                await child.channel.send({"type": "interrupt"})
                while True:
                    for action in self._reader.feed(await child.channel.receive_batch()):
                        if isinstance(action, Finished):
                            return
            except (ChannelClosed, HarnessError):
                pass  # it is gone, or going
        await child.kill()
