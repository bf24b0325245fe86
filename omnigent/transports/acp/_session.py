"""One session opened on one ACP connection: its events relayed, its elicitations asked.

A :class:`SessionRelay` runs as one task in the connection's nursery from
``session/new`` or ``session/load`` until the connection ends. It subscribes to the
session's events and turns them (:class:`~._updates.Translator`) into
``session/update`` notifications — during a prompt and between prompts alike (a
background task's wake-up turn, a turn another client started) — and every
elicitation of the session *and of its descendants* (their requests are mirrored onto
this session's stream) into a ``session/request_permission`` request to the client.

The relay is also where the connection's tool implementations live
(:meth:`~omnigent.Runtime.open_client_tools`: the editor's files and terminal) and
the MCP servers the client passed for the session
(:meth:`~omnigent.Runtime.open_client_mcp_servers`), so they are withdrawn — the
servers' processes stopped — the moment the connection ends.

Permission requests
    Each is a task in the connection's nursery, in its own cancel scope. The answer
    resolves the elicitation on the session that owns it: ``allow_*`` accept,
    ``reject_*`` decline, outcome ``cancelled`` cancel; ``*_always`` also gives that
    tool a standing answer in that session (:meth:`~omnigent.Runtime.remember_answer`).
    When the elicitation ends some other way — the turn was cancelled, another client
    answered — the request is cancelled, and the client hears ``$/cancel_request``. A
    client that answers with an error is taken as a refusal (fail closed).

Coalescing: a text delta waits up to 2 ms for the deltas right behind it; whatever
is ready is merged into one ``agent_message_chunk`` (each notification is a write, and
on the WebSocket a frame through Quart and Hypercorn).

Ordering: a prompt's answer waits (:meth:`SessionRelay.wait_relayed`) until the relay
has sent every update up to the turn's terminal event, so the client sees all of a
turn's updates before its ``stopReason``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from contextlib import AsyncExitStack
from typing import Any, Protocol

import trio

from ...core import ClientMcpReport, ClientTool, Runtime, wants_content
from ...errors import OmnigentError
from ...model import ElicitationRequest, Event, OutputTextDelta
from ...rpc import ConnectionClosed, RpcConnection, RpcError
from ...spec import McpServerSpec
from ._updates import Ask, Translator, Update, Withdraw

__all__ = ["PERMISSION_OPTIONS", "RelayContext", "SessionRelay", "read_outcome"]

log = logging.getLogger("omnigent.transports.acp")

_BUFFER = 1024
_BATCH = 1024
_CATCH_UP_TIMEOUT = 1.0
# How long a text delta waits for the ones behind it (as the SSE relay's window).
_WINDOW = 0.002
# Permission requests one connection keeps open at once; beyond that an elicitation
# waits for another client (or for a request to end) rather than piling up.
_MAX_ASKING = 32

PERMISSION_OPTIONS: tuple[tuple[str, str], ...] = (
    ("allow_once", "Allow"),
    ("allow_always", "Always allow"),
    ("reject_once", "Reject"),
    ("reject_always", "Always reject"),
)
_ACTIONS = {
    "allow_once": ("accept", False),
    "allow_always": ("accept", True),
    "reject_once": ("decline", False),
    "reject_always": ("decline", True),
}


class RelayContext(Protocol):
    """What a relay needs from its connection's agent."""

    runtime: Runtime
    # Elicitation id -> the scope of the permission request asking about it.
    asking: dict[str, trio.CancelScope]
    # Whose access limits what the relay shows about other sessions (None: nobody's).
    viewer: str | None

    @property
    def connection(self) -> RpcConnection: ...

    async def may_answer(self, session_id: str) -> bool:
        """Whether this connection's user may resolve the session's elicitations."""
        ...


def read_outcome(result: Any) -> tuple[str, bool]:
    """``(action, always)`` for a ``session/request_permission`` result.

    Anything but a known option (or ``cancelled``) is a refusal: fail closed.
    """
    outcome = result.get("outcome") if isinstance(result, dict) else None
    if isinstance(outcome, dict):
        if outcome.get("outcome") == "cancelled":
            return "cancel", False
        option = outcome.get("optionId")
        if outcome.get("outcome") == "selected" and option in _ACTIONS:
            return _ACTIONS[option]
    log.warning("a permission answer omnigent does not understand (declined): %r", result)
    return "decline", False


class SessionRelay:
    """Relays one session to one connection; see the module docstring."""

    def __init__(self, ctx: RelayContext, session_id: str, cwd: str | None) -> None:
        self._ctx = ctx
        self.session_id = session_id
        self.cwd = cwd
        self.translator = Translator(cwd)
        self.relayed_through = 0
        self._progress = trio.Event()
        self._ended = False
        # What became of the client's MCP servers (None: it passed none on).
        self.mcp_report: ClientMcpReport | None = None

    async def run(
        self,
        after: int,
        client_tools: Mapping[str, ClientTool],
        mcp: tuple[Sequence[McpServerSpec], bool] = ((), False),
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Relay events with ``event_id > after`` until cancelled (or the session ends).

        ``mcp`` is the client's MCP servers and whether they come from a remote
        client (``from_client``); started once they are connected (or failed).

        Cancellation: the subscription and the client tools are released, and the
        MCP servers stopped.
        """
        self.relayed_through = after
        send, receive = trio.open_memory_channel[Event](_BUFFER)
        try:
            async with AsyncExitStack() as stack:
                runtime = self._ctx.runtime
                if client_tools:
                    await stack.enter_async_context(
                        runtime.open_client_tools(self.session_id, client_tools)
                    )
                servers, from_client = mcp
                if servers:
                    self.mcp_report = await stack.enter_async_context(
                        runtime.open_client_mcp_servers(
                            self.session_id, servers, from_client=from_client
                        )
                    )
                async with trio.open_nursery() as nursery:
                    # A pump: the subscription is read in its own task, so events keep
                    # arriving in the bounded channel while a chunk is being forwarded
                    # (or the window waits), and the forwarder drains what is at hand.
                    nursery.start_soon(self._pump, after, send)
                    task_status.started()
                    async with receive:
                        async for first in receive:
                            if isinstance(first, OutputTextDelta):
                                # Text streams in many small deltas: let the ones right
                                # behind it arrive, and send them as one chunk.
                                await trio.sleep(_WINDOW)
                            await self._forward(self._drain(first, receive))
        except ConnectionClosed:
            pass
        finally:
            self._ended = True
            self._progress.set()

    async def _pump(self, after: int, send: trio.MemorySendChannel[Event]) -> None:
        async with send:
            try:
                subscription = self._ctx.runtime.subscribe(
                    self.session_id, after=after, viewer=self._ctx.viewer
                )
                async with subscription as events:
                    async for event in events:
                        await send.send(event)
            except OmnigentError as exc:  # deleted meanwhile, runtime closing
                log.info("stopped relaying %s: %s", self.session_id, exc.message)

    @staticmethod
    def _drain(first: Event, receive: trio.MemoryReceiveChannel[Event]) -> list[Event]:
        batch = [first]
        while len(batch) < _BATCH:
            try:
                batch.append(receive.receive_nowait())
            except (trio.WouldBlock, trio.EndOfChannel):
                break
        return batch

    async def _forward(self, batch: list[Event]) -> None:
        connection = self._ctx.connection
        for out in self.translator.translate(batch):
            if isinstance(out, Update):
                await connection.notify(
                    "session/update", {"sessionId": self.session_id, "update": out.payload}
                )
            elif isinstance(out, Ask):
                self.ask(out.request, out.tool_call)
            elif isinstance(out, Withdraw):
                scope = self._ctx.asking.get(out.elicitation_id)
                if scope is not None:
                    scope.cancel()
        self.relayed_through = batch[-1].event_id
        progress, self._progress = self._progress, trio.Event()
        progress.set()

    async def wait_relayed(self, event_id: int) -> None:
        """Return once every event up to ``event_id`` was relayed (or the relay ended)."""
        while self.relayed_through < event_id and not self._ended:
            await self._progress.wait()

    async def catch_up(self) -> None:
        """Wait until the events published so far were relayed (at most a second).

        A tool the client runs calls this first, so the client has been told about
        the tool call before it is asked to read a file or open a terminal for it.
        """
        with trio.move_on_after(_CATCH_UP_TIMEOUT):
            await self.wait_relayed(await self._ctx.runtime.last_event_id(self.session_id))

    # -- permission requests ---------------------------------------------------------

    def ask(self, request: ElicitationRequest, tool_call: dict[str, Any] | None = None) -> None:
        """Ask the client about ``request`` (once per connection), in the background."""
        asking = self._ctx.asking
        eid = request.elicitation_id
        if eid in asking:
            return
        if len(asking) >= _MAX_ASKING:
            log.warning("%d permission requests are open already; not asking %s", len(asking), eid)
            return
        scope = trio.CancelScope()
        asking[eid] = scope
        if tool_call is None:
            tool_call = self.translator.permission_tool_call(request)
        self._ctx.connection.nursery.start_soon(self._ask, request, tool_call, scope)

    async def _ask(
        self, request: ElicitationRequest, tool_call: dict[str, Any], scope: trio.CancelScope
    ) -> None:
        owner = request.params.target_session_id or self.session_id
        try:
            with scope:
                if not await self._ctx.may_answer(owner):
                    return
                params = await self._permission_params(request, tool_call, owner)
                try:
                    result = await self._ctx.connection.request(
                        "session/request_permission", params
                    )
                except RpcError as error:
                    log.warning("the client failed a permission request: %s", error.message)
                    result = None
                action, always = read_outcome(result)
                await self._answer(request, owner, action, always)
        except ConnectionClosed:
            pass
        finally:
            del self._ctx.asking[request.elicitation_id]

    async def _permission_params(
        self, request: ElicitationRequest, tool_call: dict[str, Any], owner: str
    ) -> dict[str, Any]:
        params = request.params
        tool = params.tool_name
        # "Always" means a standing answer for that tool: none without a tool, and
        # none where the answer carries content (questions, forms).
        standing = tool is not None and not wants_content(params)
        options = [
            {
                "optionId": kind,
                "name": f"{label} {tool}" if standing and "always" in kind else label,
                "kind": kind,
            }
            for kind, label in PERMISSION_OPTIONS
            if standing or "always" not in kind
        ]
        meta: dict[str, Any] = {
            "elicitationId": request.elicitation_id,
            "sessionId": owner,
            "message": params.message,
            "phase": params.phase,
        }
        if params.policy_name is not None:
            meta["policyName"] = params.policy_name
        if owner != self.session_id:
            label = await self._child_label(owner)
            meta["childSession"] = {"id": owner, "label": label}
            tool_call = {**tool_call, "title": f"[{label}] {tool_call.get('title', '')}"}
        return {
            "sessionId": self.session_id,
            "toolCall": tool_call,
            "options": options,
            "_meta": {"omnigent": meta},
        }

    async def _child_label(self, session_id: str) -> str:
        try:
            child = await self._ctx.runtime.get_session(session_id)
        except OmnigentError:
            return session_id
        return child.title or f"{child.agent_name} {session_id}"

    async def _answer(
        self, request: ElicitationRequest, owner: str, action: str, always: bool
    ) -> None:
        runtime = self._ctx.runtime
        tool = request.params.tool_name
        if always and tool and not wants_content(request.params):
            try:
                await runtime.remember_answer(owner, tool, action, phase=request.params.phase)
            except OmnigentError as exc:  # too many standing answers, or the session went
                log.info("could not remember the answer to %s: %s", tool, exc.message)
        try:
            await runtime.resolve_elicitation(owner, request.elicitation_id, action)
        except OmnigentError as exc:  # the session went away meanwhile
            log.info("could not answer %s: %s", request.elicitation_id, exc.message)
