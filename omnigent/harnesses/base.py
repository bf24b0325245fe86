"""The harness interface: what a turn gets, and what it may ask of the core.

A *harness* is the agent loop behind a session. For each turn the core calls
``await harness.run_turn(request, ctx)``; the harness streams output and asks for
tools through ``ctx`` (a :class:`TurnContext`), and returns when the turn is done.
Raising ends the turn ``failed`` with the exception's message; being cancelled
(interrupt, stop, shutdown) ends it ``cancelled``. The core, not the harness, publishes
``response.created``, the terminal ``response.*`` event and every ``session.status``.

Harnesses are created per session by a :data:`HarnessFactory` from a
:class:`HarnessEnv`, and closed with ``aclose()`` when the session goes idle or away.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import attrs
import httpx

from ..model import ElicitationParams, Event, Item, MessageItem, Usage
from ..spec import AgentSpec, ExecutorConfig

if TYPE_CHECKING:
    from ..processes import ProcessManager
    from ..processes.sandbox import SandboxPolicy
    from ..providers import Provider

__all__ = [
    "Harness",
    "HarnessEnv",
    "HarnessFactory",
    "HarnessState",
    "MemoryHarnessState",
    "MessageWriter",
    "ToolSchema",
    "TurnContext",
    "TurnRequest",
]


@attrs.frozen
class ToolSchema:
    """A tool as offered to a model: name, description, JSON Schema of its arguments."""

    name: str
    description: str
    parameters: Mapping[str, Any]

    def to_openai(self) -> dict[str, Any]:
        """The Chat Completions ``tools`` entry for this tool."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": dict(self.parameters),
            },
        }


@attrs.frozen
class TurnRequest:
    """Everything a harness needs to run one turn.

    Attributes:
        history: every item of the session before this turn, oldest first. A harness
            that keeps no state of its own gets the whole conversation here, exactly
            once, whether the session is warm or was just reloaded after a restart.
        input: the user messages this turn answers (``file_id`` images already
            resolved to ``data:`` URLs).
        instructions: the agent's prompt.
        model: the model to use (override, else the spec's), or ``None``.
        tools: the tools the agent may call.
    """

    session_id: str
    response_id: str
    turn_number: int
    history: tuple[Item, ...]
    input: tuple[MessageItem, ...]
    instructions: str
    model: str | None
    tools: tuple[ToolSchema, ...]
    spec: AgentSpec


@runtime_checkable
class MessageWriter(Protocol):
    """An assistant message being streamed; see :meth:`TurnContext.open_message`."""

    item_id: str

    async def write(self, delta: str) -> None:
        """Stream one piece of text (published as ``response.output_text.delta``)."""
        ...


class TurnContext(Protocol):
    """The core's side of a turn, as a harness sees it."""

    session_id: str
    response_id: str

    def open_message(self) -> AbstractAsyncContextManager[MessageWriter]:
        """Stream an assistant message; on exit it is persisted and published as done.

        A message left by an exception or cancel is kept with status ``incomplete``
        if it has any text.
        """
        ...

    async def add_item(self, item: Item) -> None:
        """Persist an item of this turn and publish ``response.output_item.done``."""
        ...

    async def emit(self, event: Event) -> None:
        """Publish an auxiliary event on the session (resources, child updates, …)."""
        ...

    async def call_tool(
        self, name: str, arguments: str | Mapping[str, Any], *, call_id: str | None = None
    ) -> str:
        """Run a tool through the session's policies and return its output string.

        The call and its output are recorded as ``function_call`` and
        ``function_call_output`` items. Failures come back as ``Error: …`` strings
        the model can act on; this only raises on cancellation.
        """
        ...

    async def take_injections(self) -> list[MessageItem]:
        """User messages that arrived during this turn, now handed to the harness.

        Messages taken here are answered by this turn; those left untaken are
        answered by a continuation turn.
        """
        ...

    async def wait_for_injection(self) -> None:
        """Return once a message is buffered for this turn (at once if one is).

        For harnesses that forward messages as they arrive (an external harness)
        rather than polling :meth:`take_injections` between steps.
        """
        ...

    def launching(self) -> AbstractAsyncContextManager[None]:
        """Show ``session.status launching`` while the block runs (a harness process
        starting), then ``running`` again when it exits normally."""
        ...

    async def elicit(self, params: ElicitationParams) -> tuple[str, Any]:
        """Ask the person behind the session, as the core asks for approvals.

        The request is published on the session and mirrored to its ancestors; the
        session shows ``waiting`` until it is answered. Returns ``(action,
        content)`` with action ``accept``, ``decline`` or ``cancel``.

        Cancellation: withdraws the elicitation.
        """
        ...

    async def evaluate_policy(
        self, event: Mapping[str, Any], *, ask: ElicitationParams | None = None
    ) -> Mapping[str, Any]:
        """Evaluate the session's policies on a wire policy event.

        ``event`` is ``{type: PHASE_TOOL_CALL | PHASE_TOOL_RESULT, data, ...}`` as
        ``POST /sessions/{id}/policies/evaluate`` takes it; an ASK is settled by an
        elicitation first — ``ask`` if given (a harness's own phase, such as
        ``codex_command_approval``; the message and policy name are set from the
        deciding policy), else a ``tool_call`` / ``tool_result`` one. Returns the
        verdict's wire form ``{result, reason?, data?}``.

        Raises:
            InvalidInput: ``event`` is malformed.
        """
        ...

    def report_response_status(self, status: str, error: str | None = None) -> None:
        """Relay an in-stream ``response.completed`` / ``response.failed`` outcome.

        The last report decides how the turn ends if the harness then returns
        normally: ``failed`` ends the turn ``failed`` with ``error``; a later
        ``completed`` overrides an earlier ``failed``.
        """
        ...

    def record_usage(self, usage: Usage, model: str | None = None) -> None:
        """Report what one model call used, as the model's endpoint said.

        ``model`` is the model the call went to (default: the turn's). The core
        prices it, adds it to the turn's usage (``response.usage`` on the terminal
        event, the session's sums), the metrics and the turn's span. Never raises.
        """
        ...

    def check_budget(self) -> None:
        """Before a model call: raise if it would cross the session's budget.

        A harness that makes its own model calls asks before each; the core asks
        before the turn's first.

        Raises:
            BudgetExceeded: the spec's ``limits`` would be crossed (the turn then
                ends ``failed`` with code ``budget_exceeded``).
        """
        ...


class Harness(Protocol):
    """An agent loop. One instance serves one session for a while."""

    async def run_turn(self, request: TurnRequest, ctx: TurnContext) -> None: ...

    async def aclose(self) -> None: ...


async def _no_working_directory() -> Path:
    return Path.cwd()


async def _no_sandbox() -> SandboxPolicy | None:
    return None


class HarnessState(Protocol):
    """Small strings a harness keeps on its session, across turns and restarts.

    A native coding agent keeps its own conversation id here (Claude Code's session
    id, a Codex thread id), so a later turn — also after a server restart —
    continues that conversation. Values are scoped to the session *and* the harness
    name; they are deleted with the session.
    """

    async def get(self, key: str) -> str | None:
        """The value stored under ``key``, or ``None``."""
        ...

    async def set(self, key: str, value: str | None) -> None:
        """Store ``value`` under ``key`` (``None`` removes it).

        Raises:
            InvalidInput: ``key`` is empty or over 100 characters, or ``value`` is over
                4096 characters.
        """
        ...


class MemoryHarnessState:
    """A :class:`HarnessState` in a dict: for harnesses built outside a runtime."""

    def __init__(self) -> None:
        self._values: dict[str, str] = {}

    async def get(self, key: str) -> str | None:
        return self._values.get(key)

    async def set(self, key: str, value: str | None) -> None:
        if value is None:
            self._values.pop(key, None)
        else:
            self._values[key] = value


@attrs.frozen
class HarnessEnv:
    """What a harness factory is given to build a harness for one session.

    Attributes:
        harness_name: the canonical name the harness runs under (its registry name).
        processes: the runtime's process manager, for harnesses that run a child
            process (``None`` when built outside a runtime).
        working_directory: the session's working directory (its OS tools' ``cwd``),
            created on first use.
        state: what the harness keeps on the session across turns and restarts.
        data_dir: a directory of this harness's own that outlives the runtime
            (``$OMNIGENT_HOME/harnesses/<harness name>``; created by the harness when
            it needs it), ``None`` when built outside a runtime.
        sandbox: the session's sandbox (``os_env.sandbox``; None: ``type: none``): a
            harness that starts a process runs it inside (``ProcessSpec.sandbox``,
            widened with :meth:`SandboxPolicy.for_process`). Raises
            :class:`~omnigent.errors.SandboxUnavailable` for ``auto`` on a platform
            without one.
        provider: the provider of ``$OMNIGENT_HOME/config.yaml`` this harness goes
            through for its endpoint (:meth:`~omnigent.providers.ProviderConfig.
            serving`), ``None`` without one: where its model endpoint comes from when neither the
            spec nor the environment names one (see
            :func:`omnigent.harnesses.native._cli.model_endpoint`).
    """

    session_id: str
    spec: AgentSpec
    config: ExecutorConfig
    http: httpx.AsyncClient
    harness_name: str = "unknown"
    processes: ProcessManager | None = None
    working_directory: Callable[[], Awaitable[Path]] = _no_working_directory
    state: HarnessState = attrs.field(factory=MemoryHarnessState)
    data_dir: Path | None = None
    provider: Provider | None = None
    sandbox: Callable[[], Awaitable[SandboxPolicy | None]] = _no_sandbox


HarnessFactory = Callable[[HarnessEnv], Harness]
