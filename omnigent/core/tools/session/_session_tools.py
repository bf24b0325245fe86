"""A session's tools: which are offered, and one call through the policies.

:class:`SessionTools` is built once per session actor. It offers the built-in
``sys_*`` tools the spec grants (the OS tools always; the three async tools unless
``async_enabled: false``; the orchestration tools of :mod:`._orchestration`; the five
terminal tools when it declares ``terminals``), the spec's own Python tools
(``tools.python``, :mod:`._python_tools`) and every tool registered on the runtime (the
built-ins' adapters are in :mod:`._builtin`,
where they act in :mod:`._place`). :meth:`SessionTools.call`
is the one path every tool call takes, from a turn or a background task:

1. decode the arguments (an object, or JSON text);
2. ``PHASE_TOOL_CALL`` policies: DENY returns ``Error: denied by policy …`` and the tool
   never runs; ASK parks an elicitation and runs the tool only on ``accept``;
3. run the tool — or the implementation a client supplies for this session
   (:mod:`._client_tools`) — a failure is an ``Error: …`` string;
4. ``PHASE_TOOL_RESULT`` policies may replace the output, or withhold it;
5. after a write, edit, shell command or terminal input,
   ``session.changed_files.invalidated`` is published at most once per throttle
   window (leading edge).

What every session's tools stand on — the registry, the store and bus, where tools
act, the client-supplied tools and MCP servers, and the :class:`~._control.SessionControl`
the orchestration tools act through — is built once by the runtime, in one frozen
:class:`~.._services.ToolServices`.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
import trio

from ....harnesses.base import ToolSchema
from ....model import (
    ChangedFilesInvalidated,
    ElicitationParams,
    ElicitationRequest,
    InboxUpdated,
    elicitation_params,
)
from ....processes import TrackedGroups
from ....spec import AgentSpec, SandboxSpec
from ....tools import ToolError
from ....tools import os as os_tools
from ....tools import terminals as terminal_tools
from ...work import BackgroundTasks, ChildWork, SessionTerminals, format_inbox, vet_inbox
from .._client_tools import run_client_tool
from .._place import sandbox_policy, working_directory
from .._policies import (
    PHASE_TOOL_CALL,
    PHASE_TOOL_RESULT,
    PolicyEngine,
    PolicyEvent,
    Verdict,
    parse_policy_event,
)
from .._registry import Tool, decode_arguments
from .._runners import ToolServers, Workplace
from .._services import ToolServices
from ._agent_schemas import AGENT_TOOL_SCHEMAS, send_schema
from ._builtin import (
    ASYNC_TOOLS,
    SESSION_TOOL_SCHEMAS,
    Builtin,
    call_async,
    cancel_async,
    orchestrated,
    os_tool,
    read_inbox,
    terminal_tool,
)
from ._orchestration import TOOLS, granted_tools

if TYPE_CHECKING:
    from ....mcp import McpServers
    from ....processes.sandbox import SandboxPolicy

__all__ = ["ASYNC_TOOLS", "CHANGED_FILES_WINDOW", "SessionTools"]

CHANGED_FILES_WINDOW = 2.0
_DENIED = "Error: denied by policy "


def _outcome_of(output: str) -> str:
    """A tool call's outcome as the metrics count it: ok, error, or denied.

    An error is an ``Error: …`` string, or — the session and agent tools answer as the
    original omnigent does — a JSON object whose first key is ``"error"``.
    """
    if output.startswith(_DENIED):
        return "denied"
    return "error" if output.startswith(("Error:", '{"error"')) else "ok"


OnAsk = Callable[[ElicitationRequest | None], None]


class SessionTools:
    """The tools of one session. Made by the runtime for each session actor.

    Args:
        session_id: the session.
        spec: the spec it runs (which tools it is offered).
        services: what every session's tools stand on.
        policies: the session's policy engine.
        tasks: its background tasks (``sys_call_async``, terminals).
        work: its dispatches to children (None for tools made outside an actor).
        groups: where its shells' process groups are recorded.
        session_cwd: the directory its client works in, if it named one.
        inherited_sandbox: the nearest sandboxed ancestor session's sandbox, for a spec
            without one of its own (see :meth:`sandbox`).
        python_tools: the spec's own Python tools (``tools.python``), by name.
        workplace: where its OS tools run when not here (a runner's, for a session
            bound to one): no path of it is used on this machine.
    """

    def __init__(
        self,
        *,
        session_id: str,
        spec: AgentSpec,
        services: ToolServices,
        policies: PolicyEngine,
        tasks: BackgroundTasks,
        work: ChildWork | None = None,
        groups: TrackedGroups | None = None,
        session_cwd: str | None = None,
        inherited_sandbox: SandboxSpec | None = None,
        python_tools: Mapping[str, Tool] | None = None,
        workplace: Workplace | None = None,
    ) -> None:
        self.session_id = session_id
        self.workplace = workplace
        self.spec = spec
        self._services = services
        # The spec's own Python tools (tools.python), by name: this agent's alone.
        self._python = dict(python_tools or {})
        self._session_cwd = Path(session_cwd) if session_cwd is not None else None
        self._policies = policies
        self._tasks = tasks
        # An ancestor's sandbox, for a spec without one of its own (see sandbox()).
        self._inherited_sandbox = inherited_sandbox
        # The session's dispatches to its children, and what the orchestration
        # tools act through (both absent for tools made outside an actor).
        self.work = work
        self.control = services.control
        self.claims = services.claims
        self.groups = groups
        self.trees = None if services.trees is None else services.trees.for_session(session_id)
        self._registry = services.registry
        self._elicitations = services.elicitations
        self._store = services.store
        self._bus = services.bus
        self._cwd: Path | None = None
        self._sandbox: tuple[SandboxPolicy | None] | None = None
        self._last_change = -math.inf
        self._builtins: dict[str, tuple[ToolSchema, Builtin]] = {}
        self._hidden: set[str] = set()  # built-ins answered by name but not offered
        # The spec's MCP servers: here, except a runner-bound session's stdio ones,
        # which its runner runs (in its workspace).
        self._mcp: list[ToolServers] = []
        remote = workplace is not None
        local = tuple(s for s in spec.mcp_servers if not (remote and s.command))
        if local:
            from ....mcp import McpServers  # the optional `mcp` extra

            self._mcp.append(
                McpServers(
                    local,
                    ask=self._ask_person,
                    cwd=self.cwd,
                    sandbox=self.sandbox,
                    guard=services.mcp_guard,
                )
            )
        if workplace is not None and len(local) < len(spec.mcp_servers):
            self._mcp.append(workplace.mcp_servers(self._ask_person))
        self._drain_lock = trio.Lock()
        for name, schema in os_tools.OS_TOOL_SCHEMAS.items():
            self._add(name, schema, os_tool(name))
        if self.control is not None:
            self._add_orchestration(spec)
        if spec.async_enabled:
            self._add("sys_call_async", SESSION_TOOL_SCHEMAS["sys_call_async"], call_async)
            self._add("sys_read_inbox", SESSION_TOOL_SCHEMAS["sys_read_inbox"], read_inbox)
            self._add("sys_cancel_async", SESSION_TOOL_SCHEMAS["sys_cancel_async"], cancel_async)
        self.terminals: SessionTerminals | None = None
        if spec.terminals and workplace is not None:  # the panes are on the runner
            self.terminals = SessionTerminals(
                session_id=session_id,
                specs=spec.terminals,
                server=workplace.panes,
                tasks=tasks,
                bus=services.bus,
                start_directory=workplace.start_directory,
            )
        elif spec.terminals and services.tmux is not None:
            self.terminals = SessionTerminals(
                session_id=session_id,
                specs=spec.terminals,
                server=services.tmux,
                tasks=tasks,
                bus=services.bus,
                start_directory=self._terminal_directory,
                sandbox=self.sandbox,
            )
        if self.terminals is not None:
            for name, schema in terminal_tools.TERMINAL_TOOL_SCHEMAS.items():
                self._add(name, schema, terminal_tool(name))

    def _add_orchestration(self, spec: AgentSpec) -> None:
        offered = granted_tools(spec)
        if "sys_session_share" not in offered:
            # Not offered, yet a call by its name is refused as "not enabled" (the
            # original's answer), not as an unknown tool.
            self._add(
                "sys_session_share",
                AGENT_TOOL_SCHEMAS["sys_session_share"],
                orchestrated(TOOLS["sys_session_share"]),
            )
            self._hidden.add("sys_session_share")
        for name in offered:
            if name == "sys_session_send":
                granted = spec.granted_sub_agents()
                about = {n: s.description or f"Sub-agent {n!r}." for n, s in granted.items()}
                schema = send_schema(about)
            else:
                schema = AGENT_TOOL_SCHEMAS[name]
            self._add(name, schema, orchestrated(TOOLS[name]))
            if name == "sys_session_send":
                # Results arrive in the inbox: reading it comes with dispatching.
                self._add("sys_read_inbox", SESSION_TOOL_SCHEMAS["sys_read_inbox"], read_inbox)

    def _add(self, name: str, schema: Mapping[str, Any], run: Builtin) -> None:
        self._builtins[name] = (
            ToolSchema(name, schema["description"], schema["parameters"]),
            run,
        )

    def schemas(self) -> tuple[ToolSchema, ...]:
        """Every tool this session offers: built-ins, registered tools, MCP tools (the
        spec's, then those of servers a connected client supplies) — except those a
        ``deny_tools`` policy always refuses, which the model is never shown."""
        own = (
            *(schema for name, (schema, _) in self._builtins.items() if name not in self._hidden),
            *(tool.schema for tool in self._python.values()),
            *(s for s in self._registry.schemas() if s.name not in self._builtins),
            *(schema for servers in self._mcp for schema in servers.schemas()),
        )
        client_mcp = self._services.client_mcp
        if client_mcp is not None:
            taken = {s.name for s in own}
            own = (*own, *client_mcp.schemas(self.session_id, taken))
        return tuple(s for s in own if not self._policies.always_denies(s.name))

    def offers(self, name: str) -> bool:
        return (
            name in self._builtins
            or name in self._python
            or self._registry.get(name) is not None
            or any(servers.offers(name) for servers in self._mcp)
            or self._client_server(name) is not None
        )

    def _client_server(self, name: str) -> McpServers | None:
        client_mcp = self._services.client_mcp
        if client_mcp is None:
            return None
        return client_mcp.server_for(self.session_id, name)

    # -- services: the spec's MCP servers ----------------------------------------------

    async def start_services(self, nursery: trio.Nursery) -> None:
        """Connect the spec's MCP servers, once, in ``nursery`` (the session's).

        Called as each turn is prepared (the spec's servers connect on the first), so
        their tools are offered to it; the connections stay open until
        :meth:`close_services`. Servers a client supplies that a stop of the session
        closed are connected again here (a failure there only leaves their tools out).

        Raises:
            McpServerFailed: a server of the spec did not start (its name and stderr
                tail said).
        """
        for servers in self._mcp:
            await servers.start(nursery)
        if self._services.client_mcp is not None:
            await self._services.client_mcp.resume(self.session_id)

    @property
    def services_running(self) -> int:
        """How many tasks of the session's nursery hold services (not work)."""
        return sum(1 for servers in self._mcp if servers.started)

    def close_services(self) -> None:
        """Close the MCP connections (their task then ends)."""
        for servers in self._mcp:
            servers.close()

    async def _ask_person(self, params: ElicitationParams, mark_waiting: bool) -> tuple[str, Any]:
        answer = await self._elicitations.ask(self.session_id, params, mark_waiting=mark_waiting)
        return answer.action, answer.content

    async def cwd(self) -> Path:
        """The working directory of the OS tools, created on first use.

        See :func:`working_directory`.

        Raises:
            ToolError: the session's files are on its runner, not here.
        """
        if self.workplace is not None:
            raise ToolError(
                f"this session's files are on runner {self.workplace.runner_id!r}; "
                "this needs them here"
            )
        if self._cwd is None:
            self._cwd = await working_directory(
                self.spec, self._session_cwd, self._services.place, self.session_id
            )
        return self._cwd

    async def _terminal_directory(self, spec_cwd: str | None, raw: str | None) -> Path:
        """Where a terminal of this session starts, inside its working directory here."""
        root = await self.cwd()
        return await trio.to_thread.run_sync(terminal_tools.start_directory, root, spec_cwd, raw)

    async def sandbox(self) -> SandboxPolicy | None:
        """The sandbox every process of the session runs in (None: ``type: none``) —
        its spec's, or without one, the nearest sandboxed ancestor session's.

        Raises:
            SandboxUnavailable: the spec asks for ``auto`` on a platform without one.
        """
        if self._sandbox is None:
            resolve = functools.partial(
                sandbox_policy,
                self.spec,
                await self.cwd(),
                self._services.place,
                inherited=self._inherited_sandbox,
            )
            self._sandbox = (await trio.to_thread.run_sync(resolve),)  # a few stat calls
        return self._sandbox[0]

    async def children_cwd(self) -> str | None:
        """Where a child this session creates works: where this one does (``None``
        for a session on a runner: its children inherit the runner, and each resolves
        its own ``os_env.cwd`` there)."""
        return None if self.workplace is not None else str(await self.cwd())

    # -- one call ----------------------------------------------------------------------

    async def call(
        self,
        name: str,
        arguments: str | Mapping[str, Any],
        *,
        in_turn: bool = True,
        on_ask: OnAsk | None = None,
    ) -> str:
        """Run one tool call through the policies; always returns the output string.

        ``on_ask`` is told of each policy ASK the call waits on (the request) and
        when it was answered (``None``): a caller across requests (MCP) answers
        "input required" meanwhile.

        Cancellation: propagates (an ASK waiting for an answer is withdrawn).
        """
        metrics = self._services.metrics
        if metrics is None:
            return await self._call(name, arguments, in_turn, on_ask)
        outcome = "cancelled"
        try:
            output = await self._call(name, arguments, in_turn, on_ask)
            outcome = _outcome_of(output)
            return output
        finally:
            metrics.tool_called(name if self.offers(name) else "unknown", outcome)

    async def _call(
        self, name: str, arguments: str | Mapping[str, Any], in_turn: bool, on_ask: OnAsk | None
    ) -> str:
        args = decode_arguments(arguments)
        if isinstance(args, str):
            if name in TOOLS and name in self._builtins:  # refused as the original does
                return json.dumps({"error": f"{name}: {args.removeprefix('Error: ')}"})
            return args
        if not self.offers(name):
            known = ", ".join(s.name for s in self.schemas())
            return f"Error: unknown tool {name!r} (available: {known})"
        call = PolicyEvent(
            PHASE_TOOL_CALL,
            {"tool_name": name, "tool_input": args},
            context=await self._call_context(name),
        )
        verdict = await self._settle(await self._policies.evaluate(call), call, in_turn, on_ask)
        if verdict.action == "DENY":
            return f"{_DENIED}{verdict.policy_name}: {verdict.reason}"
        output = await self._run(name, args, in_turn)
        result = PolicyEvent(
            PHASE_TOOL_RESULT, {"tool_name": name, "tool_input": args, "tool_output": output}
        )
        verdict = await self._settle(await self._policies.evaluate(result), result, in_turn, on_ask)
        if verdict.action == "DENY":
            marker = verdict.data if isinstance(verdict.data, str) else None
            return marker or f"[result withheld by policy {verdict.policy_name}]"
        if verdict.action == "ALLOW" and verdict.data is not None:
            return verdict.data if isinstance(verdict.data, str) else json.dumps(verdict.data)
        return output

    async def _call_context(self, name: str) -> dict[str, Any] | None:
        """What a policy knows about where a call acts: a file tool's working
        directory (``cwd``), so a write can be judged inside or outside it. None on a
        runner: the directory is on the runner's machine, unknown here (its file tools
        are contained beneath it; a write a sandbox's ``write_paths`` lets out is not
        asked about there)."""
        if name not in ("sys_os_write", "sys_os_edit") or name not in self._builtins:
            return None
        if self.workplace is not None:
            return None
        return {"cwd": str(await self.cwd())}

    async def evaluate(
        self,
        event: PolicyEvent | Mapping[str, Any],
        *,
        in_turn: bool = True,
        ask: ElicitationParams | None = None,
    ) -> Verdict:
        """The session's verdict on one policy event, an ASK settled by an elicitation.

        For harnesses that run their own tools and ask omnigent's policies first.
        ``ask`` is the elicitation an ASK opens instead of the default ``tool_call``
        one (a native agent's own phase); its message and policy name are the
        deciding policy's.

        Raises:
            InvalidInput: a malformed wire event.
        """
        if not isinstance(event, PolicyEvent):
            event = parse_policy_event(event)
        return await self._settle(await self._policies.evaluate(event), event, in_turn, ask=ask)

    async def _settle(
        self,
        verdict: Verdict,
        event: PolicyEvent,
        in_turn: bool,
        on_ask: OnAsk | None = None,
        ask: ElicitationParams | None = None,
    ) -> Verdict:
        """An ASK becomes ALLOW or DENY once its elicitation is answered."""
        if verdict.action != "ASK":
            return verdict
        if ask is not None:
            params = attrs.evolve(
                ask, message=verdict.elicitation_message, policy_name=verdict.policy_name
            )
        else:
            params = elicitation_params(
                verdict.elicitation_message,
                "tool_call" if event.type == PHASE_TOOL_CALL else "tool_result",
                policy_name=verdict.policy_name,
                tool_name=event.tool_name,
                tool_input=dict(event.data.get("tool_input") or {}),
            )
        if on_ask is None:
            answer = await self._elicitations.ask(self.session_id, params, mark_waiting=in_turn)
            return verdict.resolve(answer.accepted, event)
        async with self._elicitations.open(self.session_id, params, mark_waiting=in_turn) as waiter:
            on_ask(waiter.request)
            try:
                await waiter.done.wait()
            finally:
                on_ask(None)
            assert waiter.resolution is not None
            return verdict.resolve(waiter.resolution.accepted, event)

    async def _run(self, name: str, args: dict[str, Any], in_turn: bool) -> str:
        supplied = self._services.client_tools.get(self.session_id, name)
        builtin = self._builtins.get(name)
        if supplied is not None:
            output = await run_client_tool(name, supplied, args)
        elif builtin is None:
            if name in self._python:
                return await self._registry.run(self._python[name], args)
            for servers in self._mcp:
                if servers.offers(name):
                    return await servers.call(name, args, in_turn=in_turn)
            client = self._client_server(name) if self._registry.get(name) is None else None
            if client is not None:
                return await client.call(name, args, in_turn=in_turn)
            return await self._registry.invoke(name, args)
        else:
            output = await builtin[1](self, args)
        if os_tools.is_mutating(name) or name == "sys_terminal_send":
            await self._files_changed()
        return output

    async def _files_changed(self) -> None:
        now = trio.current_time()
        if now - self._last_change >= CHANGED_FILES_WINDOW:
            self._last_change = now
            await self._bus.publish(self.session_id, ChangedFilesInvalidated())

    # -- used by the async tools -------------------------------------------------------

    def start_background(self, tool: str, args: dict[str, Any]) -> str:
        return self._tasks.start(tool, lambda: self.call(tool, args, in_turn=False))

    def cancel_background(self, handle_id: str) -> bool:
        return self._tasks.cancel(handle_id)

    async def drain_inbox(
        self, deliver: Callable[[list[str]], Awaitable[None]] | None = None
    ) -> list[str]:
        """Read the inbox: its items as lines, each marked delivered once read.

        A sub-agent's result passes this session's ``PHASE_TOOL_RESULT`` policies
        first (as ``sys_session_send``'s delayed output): a DENY or ASK shows
        ``[Result suppressed by policy: <reason>]``, an ALLOW with ``data`` replaces
        it. If the policies cannot be evaluated the output is hidden and the item
        stays unread, for the next read.

        ``deliver``, if given, is awaited with the lines *before* the items are marked
        delivered, to store what carries them (a wake-up turn's message): a crash in
        between then delivers them again, rather than never.
        """
        async with self._drain_lock:
            rows = await self._store.peek_inbox(self.session_id)
            if not rows:
                return []
            vetted, read = await vet_inbox(rows, self._vet_result)
            lines = format_inbox(vetted)
            if deliver is not None and lines:
                await deliver(lines)
            if read:
                count = await self._store.ack_inbox(self.session_id, read)
                # No waiting for room here: the rows are already marked delivered.
                await self._bus.publish_now(self.session_id, InboxUpdated(count=count))
            return lines

    async def _vet_result(self, payload: dict[str, Any]) -> Verdict:
        event = PolicyEvent(
            PHASE_TOOL_RESULT,
            {
                "tool_name": "sys_session_send",
                "tool_input": {
                    "agent": payload.get("agent"),
                    "title": payload.get("title"),
                    "conversation_id": payload.get("conversation_id"),
                },
                "tool_output": payload.get("output", ""),
            },
        )
        return await self._policies.evaluate(event)
