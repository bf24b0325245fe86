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
    Each is a task in the connection's nursery, in its own cancel scope. An
    elicitation whose answer carries content (a form, ``AskUserQuestion``) is a
    form-mode ``elicitation/create`` instead when the client advertised
    ``elicitation.form`` (:mod:`._elicit`): its answer's ``action`` and
    ``content`` resolve the elicitation as they are. At most 32
    are open on a connection at once. One more is an explicit error, never a silent
    drop: it is not asked, the client is told on its tool call (``failed``, saying
    why), the elicitation is answered ``cancel`` (the tool call is refused) and a
    warning is logged. The answer
    resolves the elicitation on the session that owns it: ``allow_*`` accept,
    ``reject_*`` decline, outcome ``cancelled`` cancel; ``*_always`` also gives that
    tool a standing answer in that session (:meth:`~omnigent.Runtime.remember_answer`).
    When the elicitation ends some other way — the turn was cancelled, another client
    answered — the request is cancelled, and the client hears ``$/cancel_request``. A
    client that answers with an error is taken as a refusal (fail closed).

Coalescing: the relay pulls the session's subscription in its own task and takes every
event at hand after the first into one batch (a turn's deltas come from the bus in
batches, one per store write); the deltas of one message in a batch are merged into one
``agent_message_chunk`` (each notification is a write, and on the WebSocket a frame
through Quart and Hypercorn). Nothing waits for more.

Usage: after each turn whose harness reported usage (its terminal event carries
``response.usage``, written after the session's sums), the relay reads the session's
snapshot and sends ``usage_update`` — ``used`` the tokens the last call left in
context, ``size`` the model's window from the configuration's ``context_windows``,
``cost`` the session's cumulative cost when priced. A model with no configured window
gets none: ACP's ``size`` is required, and its RFD says to send nothing rather than
invent one. A session opened with usage already (``session/load``, ``resume``)
gets one at once.

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

from ...core import (
    ClientMcpReport,
    ClientTool,
    Runtime,
    SessionSnapshot,
    Subscription,
    wants_content,
)
from ...errors import OmnigentError
from ...model import ElicitationRequest, Event
from ...rpc import ConnectionClosed, RpcConnection, RpcError
from ...spec import McpServerSpec
from ._elicit import form_params, read_form_answer
from ._handshake import ClientCapabilities
from ._records import config_options
from ._updates import (
    Ask,
    ConfigChanged,
    Translator,
    Update,
    UsageChanged,
    Withdraw,
    usage_update,
)

__all__ = ["MAX_ASKING", "PERMISSION_OPTIONS", "RelayContext", "SessionRelay", "read_outcome"]

log = logging.getLogger("omnigent.transports.acp")

_BATCH = 1024
_CATCH_UP_TIMEOUT = 1.0
# Permission requests one connection keeps open at once; one more is refused, with
# the client told why (see the module docstring).
MAX_ASKING = 32

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

    @property
    def client(self) -> ClientCapabilities:
        """What the client said it can do (``initialize`` came first)."""
        ...

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

    def __init__(
        self, ctx: RelayContext, session_id: str, cwd: str | None, model_override: str | None
    ) -> None:
        self._ctx = ctx
        self.session_id = session_id
        self.cwd = cwd
        self.translator = Translator(cwd, model_override)
        self.relayed_through = 0
        self._progress = trio.Event()
        self._ended = False
        self._scope = trio.CancelScope()
        self.done = trio.Event()
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
        try:
            with self._scope:
                await self._relay(after, client_tools, mcp, task_status)
        finally:
            self._ended = True
            self._progress.set()
            self.done.set()

    def close(self) -> None:
        """Stop relaying (``session/close``): the subscription, tools and MCP servers go."""
        self._scope.cancel()

    async def _relay(
        self,
        after: int,
        client_tools: Mapping[str, ClientTool],
        mcp: tuple[Sequence[McpServerSpec], bool],
        task_status: trio.TaskStatus[None],
    ) -> None:
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
                subscription = runtime.subscribe(
                    self.session_id, after=after, viewer=self._ctx.viewer
                )
                async with subscription as events:
                    task_status.started()
                    await self._pull(events)
        except ConnectionClosed:
            pass
        except OmnigentError as exc:  # deleted meanwhile, runtime closing
            log.info("stopped relaying %s: %s", self.session_id, exc.message)

    async def _pull(self, events: Subscription) -> None:
        """Forward the session's events, each burst as one batch.

        Pulled in this task, no pump: the subscription keeps what arrives while a batch
        is being sent (it is cancel-safe, and bounded: a relay that falls behind is
        caught up from the store), and the next batch takes everything at hand — a
        turn's deltas come from the bus in batches, so they go out in few chunks.
        """
        async for first in events:
            batch = [first]
            while len(batch) < _BATCH and (event := await events.next_ready()) is not None:
                batch.append(event)
            await self._forward(batch)

    async def _forward(self, batch: list[Event]) -> None:
        connection = self._ctx.connection
        for out in self.translator.translate(batch):
            if isinstance(out, Update):
                await connection.notify(
                    "session/update", {"sessionId": self.session_id, "update": out.payload}
                )
            elif isinstance(out, Ask):
                await self.ask(out.request, out.tool_call)
            elif isinstance(out, Withdraw):
                scope = self._ctx.asking.get(out.elicitation_id)
                if scope is not None:
                    scope.cancel()
            elif isinstance(out, ConfigChanged):
                await self._config_changed()
            elif isinstance(out, UsageChanged):
                await self._usage_changed()
        self.relayed_through = batch[-1].event_id
        progress, self._progress = self._progress, trio.Event()
        progress.set()

    async def _config_changed(self) -> None:
        runtime = self._ctx.runtime
        try:
            snapshot = await runtime.get_session(self.session_id)
            options = await config_options(runtime, snapshot, self._ctx.client)
        except OmnigentError as exc:  # deleted meanwhile
            log.info("no config options for %s: %s", self.session_id, exc.message)
            return
        update = {"sessionUpdate": "config_option_update", "configOptions": options}
        await self._ctx.connection.notify(
            "session/update", {"sessionId": self.session_id, "update": update}
        )

    async def _usage_changed(self) -> None:
        try:
            snapshot = await self._ctx.runtime.get_session(self.session_id)
        except OmnigentError as exc:  # deleted meanwhile
            log.info("no usage for %s: %s", self.session_id, exc.message)
            return
        await self.send_usage(snapshot)

    async def send_usage(self, snapshot: SessionSnapshot) -> None:
        """Send the session's ``usage_update`` as ``snapshot`` has it — nothing when no
        call of it reported usage or its model has no configured window."""
        if snapshot.usage.model_calls == 0:
            return
        model = snapshot.model_override or snapshot.model
        window = await self._ctx.runtime.context_window(model)
        if window is None:
            return
        await self._ctx.connection.notify(
            "session/update",
            {"sessionId": self.session_id, "update": usage_update(snapshot.usage, window)},
        )

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

    async def ask(
        self, request: ElicitationRequest, tool_call: dict[str, Any] | None = None
    ) -> None:
        """Ask the client about ``request`` (once per connection), in the background.

        Past the bound of open requests it is refused instead (see the module
        docstring).
        """
        asking = self._ctx.asking
        eid = request.elicitation_id
        if eid in asking:
            return
        if tool_call is None:
            tool_call = self.translator.permission_tool_call(request)
        if len(asking) >= MAX_ASKING:
            await self._refuse(request, tool_call)
            return
        scope = trio.CancelScope()
        asking[eid] = scope
        self._ctx.connection.nursery.start_soon(self._ask, request, tool_call, scope)

    async def _refuse(self, request: ElicitationRequest, tool_call: dict[str, Any]) -> None:
        """Too many requests are open: tell the client, and cancel the elicitation."""
        owner = request.params.target_session_id or self.session_id
        reason = (
            f"not asked: {MAX_ASKING} permission requests are open on this connection "
            "already, so this one was cancelled (answer the open ones, then try again)"
        )
        log.warning("session %s: %s (%s)", owner, reason, request.elicitation_id)
        text = {"type": "content", "content": {"type": "text", "text": f"omnigent {reason}"}}
        call_id = tool_call["toolCallId"]
        if self.translator.is_open_call(call_id):
            update = {"sessionUpdate": "tool_call_update", "toolCallId": call_id}
        else:
            update = {"sessionUpdate": "tool_call", **tool_call}
        update.update(status="failed", content=[text])
        await self._ctx.connection.notify(
            "session/update", {"sessionId": self.session_id, "update": update}
        )
        try:
            await self._ctx.runtime.resolve_elicitation(owner, request.elicitation_id, "cancel")
        except OmnigentError as exc:
            log.info("could not cancel %s: %s", request.elicitation_id, exc.message)

    async def _ask(
        self, request: ElicitationRequest, tool_call: dict[str, Any], scope: trio.CancelScope
    ) -> None:
        owner = request.params.target_session_id or self.session_id
        try:
            with scope:
                if not await self._ctx.may_answer(owner):
                    return
                form = None
                if self._ctx.client.form_elicitation and wants_content(request.params):
                    form = form_params(request, self.session_id, self._call_id(tool_call))
                if form is not None:
                    await self._ask_form(request, owner, form)
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

    def _call_id(self, tool_call: dict[str, Any]) -> str | None:
        """The tool call a form is about, when the client was told of it."""
        call_id = tool_call.get("toolCallId")
        if isinstance(call_id, str) and self.translator.is_open_call(call_id):
            return call_id
        return None

    async def _ask_form(
        self, request: ElicitationRequest, owner: str, form: dict[str, Any]
    ) -> None:
        if owner != self.session_id:
            form["_meta"]["omnigent"]["childSession"] = {
                "id": owner,
                "label": await self._child_label(owner),
            }
        try:
            result = await self._ctx.connection.request("elicitation/create", form)
        except RpcError as error:
            log.warning("the client failed an elicitation: %s", error.message)
            result = None
        action, content = read_form_answer(result)
        await self._answer(request, owner, action, False, content)

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
        self,
        request: ElicitationRequest,
        owner: str,
        action: str,
        always: bool,
        content: dict[str, Any] | None = None,
    ) -> None:
        runtime = self._ctx.runtime
        tool = request.params.tool_name
        if always and tool and not wants_content(request.params):
            try:
                await runtime.remember_answer(owner, tool, action, phase=request.params.phase)
            except OmnigentError as exc:  # too many standing answers, or the session went
                log.info("could not remember the answer to %s: %s", tool, exc.message)
        try:
            await runtime.resolve_elicitation(owner, request.elicitation_id, action, content)
        except OmnigentError as exc:  # the session went away meanwhile
            log.info("could not answer %s: %s", request.elicitation_id, exc.message)
